"""The collectives of a load by a process group (ferry.distributed), each waited for with a deadline.

A rank that was killed, crashed or hangs must not leave the others waiting forever: every collective is
started asynchronously and polled, and a wait longer than the load's ``timeout`` raises
:class:`DistributedTimeoutError`; a collective the backend fails (gloo: "Connection closed by peer" once a
peer's process is gone) raises :class:`DistributedLoadError` at once. Either way the group cannot be used
afterwards (a collective may still be pending in it): destroy it, or end the process.

Where each rank got to: each rank writes its current step ("reading round 3 of 16") to the group's store
(a key of its own, ``ferry.distributed/<rank>``, overwritten), so that a rank that gives up can say which
peer is furthest behind: the one that was killed or hangs. Where the store cannot be found (it is reached
through torch's private process-group table) or read, messages go without it.

Ranks agree on success with :meth:`Group.agree`: each rank contributes its outcome (an error text or None,
plus facts), every rank receives all of them, and every rank raises the same failure if any rank failed.
Outcomes travel as JSON, never pickles: a peer's bytes are data, not code.
"""

from __future__ import annotations

import datetime
import itertools
import json
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from ._errors import FerryError

# Polls sleep a tenth of the time waited so far (within these bounds): a wait ends at most ~10% late.
_POLL_MIN_S = 20e-6
_POLL_MAX_S = 1e-3
_STEP_KEY = "ferry.distributed/"
_STORE_GLANCE = datetime.timedelta(milliseconds=200)  # how long a failing rank waits for a peer's step
_loads = itertools.count()  # every rank makes its loads in the same order: the same number names the same load


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
    following: List[Optional[int]] = [*ranks[1:], None]
    for r in following:
        if r is not None and r == prev + 1:
            prev = r
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ("ranks " if len(ranks) > 1 else "rank ") + ", ".join(spans)


def _store_of(process_group: Any) -> Any:
    """The group's store (a PrefixStore of the rendezvous store), or None where torch hides it."""
    c10d = dist.distributed_c10d
    table = getattr(getattr(c10d, "_world", None), "pg_map", None) or getattr(c10d, "_pg_map", None)
    try:
        entry = table.get(process_group) if table is not None else None
    except TypeError:
        return None
    return entry[1] if isinstance(entry, tuple) and len(entry) > 1 else None


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
        self.gpu: Optional[int] = None  # the GPU this rank's collectives use (NCCL): the load's, else the current one
        self.waited_s = 0.0
        self.load_id = next(_loads)
        self.steps = 0
        self.store = _store_of(process_group) if self.size > 1 else None
        self.store_error: Optional[BaseException] = None  # why the store stopped answering, once it did
        self.step("opening the checkpoint")

    def where(self) -> str:
        return f"{self.what} on rank {self.rank} of {self.size}"

    # ------------------------------------------------------------------------------- where ranks are

    def step(self, text: str) -> None:
        """Records that this rank has begun ``text`` (for peers' messages, should it never finish)."""
        self.steps += 1
        if self.store is None:
            return
        try:
            self.store.set(_STEP_KEY + str(self.rank), json.dumps([self.load_id, self.steps, text]))
        except Exception as e:  # the store is a diagnostic aid: without it, messages say less (and why)
            self.store = None
            self.store_error = e

    def _read_step(self, rank: int) -> Tuple[int, str]:
        """(steps, text) that ``rank`` recorded for this load; (0, "no step recorded") when there is none
        within a moment. Raises what the store raises for this rank's own key (the store is gone)."""
        key = _STEP_KEY + str(rank)
        if rank != self.rank:
            try:
                self.store.wait([key], _STORE_GLANCE)
            except Exception:  # the key is not there (yet): that rank never began a load
                return 0, "no step recorded"
        return self._parse_step(self.store.get(key))

    def _parse_step(self, value: Any) -> Tuple[int, str]:
        """A step as another rank recorded it: ``[load id, steps, text]``. Whoever can write the store is inside
        the job, but a value of another shape (or a text with control characters) must not turn the error being
        reported into another one: it reads as no step, and the text is shown escaped."""
        try:
            load_id, steps, text = json.loads(value)
        except (TypeError, ValueError):
            return 0, "recorded a step Ferry cannot read"
        if isinstance(steps, bool) or not isinstance(steps, int) or not isinstance(text, str):
            return 0, "recorded a step Ferry cannot read"
        if load_id != self.load_id:
            return 0, "has not begun this load"
        return steps, "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)

    def _peer_steps(self) -> str:
        """"; rank 1 is furthest behind: reading round 1 of 16 (rank 0: ..., rank 2: ...)", or ""."""
        def store_gone(e: BaseException) -> str:
            return (f"; the group's store could not be read to see where the others are ({type(e).__name__}: {e}): the "
                    f"rank that holds it (rank 0 with a tcp:// or env:// rendezvous) may be gone")

        # A step recorded after the store's holder died fails first: that is the same news.
        if self.store_error is not None:
            return store_gone(self.store_error)
        if self.store is None:
            return ""
        try:
            self._read_step(self.rank)  # first this rank's own key, which is there unless the store is gone
            seen = [self._read_step(r) for r in range(self.size)]
        except Exception as e:
            return store_gone(e)
        behind = min(steps for steps, _ in seen)
        late = [r for r, (steps, _) in enumerate(seen) if steps == behind]
        if len(late) == self.size:
            return ""
        others = ", ".join(f"rank {r}: {text}" for r, (_, text) in enumerate(seen) if r not in late)
        return f"; {rank_list(late)} {'is' if len(late) == 1 else 'are'} furthest behind: {seen[late[0]][1]} ({others})"

    # ------------------------------------------------------------------------------------- waiting

    def wait(self, work: Any, step: str) -> None:
        """Waits for ``work`` (an async collective) until the deadline; raises the errors described above."""
        started = time.monotonic()
        deadline = started + self.timeout_s
        try:
            while not work.is_completed():
                now = time.monotonic()
                if now >= deadline:
                    raise DistributedTimeoutError(
                        f"Could not finish {self.where()}: timed out after {self.timeout_s:g} s waiting for its peers "
                        f"while {step} (a rank that was killed, crashed or hangs never arrives){self._peer_steps()}; "
                        f"the group cannot be used after this: destroy it or end the process", self.rank, self.size)
                time.sleep(min(_POLL_MAX_S, max(_POLL_MIN_S, 0.1 * (now - started))))
            work.wait()
        except DistributedLoadError:
            raise
        except RuntimeError as e:
            raise self._failure(step, e) from e
        finally:
            self.waited_s += time.monotonic() - started

    def _failure(self, step: str, e: BaseException) -> DistributedLoadError:
        return DistributedLoadError(
            f"Could not finish {self.where()}: the {self.backend} collective failed while {step}: {e} (a peer left "
            f"the group: was it killed or did it crash?){self._peer_steps()}; the group cannot be used after this",
            self.rank, self.size)

    def _start(self, step: str, launch: Any, *args: Any) -> Any:
        """``launch(*args, group=..., async_op=True)``: the work, or the backend's refusal as our error."""
        try:
            return launch(*args, group=self.pg, async_op=True)
        except RuntimeError as e:
            raise self._failure(step, e) from e

    # ---------------------------------------------------------------------------------- collectives

    def _device(self) -> Any:
        if not self.cuda_only:
            return torch.device("cpu")
        return torch.device("cuda", torch.cuda.current_device() if self.gpu is None else self.gpu)

    def all_gather_json(self, value: Any, step: str) -> List[Any]:
        """Every rank's ``value`` (JSON-serialisable), in rank order."""
        if self.size == 1:
            return [value]
        self.step(step)
        payload = json.dumps(value).encode("utf-8", "surrogateescape")
        device = self._device()
        sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(self.size)]
        mine = torch.tensor([len(payload)], dtype=torch.int64, device=device)
        self.wait(self._start(step, dist.all_gather, sizes, mine), step)
        lengths = [int(s.item()) for s in sizes]
        longest = max(lengths)
        padded = torch.zeros(longest, dtype=torch.uint8)
        if payload:
            padded[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        padded = padded.to(device)
        out = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(self.size)]
        self.wait(self._start(step, dist.all_gather, out, padded), step)
        return [json.loads(bytes(o[:n].cpu().numpy().tobytes()).decode("utf-8", "surrogateescape"))
                for o, n in zip(out, lengths)]

    def start_gather(self, area: Any, base: int, part: int, step: str) -> Any:
        """Starts the in-place all_gather of ``area[base : base + size*part]``, where this rank has filled its
        ``part`` bytes at ``base + rank*part``. Returns the async work (None for a group of one)."""
        if self.size == 1:
            return None
        out = area[base:base + self.size * part]
        mine = out[self.rank * part:(self.rank + 1) * part]
        if area.is_cuda and "nccl" in self.backend and hasattr(dist, "all_gather_into_tensor"):
            return self._start(step, dist.all_gather_into_tensor, out, mine)  # in place: no copy
        return self._start(step, dist.all_gather, list(out.split(part)), mine)

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
