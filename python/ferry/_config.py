"""Settings: ferry.config (the process-wide table, by attribute), the per-file overrides' plumbing, and
ferry.parse_size / ferry.format_size, which parse and print sizes as the settings do."""

from __future__ import annotations

import contextlib
import numbers
import os
import threading
from typing import Dict, Iterator, List, NamedTuple, Optional, Union

from . import _args, _ferry
from ._errors import invalid_argument as _errors_invalid_argument

SettingValue = Union[int, str, bool]

# The one setting that only the process-wide table may carry: a File's own config does not change it.
PROCESS_WIDE = "pinned_budget"


class Setting(NamedTuple):
    """One row of Ferry's settings table."""

    name: str
    env: str
    default: str
    description: str


def _setting_names() -> List[str]:
    return [row[0] for row in _ferry.settings_table()]


def _value_from_text(text: str) -> SettingValue:
    return int(text) if text.isdigit() else text


def _numeric_setting(name: str) -> bool:
    return _ferry.default_config().get(name).isdigit()


def _value_to_text(name: str, value: SettingValue) -> str:
    """A setting's value as the text the C++ side parses. Numbers (and size strings such as "4MiB") for
    numeric settings, strings or bools (on/off) for the others; anything else is a TypeError. Whether a
    value is acceptable is for the C++ side to say (InvalidArgumentError, a ValueError)."""
    numeric = _numeric_setting(name)
    if _args.is_bool(value):
        if numeric:
            raise TypeError(f"setting {name!r} takes an int or a size string (\"4MiB\"), not bool")
        return "on" if value else "off"
    if isinstance(value, numbers.Integral):
        if not numeric:
            raise TypeError(f"setting {name!r} takes a str (for example \"auto\") or a bool, not {type(value).__name__}")
        n = int(value)
        if n > _args.MAX_U64:
            raise OverflowError(f"setting {name!r}: {n} does not fit in 64 bits")
        return str(n)
    if isinstance(value, str):
        return _args.text(f"setting {name!r}", value)
    kinds = "an int or a str (\"4MiB\")" if numeric else "a str (\"auto\") or a bool"
    raise TypeError(f"setting {name!r} takes {kinds}, not {type(value).__name__}")


def _apply(cfg: "_ferry.Config", settings: Dict[str, SettingValue]) -> "_ferry.Config":
    for name, value in settings.items():
        cfg.set(name, _value_to_text(name, value))
    return cfg


def _overrides(settings: Dict[str, SettingValue], refusal: str) -> Optional["_ferry.Config"]:
    """ferry.config with ``settings`` applied, for one file or checkpoint (None when there are none). An
    unknown name raises ``TypeError``: ``refusal``, the name, and the list of settings."""
    if not settings:
        return None
    unknown = [n for n in settings if n not in _setting_names()]
    if unknown:
        raise TypeError(f"{refusal} {unknown[0]!r} (settings: {', '.join(_setting_names())})")
    if PROCESS_WIDE in settings:
        raise TypeError(f"{PROCESS_WIDE!r} is process-wide, not a setting of one file or call: set "
                        f"ferry.config.{PROCESS_WIDE} (or FERRY_PINNED_BUDGET) instead")
    return _apply(_ferry.default_config(), settings)


class _Config:
    """Ferry's process-wide settings (``ferry::default_config()``), read and written by attribute.

    ``ferry.config.task_size`` is an ``int`` (bytes); choices are strings (``compat_mode``: "auto", "on",
    "off"). Assign ints, strings with units (``ferry.config.task_size = "8MiB"``) or, for on/off settings,
    bools. Values that do not parse raise :class:`InvalidArgumentError` (a ``ValueError``). The first
    read takes defaults from ``FERRY_*`` environment variables. Settings apply to files opened after the
    change; a File keeps the settings it was opened with.
    """

    __slots__ = ()
    _lock = threading.RLock()

    threads: int
    task_size: int
    direct_io: str
    compat_mode: str
    gds_threshold: int
    bounce_buffer_size: int
    bounce_buffers_per_thread: int
    pinned_budget: int
    require: str

    def __getattr__(self, name: str) -> SettingValue:
        if name.startswith("_") or name not in _setting_names():
            raise AttributeError(f"ferry.config has no setting {name!r} (settings: {', '.join(_setting_names())})")
        return _value_from_text(_ferry.default_config().get(name))

    def __setattr__(self, name: str, value: SettingValue) -> None:
        self.update(**{name: value})

    def __delattr__(self, name: str) -> None:
        raise AttributeError("settings cannot be deleted; use ferry.config.reset() or override()")

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(_setting_names()))

    def __repr__(self) -> str:
        cfg = _ferry.default_config()
        parts = []
        for name in _setting_names():
            text = cfg.get(name)
            source = cfg.source(name)
            parts.append(f"{name}={_value_from_text(text)!r}" + ("" if source == "default" else f" ({source})"))
        return "ferry.config(" + ", ".join(parts) + ")"

    def update(self, **settings: SettingValue) -> None:
        """Sets several settings at once: all of them, or (when one is invalid) none."""
        unknown = [n for n in settings if n not in _setting_names()]
        if unknown:
            raise AttributeError(f"ferry.config has no setting {unknown[0]!r} (settings: {', '.join(_setting_names())})")
        with self._lock:
            _ferry.set_default_config(_apply(_ferry.default_config(), settings))

    def as_dict(self) -> Dict[str, SettingValue]:
        """Every setting and its value."""
        cfg = _ferry.default_config()
        return {name: _value_from_text(cfg.get(name)) for name in _setting_names()}

    def source(self, name: str) -> str:
        """Where a setting's value came from: "default", "environment" or "api"."""
        if name not in _setting_names():
            raise AttributeError(f"ferry.config has no setting {name!r}")
        return str(_ferry.default_config().source(name))

    def settings(self) -> List[Setting]:
        """The settings table: name, environment variable, default and description of each setting."""
        return [Setting(*row) for row in _ferry.settings_table()]

    def reset(self) -> None:
        """Back to the defaults and ``FERRY_*`` environment variables, forgetting settings made in code."""
        with self._lock:
            _ferry.set_default_config(_ferry.environment_config())

    @contextlib.contextmanager
    def override(self, **settings: SettingValue) -> Iterator["_Config"]:
        """Temporary settings: ``with ferry.config.override(compat_mode="on"): ...``.

        The previous configuration comes back on exit, also after an exception. The settings are process
        wide, so other threads see them while the block runs.
        """
        with self._lock:
            saved = _ferry.default_config()
            self.update(**settings)
        try:
            yield self
        finally:
            with self._lock:
                _ferry.set_default_config(saved)


#: Ferry's process-wide settings; see :class:`_Config`.
config = _Config()


def _renew_lock_for_forked_child() -> None:
    # A parent thread changing settings at the fork leaves the child's copy of the lock held for good.
    _Config._lock = threading.RLock()


os.register_at_fork(after_in_child=_renew_lock_for_forked_child)


def parse_size(text: Union[str, int]) -> int:
    """Parses "4MiB", "16k", "1GB" (10**9) into bytes, as the settings do. Ints pass through.

    Raises TypeError for anything but a str or an int (bools too), InvalidArgumentError (a ValueError)
    for text that does not parse and for negative ints, OverflowError for ints past 64 bits."""
    if isinstance(text, str):
        return int(_ferry.parse_size(_args.text("size", text), "size"))
    n = _args.integer("size", text)
    if n < 0:
        raise _errors_invalid_argument(f"size must not be negative: {n}")
    if n > _args.MAX_U64:
        raise OverflowError(f"size {n} does not fit in 64 bits")
    return n


def format_size(nbytes: int) -> str:
    """1073741824 -> "1.00 GiB". Takes an int from 0 to 2**64 - 1 (TypeError, ValueError, OverflowError
    otherwise)."""
    n = _args.integer("nbytes", nbytes)
    if n < 0:
        raise _errors_invalid_argument(f"nbytes must not be negative: {n}")
    if n > _args.MAX_U64:
        raise OverflowError(f"nbytes {n} does not fit in 64 bits")
    return str(_ferry.format_size(n))
