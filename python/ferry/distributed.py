"""One safetensors checkpoint onto every rank of a ``torch.distributed`` group, each byte read from storage once.

Serving and training run one process per GPU; when each calls ``load_file`` alone, N ranks read the
checkpoint N times. With ``process_group``, the ranks split the reads and exchange the pieces over the
group (NCCL over NVLink on GPUs; gloo with host memory elsewhere)::

    import torch, torch.distributed as dist
    from ferry.safetensors import load_file

    dist.init_process_group("nccl")
    torch.cuda.set_device(local_rank)
    tensors = load_file("checkpoint/", process_group=dist.group.WORLD)   # every rank: the whole checkpoint

    # tensor parallelism: each rank receives (and reads) only its slice of the split tensors
    part = load_file("checkpoint/", process_group=dist.group.WORLD,
                     shard_rules={"*.q_proj.weight": 0, "*.o_proj.weight": 1})

How: every rank opens the checkpoint (reads and validates every header), plans the same layout
(ferry._dist_plan), allocates its buffer, and the ranks agree that all of that worked before any data
moves. Then rank r reads the r-th part of each round of the data straight into its final place, and an
in-place all_gather per round gives every rank the others' parts, while the next round is read. Ranks read
disjoint byte ranges of about 1/N each; the tensors are views of one buffer, as with the single-process
loader. Sliced tensors are read by their owner only. Last, the ranks exchange what each did (bytes read,
bytes received, routes and reasons: ``stats["ranks"]``) and whether it worked; a failure anywhere fails
every rank with :class:`DistributedLoadError`, naming the rank and the cause. Every wait for peers is
bounded by ``timeout``.
"""

from __future__ import annotations

import datetime
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from . import _args, _ferry
from . import _checkpoint
from ._dist_group import DistributedLoadError, DistributedTimeoutError, Group, rank_list
from ._dist_plan import DEVICE_ALIGNMENT, HOST_ALIGNMENT, PAGE, Piece, Plan, ShardRules, split_range

__all__ = ["load", "DistributedLoadError", "DistributedTimeoutError", "DEFAULT_TIMEOUT_S", "DEFAULT_PART_BYTES",
           "split_range"]

#: How long a rank waits for its peers at any one point (seconds) unless told otherwise.
DEFAULT_TIMEOUT_S = 300.0
#: Bytes each rank reads per round of the exchange.
DEFAULT_PART_BYTES = 64 << 20
_MAX_GATHERS_IN_FLIGHT = 2

Timeout = Union[None, float, int, datetime.timedelta]


def timeout_seconds(timeout: Timeout) -> float:
    """``timeout`` (seconds, a ``datetime.timedelta``, or None for :data:`DEFAULT_TIMEOUT_S`) in seconds."""
    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"timeout must be seconds or a datetime.timedelta, not {type(timeout).__name__}")
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    return seconds


def _route_rows(report: Any) -> Tuple[Dict[str, List[int]], List[List[Any]]]:
    routes = {name: [int(r["ops"]), int(r["bytes"])] for name, r in report.get("routes", {}).items() if r.get("ops")}
    reasons = [[r["route"], r["reason"], int(r["ops"])] for r in report.get("reasons", [])]
    return routes, reasons


class _Load:
    """One rank's part of one load: opened checkpoint, plan, buffer, reads, exchange, views."""

    def __init__(self, group: Group, ckpt: "_checkpoint._Checkpoint", device: int, shard_rules: ShardRules,
                 part_bytes: int) -> None:
        self.group = group
        self.ckpt = ckpt
        self.device = device
        alignment = HOST_ALIGNMENT if device == _checkpoint._HOST else DEVICE_ALIGNMENT
        self.plan = Plan(ckpt.tensors, _checkpoint.DTYPE_SIZES, shard_rules, group.rank, group.size, part_bytes, alignment)
        if group.cuda_only and device == _checkpoint._HOST:
            raise ValueError(f"the group's backend is {group.backend}, which exchanges GPU memory only: load onto "
                             f"this rank's GPU (device='cuda:N') or use a gloo group for host memory")
        self.buffer: Any = None
        self.base = 0

    def shapes(self) -> Dict[str, Tuple[str, Tuple[int, ...]]]:
        """name -> (safetensors dtype, the shape this rank receives)."""
        out = {t.name: (t.dtype, tuple(t.shape)) for t in self.plan.exchanged}
        out.update({s.tensor.name: (s.tensor.dtype, s.shape) for s in self.plan.slices})
        return out

    def allocate(self) -> None:
        self.buffer, self.base = self.ckpt.buffer(self.plan.buffer_bytes, self.device,
                                                  PAGE if self.device == _checkpoint._HOST else DEVICE_ALIGNMENT)
        self.ckpt.fw.synchronize(self.device)

    def facts(self) -> Dict[str, Any]:
        impl = self.ckpt.impl
        kind = "host" if self.device == _checkpoint._HOST else "cuda"
        return {"fingerprint": self.plan.fingerprint(self.ckpt.tensors, self.ckpt.files, kind, impl.shard_facts()),
                "summary": (f"{len(self.ckpt.files)} file(s), {len(self.ckpt.tensors)} tensors, {impl.data_bytes()} "
                            f"bytes; {len(self.plan.exchanged)} tensors exchanged in {len(self.plan.rounds)} round(s), "
                            f"{kind} memory")}

    def items(self, pieces: List[Piece]) -> List[Tuple[str, int, int, int]]:
        return [(p.name, self.base + p.buffer_offset, p.tensor_offset, p.size) for p in pieces]


def _check_agreement(group: Group, facts: List[Dict[str, Any]]) -> None:
    """Raises on every rank when the ranks did not open the same checkpoint, or would not make the same
    collectives (another world size, other shard rules for the exchanged tensors, other memory)."""
    by_print: Dict[str, List[int]] = {}
    for r, f in enumerate(facts):
        by_print.setdefault(f["fingerprint"], []).append(r)
    if len(by_print) == 1:
        return
    seen = "; ".join(f"{rank_list(ranks)}: {facts[ranks[0]]['summary']}" for ranks in by_print.values())
    raise DistributedLoadError(
        f"Could not finish {group.where()}: the ranks do not see the same checkpoint, or do not exchange the same "
        f"tensors (shard_rules must leave the same tensors whole on every rank): {seen}; nothing was exchanged",
        group.rank, group.size)


def _single(ckpt: "_checkpoint._Checkpoint", group: Group, device: int, progress: Any, max_request_bytes: int,
            max_requests_in_flight: int, started: float) -> "_checkpoint.LoadResult":
    """A group of one without shard rules: the single-process load itself, and the report of a rank."""
    result = ckpt.load(device, [], [], progress, max_request_bytes, max_requests_in_flight, started)
    stats = result.stats
    routes, reasons = _route_rows(result.report)
    data = ckpt.impl.data_bytes()
    stats.update(rank=0, world_size=1, backend=group.backend, bytes_received=0, checkpoint_bytes=data,
                 exchanged_bytes=data, sliced_bytes=0, rounds=0, part_bytes=0, timeout=group.timeout_s,
                 exchange_wait_seconds=0.0, agree_seconds=0.0, group_bytes_read=stats["bytes_read"],
                 ranks=[{"rank": 0, "bytes_read": stats["bytes_read"], "bytes_received": 0,
                         "requests": stats["requests"], "read_seconds": stats["read_seconds"], "routes": routes,
                         "reasons": reasons}])
    return result


def load(filename: _checkpoint.PathLike, device: _checkpoint.Device = None, *, process_group: Any, shard_rules: ShardRules = None,
         timeout: Timeout = None, part_bytes: int = DEFAULT_PART_BYTES, framework: str = "pt",
         progress: _checkpoint.Progress = None, max_request_bytes: int = 0, max_requests_in_flight: int = 0,
         max_staging_bytes: int = 0, max_header_bytes: int = _ferry.SAFETENSORS_DEFAULT_MAX_HEADER_BYTES,
         check: Optional[Callable[[Dict[str, Tuple[str, Tuple[int, ...]]]], Any]] = None,
         **settings: Any) -> "_checkpoint.LoadResult":
    """Loads a checkpoint onto every rank of ``process_group``; each byte is read from storage by one rank.

    Every rank of the group must call it with the same checkpoint (the same files, as a shared or a copied
    directory: shard names and headers must agree) and the same ``shard_rules``, ``part_bytes`` and kind of
    memory. Returns this rank's :class:`ferry.safetensors.LoadResult`.

    ``device``: this rank's GPU (``"cuda:N"``, N, ``"cuda"``: the current one, the default) or ``"cpu"``;
    NCCL groups exchange GPU memory, gloo groups host memory. ``shard_rules`` (tensor parallelism): tensor
    name or glob pattern -> None (whole on every rank), a dimension split across the ranks as
    ``torch.tensor_split(t, world_size, dim)[rank]`` does, or a callable ``(name, shape, rank, world_size)``
    returning one of those or a tuple of slices (step 1); or one such callable for every name. An exact name
    wins over patterns, then the first matching pattern in the mapping's order; unmatched tensors are whole
    on every rank. A rank gets its slice of each sliced tensor (contiguous, shaped as the slice), reading only
    the bytes it holds.

    ``timeout``: seconds (or a ``timedelta``) a rank waits for its peers at any one point (default 300);
    past it every waiting rank raises :class:`DistributedTimeoutError`. ``part_bytes``: bytes each rank reads
    per round (64 MiB). ``progress``: this rank's reads, as for :func:`ferry.safetensors.load` (None: a bar
    for rank 0's reads only, where it would show one). Other keyword
    arguments as there (request shaping, Ferry settings). ``check``: a callable given ``{name: (safetensors
    dtype, the shape this rank receives)}`` once the checkpoint is open; an exception it raises fails every
    rank before any data moves, as a failed open does (``ferry.torch.load_into_module`` checks the module
    with it).

    ``stats`` as the single-process load's (``bytes_read``: read from storage by this rank), plus ``rank``,
    ``world_size``, ``backend``, ``bytes_received`` (tensor bytes from peers), ``checkpoint_bytes``,
    ``exchanged_bytes``, ``sliced_bytes``, ``rounds``, ``exchange_wait_seconds``, ``agree_seconds``,
    ``group_bytes_read`` (every rank's ``bytes_read`` summed) and ``ranks``: per rank ``{"rank",
    "bytes_read", "bytes_received", "requests", "read_seconds", "routes": {route: [ops, bytes]}, "reasons":
    [[route, reason, ops]]}``. Without shard rules, ``group_bytes_read == checkpoint_bytes``, and each rank's
    ``bytes_read + bytes_received`` is the checkpoint.

    Errors: any failure on any rank (a missing shard, a malformed header, an I/O error, a shard rule that
    does not fit, memory) raises :class:`DistributedLoadError` on every rank, naming the failed ranks and
    their causes (the failed rank's own exception is its ``__cause__``); failures found before the exchange
    are raised before any data moves. A peer that dies or hangs makes the others raise within ``timeout``
    (gloo notices a dead peer at once). After a :class:`DistributedLoadError` raised while data moved, or a
    timeout, the group must not be used again: a collective may still be pending in it.
    """
    started = time.perf_counter()
    if process_group is None:
        raise TypeError("ferry.distributed.load needs a process_group (torch.distributed.group.WORLD, or a new_group)")
    group = Group(process_group, timeout_seconds(timeout),
                  f"loading {_args.display(filename)!r}")
    fw = _checkpoint._framework(framework)
    if fw.name != "pt":
        raise ValueError(f"process_group exchanges PyTorch tensors: framework must be 'pt', not {framework!r}")
    part = _ferry_size(part_bytes)
    if progress is None and group.rank != 0:
        progress = False  # one bar on a terminal the ranks share: rank 0's

    error: Optional[BaseException] = None
    work: Optional[_Load] = None
    ckpt = None
    opened = started
    try:
        ckpt = _checkpoint._Checkpoint(_checkpoint._open(filename, max_header_bytes, max_staging_bytes, settings), fw)
        opened = time.perf_counter()
        dev = _checkpoint._device_index(device, fw)
        if dev != _checkpoint._HOST:
            group.gpu = dev
        if group.size == 1 and shard_rules is None:
            if check is not None:
                check({t.name: (t.dtype, tuple(t.shape)) for t in ckpt.tensors})
            result = _single(ckpt, group, dev, progress, max_request_bytes, max_requests_in_flight, started)
            result.stats["open_seconds"] = opened - started
            return result
        work = _Load(group, ckpt, dev, shard_rules, part)
        if check is not None:
            check(work.shapes())
        work.allocate()
    except KeyboardInterrupt:
        raise
    except Exception as e:  # every rank must hear of it before anyone moves data
        if group.size == 1:
            raise
        error = e
    allocated = time.perf_counter()
    facts = group.agree(error, work.facts() if work is not None else None, "agreeing on the checkpoint's headers",
                        "every rank stopped before any data was exchanged")
    _check_agreement(group, facts)
    assert work is not None and ckpt is not None
    agreed = time.perf_counter()
    return _exchange(work, progress, max_request_bytes, max_requests_in_flight,
                     {"started": started, "opened": opened, "allocated": allocated, "agreed": agreed})


def _ferry_size(value: Union[int, str]) -> int:
    from ._config import parse_size

    n = parse_size(value)
    if n < 4096:
        raise ValueError(f"part_bytes must be at least 4096, not {n}")
    return n


def _exchange(work: _Load, progress: _checkpoint.Progress, max_request_bytes: int, max_requests_in_flight: int,
              times: Dict[str, float]) -> "_checkpoint.LoadResult":
    group, plan, ckpt = work.group, work.plan, work.ckpt
    mine = [plan.pieces(k) for k in range(len(plan.rounds))]
    slices = plan.slice_pieces()
    to_read = sum(p.size for pieces in mine for p in pieces) + sum(p.size for p in slices)
    callback = _checkpoint._progress_callback(progress, to_read, ckpt.label())
    report_sum = _ferry.SafetensorsReportSum()
    state: Dict[str, Any] = {"bytes": 0, "requests": 0, "seconds": 0.0, "notes": [], "error": None}

    def read(pieces: List[Piece], step: str) -> None:
        group.step(step)
        if state["error"] is not None or not pieces:
            return
        done_before = state["bytes"]
        tell = None if callback is None else (lambda done, total: callback(done_before + done, to_read))
        t0 = time.perf_counter()
        try:
            stats = ckpt.impl.read_into(work.items(pieces), int(max_request_bytes), int(max_requests_in_flight), tell,
                                        0.1, report_sum)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # told to every rank at the end; the exchange goes on so that nobody waits
            state["error"] = e
            return
        finally:
            state["seconds"] += time.perf_counter() - t0
        state["bytes"] += stats["bytes_read"]
        state["requests"] += stats["requests"]
        state["notes"] = list(stats["notes"])

    in_flight: Deque[Tuple[Any, str]] = deque()
    count = len(plan.rounds)
    waited_before = group.waited_s
    for k, (base, part) in enumerate(plan.rounds):
        read(mine[k], f"reading round {k + 1} of {count}")
        if len(in_flight) >= _MAX_GATHERS_IN_FLIGHT:
            group.wait(*in_flight.popleft())
        step = f"exchanging round {k + 1} of {count}"
        group.step(step)
        w = group.start_gather(work.buffer, base, part, step)
        if w is not None:
            in_flight.append((w, step))
    read(slices, "reading its slices")
    while in_flight:
        group.wait(*in_flight.popleft())
    ckpt.fw.synchronize(work.device)
    exchanged = time.perf_counter()
    exchange_wait = group.waited_s - waited_before

    report = _checkpoint._report(report_sum.parts())
    routes, reasons = _route_rows(report)
    received = plan.exchanged_bytes - sum(p.size for pieces in mine for p in pieces)
    me = {"rank": group.rank, "bytes_read": state["bytes"], "bytes_received": received,
          "requests": state["requests"], "read_seconds": state["seconds"], "routes": routes, "reasons": reasons}
    ranks = group.agree(state["error"], me, "agreeing that every rank read its part",
                        "the tensors are incomplete, and nothing was returned")
    done = time.perf_counter()

    views: List[Tuple[str, Any, int, Any, Optional[Tuple[int, ...]]]] = []
    for t in plan.exchanged:
        views.append((t.name, work.buffer, plan.offsets[t.name], t, None))
    for s in plan.slices:
        views.append((s.tensor.name, work.buffer, s.buffer_offset, s.tensor, s.shape))
    tensors = {name: ckpt.view(buf, offset, t, shape) for name, buf, offset, t, shape in sorted(views, key=lambda v: v[0])}
    finished = time.perf_counter()
    seconds = finished - times["started"]
    loaded = plan.exchanged_bytes + sum(s.nbytes for s in plan.slices)
    stats: Dict[str, Any] = {
        "bytes_read": state["bytes"], "bytes_copied": 0, "requests": state["requests"], "seconds": seconds,
        "open_seconds": times["opened"] - times["started"], "allocate_seconds": times["allocated"] - times["opened"],
        "read_seconds": state["seconds"], "views_seconds": finished - done, "replicate_wait_seconds": 0.0,
        "agree_seconds": times["agreed"] - times["allocated"] + (done - exchanged),
        "exchange_wait_seconds": exchange_wait, "gib_per_s": loaded / seconds / (1 << 30) if seconds > 0 else 0.0,
        "files": ckpt.files, "notes": state["notes"] + list(ckpt.impl.notes()),
        "rank": group.rank, "world_size": group.size, "backend": group.backend,
        "bytes_received": me["bytes_received"], "checkpoint_bytes": ckpt.impl.data_bytes(),
        "exchanged_bytes": plan.exchanged_bytes, "sliced_bytes": loaded - plan.exchanged_bytes, "rounds": len(plan.rounds),
        "part_bytes": plan.part_bytes, "timeout": group.timeout_s, "ranks": ranks,
        "group_bytes_read": sum(r["bytes_read"] for r in ranks),
    }
    metadata = dict(ckpt.impl.metadata()) or None
    return _checkpoint.LoadResult(tensors, [], metadata, report, stats)
