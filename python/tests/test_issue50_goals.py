"""lab/issue50_goals.py: issue 50's goal rows judged from a goals call's folder (no GPU needed)."""

import pathlib

import pytest
from conftest import load_lab_tool

RECORDED = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results" / "2026-12-06-h100-goals-tip"


@pytest.fixture(scope="module")
def goals():
    return load_lab_tool("issue50_goals")


def lines(goals, capsys, folder):
    goals.main([str(folder)])
    return capsys.readouterr().out.splitlines()


def test_a_recorded_call_is_judged_by_its_medians(goals, capsys):
    out = lines(goals, capsys, RECORDED)
    assert out[0] == "hot 8 GiB, of the copy ceiling: 0.961, 0.959, 0.957 (median 0.959; goal >= 0.95: met)"
    one_thread = next(l for l in out if l.startswith("4.00KiB, 64 in flight from one thread, tree"))
    assert "(median 0.936; goal >= 1.0: NOT met)" in one_thread
    assert len(one_thread.split(": ", 1)[1].split(", ")) == 8  # every round shown
    latency = next(l for l in out if l.startswith("one 4 KiB read at a time, tree"))
    assert "goal <= 1.1: NOT met" in latency
    baseline = next(l for l in out if l.startswith("one 4 KiB read at a time, old"))
    assert "goal" not in baseline.split("(")[1]  # the baseline is shown, never judged


def probe_output(rows):
    header = "size      mode          requests         GB/s      M req/s     us/req  bytes checked"
    return "\n".join([header] + [f"{size} {mode:13s} 65536 {gb:12.2f} {0.5:12.3f} {us:10.1f}  all" for size, mode, gb, us in rows])


def test_a_row_nothing_measured_is_said_so_and_a_lower_latency_meets_its_goal(goals, capsys, tmp_path):
    (tmp_path / "tree-one-1.txt").write_text(probe_output([("4.00 KiB", "ferry-1", 0.4, 8.8), ("4.00 KiB", "plain-1", 0.5, 8.4)]))
    (tmp_path / "tree-singles-1.txt").write_text("ferry_small_reads: could not open the file\n")
    out = lines(goals, capsys, tmp_path)
    assert out[0] == "hot 8 GiB, of the copy ceiling: nothing measured"
    assert "4.00KiB, 64 in flight from one thread, tree / the loop: nothing measured" in out
    assert "one 4 KiB read at a time, tree / the loop's latency: 1.048 (median 1.048; goal <= 1.1: met)" in out
