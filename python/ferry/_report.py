"""Route reports: ferry.Report, the process's totals (ferry.stats) and the list of routes."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from . import _ferry

#: Every route an operation can take, in report order (the library's own list: ``ferry::route_name``).
ROUTES = tuple(_ferry.route_names())


class Report(Dict[str, Any]):
    """A route report: a ``dict`` with the C++ report's JSON keys, shown as a readable table.

    Keys (the same as ``ferry::Report::to_json()`` and the CLI's JSON): ``routes`` (route name ->
    ``{"ops", "bytes", "nanoseconds"}``), ``reasons`` (a list of ``{"route", "reason", "text", "detail",
    "ops"}``), ``io`` (O_DIRECT/buffered/cached operation counts, EINTR retries, short transfers),
    ``cufile`` (cuFile's own counters, or None), ``notes``, ``stream_order`` (stream-ordered requests per
    mechanism: ``stream_copies``, ``stream_wait``, ``synchronized``; docs/stream-order.md), ``total_ops``,
    ``total_bytes``, ``summary``.
    """

    __slots__ = ("_table",)

    def __init__(self, data: Optional[Dict[str, Any]] = None, table: str = "") -> None:
        super().__init__(data or {})
        self._table = table

    @classmethod
    def _from_parts(cls, parts: Any) -> "Report":
        text, table = parts
        return cls(json.loads(text), table)

    @property
    def summary(self) -> str:
        """One line: "256 operations, 1.00 GiB, all host (buffer is host memory)"."""
        return str(self.get("summary", ""))

    @property
    def table(self) -> str:
        """The C++ report's table: one row per route, then I/O mechanics and notes."""
        return self._table

    @property
    def routes_used(self) -> Dict[str, int]:
        """Operations per route, for the routes that were taken: ``{"staged": 256}``."""
        routes = self.get("routes", {})
        return {name: int(routes[name]["ops"]) for name in ROUTES if routes.get(name, {}).get("ops")}

    def __repr__(self) -> str:
        head = f"ferry.Report({self.summary!r})"
        return f"{head}\n{self._table.rstrip()}" if self._table else head

    def __str__(self) -> str:
        return self._table.rstrip() if self._table else self.summary

    def __reduce__(self) -> Any:
        return (Report, (dict(self), self._table))


def stats() -> Report:
    """Everything this process has transferred through Ferry so far (``ferry::process_report()``)."""
    return Report._from_parts(_ferry.process_report())


def reset_stats() -> None:
    """Starts the process report from zero."""
    _ferry.reset_process_report()
