"""lab/small_reads_goals.py: issue 21's goals judged from ferry_small_reads' JSON (no GPU needed)."""

import json

import pytest
from conftest import load_lab_tool

KIB, MIB = 1024, 1024 * 1024


@pytest.fixture(scope="module")
def goals():
    return load_lab_tool("small_reads_goals")


def row(mode, size, cache="hot", gb=0.0, mreq=0.0, us=0.0, batch_bytes=32 * MIB, batches_in_flight=2, verified=True):
    return {"mode": mode, "size": size, "cache": cache, "gb_per_s": gb, "m_requests_per_s": mreq,
            "us_per_request": us, "batch_bytes": batch_bytes, "batches_in_flight": batches_in_flight,
            "verified": verified}


def judged(goals, tmp_path, rows, ceiling="50", capsys=None):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rows))
    assert goals.main(["--ceiling", ceiling, "--json", str(path)]) == 0
    return {g["goal"]: g for g in json.loads(capsys.readouterr().out)["goals"]}


def test_the_median_of_the_passes_decides_against_the_issues_numbers(goals, tmp_path, capsys):
    got = judged(goals, tmp_path, [row("ferry-mt", 4 * KIB, gb=1.3), row("ferry-mt", 4 * KIB, gb=2.5),
                                   row("ferry-mt", 4 * KIB, gb=2.2), row("plain", 4 * KIB, gb=2.4),
                                   row("ferry-mt", MIB, gb=27.0)], capsys=capsys)
    small = got["4 KiB single reads, 64 in flight (ferry-mt), GB/s"]
    assert small["passes"] == [1.3, 2.5, 2.2] and small["median"] == 2.2 and small["target"] == 2.1
    assert small["met"] is True and "plain loop 2.40" in small["reference"]
    assert got["1 MiB single reads, 64 in flight (ferry-mt), GB/s"]["met"] is True
    nothing = got["64 KiB single reads, 64 in flight (ferry), GB/s"]
    assert nothing["met"] is None and nothing["passes"] == [], "a goal nobody measured must not pass"


def test_one_at_a_time_is_held_to_the_plain_loop_and_4_kib_to_13_us(goals, tmp_path, capsys):
    got = judged(goals, tmp_path, [row("ferry-1", 4 * KIB, us=12.5), row("plain-1", 4 * KIB, us=9.0),
                                   row("ferry-1", 64 * KIB, us=30.0), row("plain-1", 64 * KIB, us=24.0)],
                 capsys=capsys)
    four = got["4 KiB one at a time, us"]
    assert four["target"] == pytest.approx(10.8) and four["met"] is False  # 1.2 x 9.0 is below 13
    sixty_four = got["64 KiB one at a time, us"]
    assert sixty_four["target"] == pytest.approx(28.8) and sixty_four["met"] is False


def test_batches_are_held_to_shares_of_the_copy_ceiling_read_from_its_tool(goals, tmp_path, capsys):
    ceiling = tmp_path / "copy-ceiling.txt"
    ceiling.write_text(" 0 reader threads:  copy 256 MiB x 2 streams 50.00 GiB/s;  copy 4 MiB x 16 streams 48.00 GiB/s;\n"
                       " 8 reader threads:  copy 256 MiB x 2 streams 40.00 GiB/s;  readers 45.00 GiB/s\n")
    got = judged(goals, tmp_path, [row("batch", 4 * KIB, mreq=4.2), row("batch", 64 * KIB, gb=43.0),
                                   row("batch", 64 * KIB, gb=44.0, batch_bytes=64 * MIB), row("batch", MIB, gb=48.0),
                                   row("batch", MIB, gb=49.0, batches_in_flight=4)],
                 ceiling=str(ceiling), capsys=capsys)
    gb = 50.0 * 1.073741824
    assert got["4 KiB batches of 32 MiB, 2 in flight, M pieces/s"]["met"] is True
    assert got["64 KiB batches of 32 MiB, 2 in flight, GB/s"]["target"] == round(0.8 * gb, 2)
    assert got["64 KiB batches of 32 MiB, 2 in flight, GB/s"]["met"] is True       # 43.0 >= 42.95
    assert got["64 KiB batches of 64 MiB, 2 in flight, GB/s"]["passes"] == [44.0]  # batch sizes are judged apart
    assert got["1 MiB batches of 32 MiB, 2 in flight, GB/s"]["met"] is False       # 48.0 < 48.32
    assert got["1 MiB batches of 32 MiB, 4 in flight, GB/s"]["passes"] == [49.0]   # and batches in flight


def test_cold_reads_are_held_to_the_raw_rate_of_the_same_call(goals, tmp_path, capsys):
    got = judged(goals, tmp_path, [row("raw-host", 4 * KIB, cache="cold", gb=0.40),
                                   row("batch", 4 * KIB, cache="cold", gb=0.37),
                                   row("ferry-mt", 4 * KIB, cache="cold", gb=0.30)], capsys=capsys)
    assert got["cold 4 KiB (batch), GB/s"]["met"] is True
    assert got["cold 4 KiB (ferry-mt), GB/s"]["met"] is False


def test_a_row_whose_bytes_were_not_checked_is_refused(goals, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([row("batch", 4 * KIB, mreq=9.0, verified=False)]))
    with pytest.raises(SystemExit, match="not verified"):
        goals.main(["--ceiling", "50", str(path)])


def test_a_ceiling_file_without_the_line_it_needs_is_refused(goals, tmp_path):
    path = tmp_path / "r.json"
    path.write_text("[]")
    bad = tmp_path / "ceiling.txt"
    bad.write_text("something else\n")
    with pytest.raises(SystemExit, match="no line without readers"):
        goals.main(["--ceiling", str(bad), str(path)])
