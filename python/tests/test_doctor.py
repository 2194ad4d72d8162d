"""ferry.doctor(): the library's doctor as a dict, the same report `ferry doctor --json` prints."""

from __future__ import annotations

import json
import subprocess

import pytest

import ferry
from conftest import cli_path


def test_doctor_report_has_the_documented_shape(make_file):
    path, _ = make_file(1 << 20)
    report = ferry.doctor(path)
    assert report["schema"] == "ferry.doctor/1"
    assert report["path"] == str(path)
    assert [s["id"] for s in report["sections"]] == ["cuda", "cufile", "nvidia_fs", "platform", "file", "settings"]
    for section in report["sections"]:
        assert section["status"] in {"ok", "warning", "problem", "not_applicable"}
    prediction = report["prediction"]
    assert prediction["read_works"] is True
    assert prediction["route"] in ferry.ROUTES
    assert report["exit_status"] == 0
    assert report["probe"] is None


def test_doctor_probe_proves_its_prediction(make_file):
    path, _ = make_file(4 << 20)
    report = ferry.doctor(path, probe=True)
    probe = report["probe"]
    assert probe["ran"] is True
    assert probe["bytes"] == 4 << 20
    assert probe["matches_prediction"] is True, probe["verdict"]
    assert report["prediction"]["route"] in probe["report"]["summary"]


def test_doctor_names_a_missing_file(tmp_path):
    report = ferry.doctor(tmp_path / "nope.bin")
    assert report["exit_status"] == 1
    assert report["prediction"]["read_works"] is False
    assert "No such file or directory" in report["prediction"]["explanation"]


def test_doctor_matches_the_cli(make_file):
    cli = cli_path()
    if cli is None:
        pytest.skip("the ferry CLI was not found (set FERRY_CLI or build with FERRY_BUILD_CLI=ON)")
    path, _ = make_file(1 << 20)
    ours = ferry.doctor(path)
    out = subprocess.run([cli, "doctor", str(path), "--json"], capture_output=True, text=True, timeout=300)
    theirs = json.loads(out.stdout)
    assert out.returncode == theirs["exit_status"]
    assert ours["prediction"]["route"] == theirs["prediction"]["route"]
    assert ours["prediction"]["reason"] == theirs["prediction"]["reason"]
    assert ours["exit_status"] == theirs["exit_status"]
