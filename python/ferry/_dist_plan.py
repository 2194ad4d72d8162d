"""Who reads what in a load by a process group (ferry.distributed), as pure arithmetic: no torch, no I/O.

Every rank computes the same plan from the same headers, so that every rank issues the same collectives in
the same order without asking the others:

* **Exchanged tensors** (all of them without ``shard_rules``; those no rule slices with them) are laid out
  in one *area* of the rank's buffer, in file order, each at the next multiple of ``alignment`` (256 bytes in
  GPU memory, 64 in host memory: where the framework's own allocator would put it, the single-process
  load's rule, ``ferry::safetensors::kDeviceTensorAlignment``). Tensors that follow one another in a file are
  read together, scattered to their places.
* The area is cut into **rounds**: round k covers ``world × part`` bytes, and rank r reads the tensor bytes
  of the k-th round's r-th part (pieces of tensors, each at its final place), then all ranks exchange the
  round with one all_gather in place. Parts are multiples of 4096 bytes; the last round's parts are what
  remains divided by the world size, rounded up to 4096. So every rank reads about 1/world of the bytes, in
  pieces of ``part`` bytes, while the previous round's exchange runs.
* **Sliced tensors** (``shard_rules``): each rank reads only its own slice, as contiguous chunks (one per
  index of the dimensions before the last one the slice does not span in full: one chunk for a split along
  dimension 0, one per row for a split along dimension 1 of a matrix), into its own buffer after the area,
  each slice at the next multiple of ``alignment``.
"""

from __future__ import annotations

import bisect
import fnmatch
import hashlib
import itertools
import json
import math
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

PAGE = 4096
#: Where a tensor starts in GPU and in host memory (the single-process load's rule).
DEVICE_ALIGNMENT = 256
HOST_ALIGNMENT = 64

#: A rule: None (the whole tensor on every rank), a dimension to split across the ranks (as
#: ``torch.tensor_split(t, world_size, dim)[rank]``), or a callable ``(name, shape, rank, world_size)``
#: returning one of those or a tuple of slices (this rank's part, step 1; dimensions left out are whole).
Rule = Union[None, int, Callable[[str, Tuple[int, ...], int, int], Any]]
ShardRules = Union[None, Mapping[str, Rule], Callable[[str, Tuple[int, ...], int, int], Any]]

Box = Tuple[Tuple[int, int], ...]  # per dimension: [start, stop)


def align_up(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


class Piece(NamedTuple):
    """``size`` bytes of tensor ``name`` from byte ``tensor_offset`` of it, at ``buffer_offset`` of the rank's
    buffer."""

    name: str
    buffer_offset: int
    tensor_offset: int
    size: int


class Slice(NamedTuple):
    """This rank's part of a tensor a rule slices: its box, its shape, where it goes in the buffer, and the
    contiguous chunks (byte offset in the tensor, bytes) read for it, in order."""

    tensor: Any
    box: Box
    shape: Tuple[int, ...]
    buffer_offset: int
    chunks: Tuple[Tuple[int, int], ...]

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self.chunks)


# --------------------------------------------------------------------------------------------- rules


def _is_pattern(key: str) -> bool:
    return any(c in key for c in "*?[")


def rule_for(shard_rules: ShardRules, name: str) -> Tuple[bool, Rule]:
    """(whether a rule applies, the rule) for tensor ``name``: the entry of that exact name, else the first
    glob pattern (``fnmatch``: ``*``, ``?``, ``[...]``) that matches it, in the mapping's order; a callable
    ``shard_rules`` applies to every name."""
    if shard_rules is None:
        return False, None
    if callable(shard_rules) and not isinstance(shard_rules, Mapping):
        return True, shard_rules
    if name in shard_rules:
        return True, shard_rules[name]
    for key, rule in shard_rules.items():
        if _is_pattern(key) and fnmatch.fnmatchcase(name, key):
            return True, rule
    return False, None


def split_range(size: int, rank: int, world: int) -> Tuple[int, int]:
    """[start, stop) of part ``rank`` of ``size`` items cut into ``world`` parts, as ``torch.tensor_split``
    cuts them: the first ``size % world`` parts one item longer."""
    q, r = divmod(size, world)
    start = rank * q + min(rank, r)
    return start, start + q + (1 if rank < r else 0)


def _rule_error(name: str, rank: int, what: str) -> ValueError:
    return ValueError(f"shard_rules for tensor {name!r} (rank {rank}): {what}")


def slice_box(rule: Rule, name: str, shape: Tuple[int, ...], rank: int, world: int) -> Optional[Box]:
    """This rank's box of the tensor under ``rule``, or None when every rank gets the whole tensor. Raises
    ValueError naming the tensor and the rank for a dimension it does not have, a step other than 1, or a
    result that is neither None, an int nor slices."""
    if callable(rule):
        try:
            result = rule(name, tuple(shape), rank, world)
        except Exception as e:
            raise _rule_error(name, rank, f"the rule raised {type(e).__name__}: {e}") from e
        if callable(result):
            raise _rule_error(name, rank, "a callable rule must return None, a dimension or slices, not a callable")
        return slice_box(result, name, shape, rank, world)
    if rule is None:
        return None
    if isinstance(rule, bool):
        raise _rule_error(name, rank, "a rule is None, a dimension (int), slices or a callable, not a bool")
    if isinstance(rule, int):
        dim = rule + len(shape) if rule < 0 else rule
        if not 0 <= dim < len(shape):
            raise _rule_error(name, rank, f"dimension {rule} does not exist in shape {list(shape)}")
        box = [(0, n) for n in shape]
        box[dim] = split_range(shape[dim], rank, world)
        return tuple(box)
    if isinstance(rule, slice):
        rule = (rule,)
    if isinstance(rule, tuple) and all(isinstance(s, slice) for s in rule):
        if len(rule) > len(shape):
            raise _rule_error(name, rank, f"{len(rule)} slices for shape {list(shape)}")
        box = []
        for dim, n in enumerate(shape):
            if dim >= len(rule):
                box.append((0, n))
                continue
            start, stop, step = rule[dim].indices(n)
            if step != 1:
                raise _rule_error(name, rank, f"slice {rule[dim]} of dimension {dim} has step {step} (only 1 is read)")
            box.append((start, max(start, stop)))
        return tuple(box)
    raise _rule_error(name, rank, f"a rule is None, a dimension (int), slices or a callable, not {rule!r}")


def box_chunks(shape: Sequence[int], box: Box, element_bytes: int) -> Tuple[Tuple[int, int], ...]:
    """The contiguous byte ranges (offset in the tensor, bytes) that hold ``box`` of a C-order tensor, in
    order; none for an empty box."""
    if any(stop <= start for start, stop in box):
        return ()
    strides = [element_bytes * math.prod(shape[d + 1:]) for d in range(len(shape))]
    last = len(shape) - 1
    while last >= 0 and box[last] == (0, shape[last]):
        last -= 1
    if last < 0:
        return ((0, element_bytes * math.prod(shape)),)
    run = (box[last][1] - box[last][0]) * strides[last]
    head = box[last][0] * strides[last]
    outer = [range(start, stop) for start, stop in box[:last]]
    return tuple((head + sum(i * strides[d] for d, i in enumerate(index)), run) for index in itertools.product(*outer))


# ---------------------------------------------------------------------------------------------- plan


class Plan:
    """Where every byte goes on this rank and which bytes this rank reads (see the module's docstring).

    ``tensors``: the checkpoint's tensors (objects with ``name, dtype, shape, nbytes, shard, file_offset``)
    in file order; ``element_bytes``: dtype -> bytes per element; ``alignment``: where each tensor may start
    (:data:`DEVICE_ALIGNMENT` or :data:`HOST_ALIGNMENT`).
    """

    def __init__(self, tensors: Sequence[Any], element_bytes: Mapping[str, int], shard_rules: ShardRules, rank: int,
                 world: int, part_bytes: int, alignment: int = DEVICE_ALIGNMENT) -> None:
        self.rank, self.world = rank, world
        self.alignment = alignment
        self.part_bytes = max(PAGE, part_bytes // PAGE * PAGE)
        self.exchanged: List[Any] = []
        boxes: List[Tuple[Any, Box]] = []
        for t in tensors:
            applies, rule = rule_for(shard_rules, t.name)
            box = slice_box(rule, t.name, tuple(t.shape), rank, world) if applies else None
            if box is None:
                self.exchanged.append(t)
            else:
                boxes.append((t, box))
        self.offsets: Dict[str, int] = {}
        self.area_data_end = self._lay_out()
        self.rounds = self._rounds()
        self.area_bytes = self.rounds[-1][0] + world * self.rounds[-1][1] if self.rounds else 0
        self.slices: List[Slice] = []
        end = self.area_bytes
        for t, box in boxes:
            chunks = box_chunks(t.shape, box, element_bytes[t.dtype])
            at = align_up(end, alignment)
            shape = tuple(stop - start for start, stop in box)
            self.slices.append(Slice(t, box, shape, at, chunks))
            end = at + sum(size for _, size in chunks)
        self.buffer_bytes = end
        self.exchanged_bytes = sum(t.nbytes for t in self.exchanged)
        self._read = [t for t in self.exchanged if t.nbytes]  # in file order, which is also the area's
        self._starts = [self.offsets[t.name] for t in self._read]

    def _lay_out(self) -> int:
        end = 0
        for t in self.exchanged:
            self.offsets[t.name] = align_up(end, self.alignment)
            end = self.offsets[t.name] + t.nbytes
        return end

    def _rounds(self) -> List[Tuple[int, int]]:
        rounds = []
        base = 0
        while base < self.area_data_end:
            remaining = self.area_data_end - base
            part = self.part_bytes if remaining >= self.world * self.part_bytes else align_up(-(-remaining // self.world), PAGE)
            rounds.append((base, part))
            base += self.world * part
        return rounds

    def pieces(self, round_index: int, rank: Optional[int] = None) -> List[Piece]:
        """The tensor bytes rank ``rank`` (default: this one) reads in round ``round_index``, in file order."""
        base, part = self.rounds[round_index]
        r = self.rank if rank is None else rank
        lo, hi = base + r * part, base + (r + 1) * part
        out = []
        i = max(0, bisect.bisect_right(self._starts, lo) - 1)
        while i < len(self._read) and self._starts[i] < hi:
            t = self._read[i]
            start, stop = max(lo, self._starts[i]), min(hi, self._starts[i] + t.nbytes)
            if stop > start:
                out.append(Piece(t.name, start, start - self._starts[i], stop - start))
            i += 1
        return out

    def slice_pieces(self) -> List[Piece]:
        """The chunks of this rank's slices, each at its place in the buffer."""
        out = []
        for s in self.slices:
            at = s.buffer_offset
            for offset, size in s.chunks:
                out.append(Piece(s.tensor.name, at, offset, size))
                at += size
        return out

    def read_bytes(self, rank: Optional[int] = None) -> int:
        """Bytes rank ``rank`` reads of the exchanged tensors (its slices come on top for this rank)."""
        return sum(p.size for k in range(len(self.rounds)) for p in self.pieces(k, rank))

    def fingerprint(self, tensors: Sequence[Any], files: Sequence[str], device_kind: str,
                    shard_facts: Sequence[Tuple[int, int, Mapping[str, str]]] = ()) -> str:
        """What every rank must agree on before any exchange: the checkpoint (tensors, shard names, and each
        shard's size, header length and ``__metadata__``: two saves of one layout, another step's say, differ
        there) and the collectives the plan makes (world size, the exchanged tensors, the rounds, the kind of
        memory)."""
        table = [[t.name, t.dtype, list(t.shape), t.nbytes, t.shard, t.file_offset] for t in tensors]
        shards = [[size, header, sorted(metadata.items())] for size, header, metadata in shard_facts]
        shared = [self.world, device_kind, [t.name for t in self.exchanged], self.rounds, [f.rsplit("/", 1)[-1] for f in files]]
        return hashlib.sha256(json.dumps([table, shards, shared]).encode("utf-8", "surrogateescape")).hexdigest()
