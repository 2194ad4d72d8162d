"""ferry.config: attribute access for every setting, sizes with units, override(), per-file settings."""

from __future__ import annotations

import pytest

import ferry

EXPECTED = ["threads", "task_size", "direct_io", "compat_mode", "gds_threshold", "bounce_buffer_size",
            "bounce_buffers_per_thread", "pinned_budget", "require", "nvtx", "io_engine", "remote_connections", "remote_max_retries",
            "remote_retry_delay_ms", "remote_retry_max_delay_ms", "remote_connect_timeout_ms",
            "remote_stall_timeout_ms", "remote_min_rate", "remote_verify_tls", "s3_region", "s3_endpoint",
            "s3_profile", "s3_addressing", "s3_anonymous"]


def test_every_setting_of_the_table_is_an_attribute():
    names = [s.name for s in ferry.config.settings()]
    assert names == EXPECTED
    for s in ferry.config.settings():
        assert s.env == "FERRY_" + s.name.upper()
        assert s.description
        getattr(ferry.config, s.name)
        assert s.name in dir(ferry.config)
    assert set(ferry.config.as_dict()) == set(EXPECTED)


def test_types_of_values():
    assert isinstance(ferry.config.threads, int) and ferry.config.threads >= 1
    assert isinstance(ferry.config.task_size, int)
    assert ferry.config.compat_mode in ("auto", "on", "off")
    assert ferry.config.direct_io in ("auto", "on", "off")
    assert ferry.config.require in ("none", "gds")


def test_set_sizes_as_ints_and_strings():
    ferry.config.task_size = "8MiB"
    assert ferry.config.task_size == 8 << 20
    ferry.config.task_size = 65536
    assert ferry.config.task_size == 65536
    ferry.config.gds_threshold = "1k"
    assert ferry.config.gds_threshold == 1024
    assert ferry.config.source("task_size") == "api"


def test_set_choices_and_bools():
    ferry.config.compat_mode = "on"
    assert ferry.config.compat_mode == "on"
    ferry.config.direct_io = False
    assert ferry.config.direct_io == "off"
    ferry.config.direct_io = True
    assert ferry.config.direct_io == "on"


def test_invalid_values_raise_and_change_nothing():
    before = ferry.config.as_dict()
    with pytest.raises(ferry.InvalidArgumentError, match="task_size"):
        ferry.config.task_size = "lots"
    with pytest.raises(ValueError, match="compat_mode"):
        ferry.config.compat_mode = "sometimes"
    with pytest.raises(ValueError):
        ferry.config.update(threads=3, task_size="-1")  # all or nothing
    with pytest.raises(TypeError):
        ferry.config.threads = 2.5
    assert ferry.config.as_dict() == before


def test_unknown_settings_are_attribute_errors():
    with pytest.raises(AttributeError, match="no setting 'nonsense'"):
        ferry.config.nonsense
    with pytest.raises(AttributeError):
        ferry.config.nonsense = 1
    with pytest.raises(AttributeError):
        del ferry.config.threads


def test_override_restores_the_previous_settings():
    ferry.config.compat_mode = "off"
    with ferry.config.override(compat_mode="on", task_size="1MiB") as cfg:
        assert cfg is ferry.config
        assert ferry.config.compat_mode == "on"
        assert ferry.config.task_size == 1 << 20
        with ferry.config.override(task_size="2MiB"):
            assert ferry.config.task_size == 2 << 20
        assert ferry.config.task_size == 1 << 20
    assert ferry.config.compat_mode == "off"
    assert ferry.config.task_size == 4 << 20


def test_override_restores_after_an_exception():
    before = ferry.config.as_dict()
    with pytest.raises(RuntimeError):
        with ferry.config.override(threads=1):
            raise RuntimeError("boom")
    assert ferry.config.as_dict() == before


def test_files_use_the_settings_of_their_opening(make_file):
    path, _ = make_file(1 << 20)
    with ferry.config.override(task_size="64KiB"):
        f = ferry.open(path)
    g = ferry.open(path, task_size="128KiB", threads=2)
    try:
        assert f.config["task_size"] == 64 * 1024
        assert g.config["task_size"] == 128 * 1024 and g.config["threads"] == 2
        assert ferry.config.task_size == 4 << 20  # per-file settings do not leak into ferry.config
        assert f.pread(bytearray(1 << 20)).report["total_ops"] == 16
        assert g.pread(bytearray(1 << 20)).report["total_ops"] == 8
    finally:
        f.close()
        g.close()


def test_reset_forgets_settings_made_in_code(monkeypatch):
    monkeypatch.setenv("FERRY_TASK_SIZE", "2MiB")
    ferry.config.task_size = "8MiB"
    ferry.config.reset()
    assert ferry.config.task_size == 2 << 20
    assert ferry.config.source("task_size") == "environment"


def test_repr_lists_every_setting():
    text = repr(ferry.config)
    for name in EXPECTED:
        assert name + "=" in text


def test_parse_and_format_size():
    assert ferry.parse_size("4MiB") == 4 << 20
    assert ferry.parse_size("1GB") == 10**9
    assert ferry.parse_size(123) == 123
    with pytest.raises(ValueError):
        ferry.parse_size("4 bananas")
    assert ferry.format_size(1 << 30) == "1.00 GiB"


# pinned_budget is process-wide (issue 50): the process's table carries it, a file's or a call's refuses it.
def test_pinned_budget_is_a_process_setting_and_not_one_of_a_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 4096)
    before = ferry.config.pinned_budget
    assert before >= 64 << 20
    with pytest.raises(TypeError, match="process-wide.*ferry.config.pinned_budget"):
        ferry.open(path, pinned_budget="1GiB")
    with pytest.raises(TypeError, match="process-wide"):
        ferry.warm_up(0, pinned_budget="1GiB")
    with ferry.config.override(pinned_budget="96MiB"):
        assert ferry.config.pinned_budget == 96 << 20
        assert ferry.pinned_memory()["budget"] == 96 << 20
    assert ferry.pinned_memory()["budget"] == before
    with pytest.raises(ferry.InvalidArgumentError, match="pinned_budget"):
        ferry.config.pinned_budget = "1MiB"


def test_pinned_memory_says_what_staging_holds():
    use = ferry.pinned_memory()
    assert set(use) == {"budget", "pinned_bytes", "peak_bytes", "waits", "waited_seconds"}
    assert use["budget"] == ferry.config.pinned_budget
    assert 0 <= use["pinned_bytes"] <= use["peak_bytes"] or use["peak_bytes"] == 0
    assert isinstance(use["waited_seconds"], float) and use["waits"] >= 0

