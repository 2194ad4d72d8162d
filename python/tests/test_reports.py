"""Route reports: dicts with the C++ JSON keys, readable reprs, per request / file / process, and the
same numbers as the C++ CLI for the same file and settings."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import ferry
from conftest import cli_read_report, route_signature

KEYS = {"routes", "reasons", "io", "cufile", "notes", "stream_order", "total_ops", "total_bytes", "summary"}


def test_report_is_a_dict_with_the_cpp_keys(make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path, task_size="256KiB") as f:
        report = f.pread(np.empty(1 << 20, dtype=np.uint8)).report
    assert isinstance(report, dict)
    assert KEYS <= set(report)
    assert set(report["routes"]) == set(ferry.ROUTES)
    assert report["routes"]["host"] == {"ops": 4, "bytes": 1 << 20, "nanoseconds": report["routes"]["host"]["nanoseconds"]}
    assert report["total_ops"] == 4 and report["total_bytes"] == 1 << 20
    assert report.routes_used == {"host": 4}
    [reason] = report["reasons"]
    assert reason["route"] == "host" and reason["reason"] == "buffer_is_host_memory" and reason["ops"] == 4
    assert reason["text"] == "buffer is host memory"
    assert report["cufile"] is None
    assert report["io"]["pinned_wait_ns"] == 0  # host memory needs no pinned staging, so it never waits for it
    assert "pinned memory" not in report.summary
    assert json.loads(json.dumps(report)) == dict(report)  # plain JSON types all the way down


def test_repr_and_str_are_readable(make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path) as f:
        report = f.pread(bytearray(1 << 20)).report
    text = repr(report)
    assert text.startswith("ferry.Report(")
    assert report.summary in text
    assert "host" in text and "buffer is host memory" in text
    assert str(report) == report.table.rstrip()
    assert "route" in report.table


def test_pickle_keeps_the_table(make_file):
    path, _ = make_file(4096)
    with ferry.open(path) as f:
        report = f.pread(bytearray(4096)).report
    copy = pickle.loads(pickle.dumps(report))
    assert copy == report and copy.table == report.table and isinstance(copy, ferry.Report)


def test_file_report_accumulates_and_last_report_is_per_call(make_file):
    path, _ = make_file(1 << 20)
    with ferry.open(path, task_size="128KiB") as f:
        f.read(bytearray(512 * 1024))
        assert f.last_report["total_ops"] == 4
        f.read(bytearray(512 * 1024))
        f.pread(bytearray(1 << 20)).result()
        total = f.report()
    assert total["total_ops"] == 16
    assert total["total_bytes"] == 2 << 20


def test_write_reports(tmp_path):
    with ferry.open(tmp_path / "w.bin", "w", task_size="64KiB") as f:
        f.write(np.zeros(256 * 1024, dtype=np.uint8))
        assert f.last_report["total_ops"] == 4
        assert f.last_report.routes_used == {"host": 4}


def test_process_stats_grow_by_what_was_moved(make_file):
    path, _ = make_file(1 << 20)
    ferry.reset_stats()
    assert ferry.stats()["total_ops"] == 0
    with ferry.open(path, task_size="256KiB") as f:
        f.pread(bytearray(1 << 20)).result()
    stats = ferry.stats()
    assert isinstance(stats, ferry.Report)
    assert stats["total_ops"] == 4 and stats["total_bytes"] == 1 << 20
    assert stats.routes_used == {"host": 4}
    with ferry.open(path) as f:
        f.read()
    assert ferry.stats()["total_bytes"] == 2 << 20


@pytest.mark.parametrize("settings", [
    {"task_size": "256KiB", "direct_io": "off"},
    {"task_size": "1MiB", "direct_io": "on", "compat_mode": "on"},
    {"task_size": "4MiB", "direct_io": "auto", "compat_mode": "auto"},
])
def test_host_report_matches_the_cli(make_file, settings):
    path, _ = make_file(5 * 1024 * 1024 + 77, seed=2)
    cli = cli_read_report(path, settings)
    with ferry.open(path, **settings) as f:
        py = f.pread(np.empty(f.size(), dtype=np.uint8)).report
    assert route_signature(py) == route_signature(cli)
