"""ferry.doctor(): the library's doctor, else the CLI's `doctor --json`, else an honest NotImplementedError."""

from __future__ import annotations

import pytest

import ferry
from ferry import _ferry


def test_doctor_returns_a_dict_or_says_what_is_missing(tmp_path):
    try:
        report = ferry.doctor(tmp_path)
    except NotImplementedError as e:
        assert not _ferry.has_doctor_json
        assert "ferry.doctor() is not available" in str(e)
        assert "doctor_json" in str(e)
    else:
        assert isinstance(report, dict) and report


def test_doctor_without_a_cli_names_what_it_looked_for(monkeypatch):
    if _ferry.has_doctor_json:
        pytest.skip("this build has the library's doctor; the CLI fallback is not used")
    monkeypatch.setenv("FERRY_CLI", "")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(NotImplementedError, match=r"no ferry CLI was found"):
        ferry.doctor()
