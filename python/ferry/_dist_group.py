"""The collectives of a load by a process group (ferry.distributed), each waited for with a deadline.

A rank that was killed, crashed or hangs must not leave the others waiting forever: every collective is
started asynchronously and polled, and a wait longer than the load's ``timeout`` raises
:class:`DistributedTimeoutError`; a collective the backend fails (gloo: "Connection closed by peer" once a
peer's process is gone) raises :class:`DistributedLoadError` at once. Either way the group cannot be used
afterwards (a collective may still be pending in it): destroy it, or end the process.

Ranks agree on success with :meth:`Group.agree`: each rank contributes its outcome (an error text or None,
plus facts), every rank receives all of them, and every rank raises the same failure if any rank failed.
Outcomes travel as JSON, never pickles: a peer's bytes are data, not code.
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from ._errors import FerryError

_POLL_FIRST_S = 50e-6
_POLL_MAX_S = 5e-3


class DistributedLoadError(FerryError):
    """A load by a process group failed on some rank; every rank of the group raises it (code ``aborted``).

    ``rank``: the rank that raised it; ``world_size``; ``causes``: failed rank -> the cause's text (the
    exception's type and message, which name the file and the tensor). The rank whose own failure it is has
    that exception as ``__cause__``.
    """

    code = "aborted"

    def __init__(self, message: str, rank: int, world_size: int, causes: Optional[Dict[int, str]] = None) -> None:
        super().__init__(message)
        self.rank = rank
        self.world_size = world_size
        self.causes = dict(causes or {})


class DistributedTimeoutError(DistributedLoadError, TimeoutError):
    """A rank waited longer than the load's ``timeout`` for its peers (code ``deadline_exceeded``): a peer was
    killed, crashed, hangs, or is further behind than the timeout allows."""

    code = "deadline_exceeded"


for _cls in (DistributedLoadError, DistributedTimeoutError):
    _cls.__module__ = "ferry.distributed"


def describe(exc: BaseException) -> str:
    """An exception as one line for peers: its type and message (``FileNotFoundError: [Errno 2] ...``)."""
    return f"{type(exc).__name__}: {exc}"


def rank_list(ranks: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> "ranks 0-2, 5"; [3] -> "rank 3"."""
    ranks = sorted(ranks)
    spans: List[str] = []
    start = prev = ranks[0]
    for r in ranks[1:] + [None]:  # type: ignore[operator]
        if r is not None and r == prev + 1:
            prev = r
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ("ranks " if len(ranks) > 1 else "rank ") + ", ".join(spans)


class Group:
    """A torch.distributed process group, seen by one rank: its collectives with a deadline."""

    def __init__(self, process_group: Any, timeout_s: float, what: str) -> None:
        if not dist.is_available():
            raise RuntimeError("process_group needs torch.distributed, which this PyTorch lacks")
        if not dist.is_initialized():
            raise RuntimeError("process_group: torch.distributed is not initialised (call init_process_group first)")
        self.pg = process_group
        self.rank = dist.get_rank(group=process_group)
        if self.rank < 0:
            raise ValueError("this process is not a member of process_group")
        self.size = dist.get_world_size(group=process_group)
        self.backend = str(dist.get_backend(process_group))
        self.timeout_s = timeout_s
        self.what = what  # 'loading "ckpt/"', for messages
        self.cuda_only = self.backend == "nccl"
        self.waited_s = 0.0

    def where(self) -> str:
        return f"{self.what} on rank {self.rank} of {self.size}"

    # ------------------------------------------------------------------------------------- waiting

    def wait(self, work: Any, step: str) -> None:
        """Waits for ``work`` (an async collective) until the deadline; raises the errors described above."""
        started = time.monotonic()
        deadline = started + self.timeout_s
        pause = _POLL_FIRST_S
        try:
            while not work.is_completed():
                if time.monotonic() >= deadline:
                    raise DistributedTimeoutError(
                        f"Could not finish {self.where()}: timed out after {self.timeout_s:g} s waiting for its peers "
                        f"while {step} (a rank that was killed, crashed or hangs never arrives); the group cannot be "
                        f"used after this: destroy it or end the process", self.rank, self.size)
                time.sleep(pause)
                pause = min(pause * 2, _POLL_MAX_S)
            work.wait()
        except DistributedLoadError:
            raise
        except RuntimeError as e:
            raise DistributedLoadError(
                f"Could not finish {self.where()}: the {self.backend} collective failed while {step}: {e} (a peer "
                f"left the group: was it killed or did it crash?); the group cannot be used after this",
                self.rank, self.size) from e
        finally:
            self.waited_s += time.monotonic() - started

    # ---------------------------------------------------------------------------------- collectives

    def _device(self) -> Any:
        return torch.device("cuda", torch.cuda.current_device()) if self.cuda_only else torch.device("cpu")

    def all_gather_json(self, value: Any, step: str) -> List[Any]:
        """Every rank's ``value`` (JSON-serialisable), in rank order."""
        if self.size == 1:
            return [value]
        payload = json.dumps(value).encode("utf-8", "surrogateescape")
        device = self._device()
        sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(self.size)]
        mine = torch.tensor([len(payload)], dtype=torch.int64, device=device)
        self.wait(dist.all_gather(sizes, mine, group=self.pg, async_op=True), step)
        lengths = [int(s.item()) for s in sizes]
        longest = max(lengths)
        padded = torch.zeros(longest, dtype=torch.uint8)
        if payload:
            padded[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        padded = padded.to(device)
        out = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(self.size)]
        self.wait(dist.all_gather(out, padded, group=self.pg, async_op=True), step)
        return [json.loads(bytes(o[:n].cpu().numpy().tobytes()).decode("utf-8", "surrogateescape"))
                for o, n in zip(out, lengths)]

    def start_gather(self, area: Any, base: int, part: int) -> Any:
        """Starts the in-place all_gather of ``area[base : base + size*part]``, where this rank has filled its
        ``part`` bytes at ``base + rank*part``. Returns the async work (None for a group of one)."""
        if self.size == 1:
            return None
        out = area[base:base + self.size * part]
        mine = out[self.rank * part:(self.rank + 1) * part]
        if self.cuda_only and hasattr(dist, "all_gather_into_tensor"):
            return dist.all_gather_into_tensor(out, mine, group=self.pg, async_op=True)
        return dist.all_gather(list(out.split(part)), mine, group=self.pg, async_op=True)

    def all_reduce_sum(self, values: Sequence[int], step: str) -> List[int]:
        """Element-wise sums over the group (int64)."""
        t = torch.tensor(list(values), dtype=torch.int64, device=self._device())
        if self.size > 1:
            self.wait(dist.all_reduce(t, group=self.pg, async_op=True), step)
        return [int(v) for v in t.cpu().tolist()]

    # ------------------------------------------------------------------------------------ agreement

    def agree(self, error: Optional[BaseException], facts: Any, step: str, consequence: str) -> List[Any]:
        """Every rank's ``facts``, once every rank reported no error. When some rank reports one, every rank
        raises :class:`DistributedLoadError` naming the failed ranks and their causes, ``consequence``
        saying what that means ("nothing was exchanged"); this rank's own ``error`` is its ``__cause__``."""
        outcomes = self.all_gather_json({"error": describe(error) if error is not None else None, "facts": facts},
                                        step)
        causes = {r: o["error"] for r, o in enumerate(outcomes) if o["error"] is not None}
        if causes:
            by_text: Dict[str, List[int]] = {}
            for r, text in causes.items():
                by_text.setdefault(text, []).append(r)
            told = "; ".join(f"{rank_list(ranks)} failed: {text}" for text, ranks in by_text.items())
            raise DistributedLoadError(f"Could not finish {self.where()}: {told}; {consequence}", self.rank, self.size,
                                       causes) from error
        return [o["facts"] for o in outcomes]
