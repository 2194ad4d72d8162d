"""PyTorch helpers: a whole ``torch.nn.Module`` from a safetensors checkpoint in one call.

The recipe for a model that is ready to run without ever holding random weights::

    import torch, ferry.torch
    with ferry.torch.meta_parameters(buffers_device="cuda:0"):      # parameters on meta, buffers real
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    ferry.torch.load_into_module(model, "checkpoint_dir/")             # parameters land on cuda:0

Parameters built on the meta device cost nothing to create (no memory, no initialisation); buffers that
the model computes when it is built and that no checkpoint holds (rotary embeddings' ``inv_freq``) must be
real, so ``meta_parameters`` builds them on ``buffers_device``. ``load_into_module`` then gives each meta
parameter a tensor of the loaded checkpoint (no copy), each at an address as aligned as PyTorch's own
allocator gives (so the model computes what ``from_pretrained``'s does, as fast), and fills tensors that are
already real in place. With ``strict=True`` (the default) a module that would keep a tensor on the meta
device is refused before anything is read. The usual ways to build a model without weights:

* ``with ferry.torch.meta_parameters(buffers_device="cuda:0"): model = ...`` (any module, and
  ``transformers``' ``AutoModelForCausalLM.from_config(config)``): ready to load.
* ``with torch.device("meta"): model = ...`` puts the buffers on meta too: computed buffers that no checkpoint
  holds are lost, and the strict load says which. Use ``meta_parameters`` instead.
* accelerate's ``init_empty_weights()`` keeps buffers real, on the CPU: load without ``device`` (the module's
  tensors then all end up on the CPU) and move the model afterwards, or build it under ``meta_parameters``
  to have the buffers on the GPU at once. ``init_empty_weights(include_buffers=True)`` is
  ``torch.device("meta")``'s case.

torch is imported when this module is.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Dict, Iterator, List, Tuple, Union, cast

import torch

from . import _args, _checkpoint, _ferry
from . import safetensors as _st
from ._save import _dtype_names

__all__ = ["load_into_module", "meta_parameters", "ModuleLoadResult"]

Device = Union[str, int, "torch.device", None]


@contextlib.contextmanager
def meta_parameters(buffers_device: Device = None) -> Iterator[None]:
    """While the block runs, every parameter a module registers is replaced by a meta tensor of its shape and
    dtype (its initialisation then costs nothing), and every buffer is moved to ``buffers_device`` (None:
    left where the module made it). Not thread-safe: it patches ``torch.nn.Module`` for the block's duration.

    With ``buffers_device`` on a GPU, the load that follows is prepared meanwhile: :func:`ferry.warm_up` of
    that GPU runs on a thread of its own while the model is built, so that the load pins no staging memory
    (about 35 ms of a fresh process's first load on an H200 machine)."""
    module = torch.nn.Module
    register_parameter, register_buffer = module.register_parameter, module.register_buffer
    target = None if buffers_device is None else torch.device(_device_text(buffers_device))
    if target is not None and target.type == "cuda":
        _warm_up_in_background(target)

    def on_meta(self: Any, name: str, param: Any) -> None:
        register_parameter(self, name, param)
        p = self._parameters.get(name)
        if p is not None and p.device.type != "meta":
            self._parameters[name] = _parameter_like(p, p.to("meta"))

    def on_device(self: Any, name: str, tensor: Any, persistent: bool = True) -> None:
        if target is not None and tensor is not None and tensor.device != target:
            tensor = tensor.to(target)
        register_buffer(self, name, tensor, persistent=persistent)

    module.register_parameter = on_meta
    module.register_buffer = on_device
    try:
        yield
    finally:
        module.register_parameter = register_parameter
        module.register_buffer = register_buffer


def _warm_up_in_background(device: "torch.device") -> None:
    """ferry.warm_up(device) on a thread of its own (not a daemon: the interpreter's exit waits for its
    pinning rather than tear the driver down under it). "cuda" without an index is the caller's current
    device, asked here: the new thread's would be torch's default. A failure is left to the load, which
    meets the same cause and reports it in context."""
    try:
        index = device.index if device.index is not None else torch.cuda.current_device()
    except Exception:  # noqa: BLE001 (no usable CUDA in torch: the buffers' move will say so)
        return

    def run() -> None:
        try:
            _ferry.warm_up(index, None)
        except Exception:  # noqa: BLE001 (see above)
            pass

    threading.Thread(target=run, name="ferry-warm-up").start()


class ModuleLoadResult(Tuple[List[str], List[str]]):
    """``(missing_keys, unexpected_keys)``, as ``load_state_dict`` returns them, plus ``stats`` (the load's, as
    :attr:`ferry.safetensors.LoadResult.stats`), ``report`` (a :class:`ferry.Report`), ``tied`` (groups of
    names that are one tensor in the module and were loaded once) and ``meta`` (tensors of the module still
    on the meta device afterwards: the module cannot run until they are set)."""

    stats: Dict[str, Any]
    report: Any
    tied: List[List[str]]
    meta: List[str]

    def __new__(cls, missing: List[str], unexpected: List[str], stats: Dict[str, Any], report: Any,
                tied: List[List[str]], meta: List[str]) -> "ModuleLoadResult":
        obj = super().__new__(cls, cast(Any, (missing, unexpected)))  # mypy cannot type tuple.__new__ here
        obj.stats, obj.report, obj.tied, obj.meta = stats, report, tied, meta
        return obj

    @property
    def missing_keys(self) -> List[str]:
        return self[0]

    @property
    def unexpected_keys(self) -> List[str]:
        return self[1]

    def __repr__(self) -> str:
        return f"ModuleLoadResult(missing_keys={self[0]!r}, unexpected_keys={self[1]!r})"


_DTYPES = _dtype_names("torch")  # "float32" -> "F32"


def _device_text(device: Device) -> str:
    if isinstance(device, bool):
        raise TypeError("device must be a str, an int or a torch.device, not bool")
    if isinstance(device, int):
        return f"cuda:{device}"
    return str(device)


def _parameter_like(old: Any, data: Any) -> Any:
    """A parameter of the same class and requires_grad as `old` around `data`."""
    try:
        return type(old)(data, requires_grad=old.requires_grad)
    except TypeError:
        return torch.nn.Parameter(data, requires_grad=old.requires_grad)


def _owner(module: Any, name: str) -> Tuple[Any, str]:
    path, _, leaf = name.rpartition(".")
    return (module.get_submodule(path) if path else module), leaf


def _default_device(module: Any) -> str:
    """Where the module's real tensors are (its buffers, in the recipe), else the current GPU, else the CPU."""
    for t in list(module.buffers()) + list(module.parameters()):
        if t.device.type != "meta":
            return str(t.device)
    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"


def load_into_module(module: Any, checkpoint: _checkpoint.PathLike, strict: bool = True, *, device: Device = None,
                     progress: Any = None, process_group: Any = None, shard_rules: Any = None, timeout: Any = None,
                     **settings: Any) -> ModuleLoadResult:
    """Loads ``checkpoint`` (a ``.safetensors`` file, a ``model.safetensors.index.json`` or a directory) into
    ``module`` and returns ``(missing_keys, unexpected_keys)`` as ``module.load_state_dict`` does.

    Every name of ``module.state_dict()`` is matched with the checkpoint's tensors. Before anything is read,
    a shape or dtype that differs from the checkpoint's raises ``ValueError`` naming the tensor (no silent
    casts), and with ``strict=True`` missing or unexpected keys raise ``RuntimeError`` in
    ``load_state_dict``'s words. Names that are one tensor in the module (tied weights) are loaded once,
    from the first of them the checkpoint holds, and stay one tensor; a tied name the checkpoint lacks is not
    missing when another of its names was loaded (Hugging Face's writers save tied weights once).

    Tensors on the meta device get tensors of the loaded checkpoint on ``device`` (None: where the module's
    real tensors are, else the current GPU, else the CPU), assigned without a copy: the checkpoint is read
    into one buffer per device by :func:`ferry.safetensors.load`, each tensor at an aligned address of its
    own (with ``strict=False``, tensors the module does not take are read too). Tensors that are already real
    are filled in place: directly by the reads when no tensor is on the meta device, else copied from the
    loaded buffer. Buffers the checkpoint does not hold are left as they are (build them real:
    :func:`meta_parameters`): with ``strict=True``, a parameter or buffer that would still be on the meta
    device afterwards (a non-persistent buffer of a model built under ``torch.device("meta")``) raises
    ``RuntimeError`` naming it before anything is read; with ``strict=False`` the load goes on, warns, and the
    result's ``meta`` lists them.

    ``process_group`` (every rank calls this alike): the checkpoint is loaded by
    :func:`ferry.distributed.load`, each byte read by one rank; with ``shard_rules`` the module's tensors
    must have this rank's slice shapes. The checks above run on every rank before any data moves, and a
    failure on one rank raises :class:`ferry.distributed.DistributedLoadError` on all; real tensors are
    copied from the loaded buffer.

    ``progress`` and other keyword arguments as :func:`ferry.safetensors.load` (Ferry settings).
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, not {type(module).__name__}")
    path = _args.display(checkpoint)
    if process_group is not None or shard_rules is not None or timeout is not None:
        return _load_by_group(module, checkpoint, path, strict, device, progress, process_group, shard_rules, timeout,
                              settings)
    impl = _checkpoint._open(checkpoint, _ferry.SAFETENSORS_DEFAULT_MAX_HEADER_BYTES, 0, settings)
    plan = _ModulePlan(module, {row[0]: (row[1], row[2]) for row in impl.tensors()}, strict, path)
    if plan.on_meta:
        target = _device_text(device) if device is not None else _default_device(module)
        result = _st.load(checkpoint, target, progress=progress, **settings)
        stats, report = result.stats, result.report
        plan.install(module, result.tensors)
    elif plan.real:
        stats = _st.load_into(checkpoint, {n: t for n, t in plan.real}, progress=progress if progress is not None else False,
                              **settings)
        report = stats.pop("report")
    else:
        stats, report = {"bytes_read": 0, "seconds": 0.0, "notes": []}, None
    return plan.result(module, path, stats, report)


class _ModulePlan:
    """Which checkpoint tensor fills which tensor of the module: checked before anything is read."""

    def __init__(self, module: Any, rows: Dict[str, Tuple[str, Tuple[int, ...]]], strict: bool, path: str) -> None:
        """``rows``: checkpoint name -> (safetensors dtype, the shape this process receives). Raises
        ``RuntimeError`` (strict key mismatches) or ``ValueError`` (dtypes, shapes) as described above."""
        expected = {n: t for n, t in module.state_dict(keep_vars=True).items() if isinstance(t, torch.Tensor)}
        groups: Dict[int, List[str]] = {}
        for name, t in expected.items():
            groups.setdefault(id(t), []).append(name)
        loaded_names = {i: next((n for n in names if n in rows), None) for i, names in groups.items()}
        self.groups = groups
        self.missing = [n for n in expected if loaded_names[id(expected[n])] is None]
        self.unexpected = [n for n in rows if n not in expected]
        self.what = what = type(module).__name__
        if strict and (self.missing or self.unexpected):
            parts = []
            if self.missing:
                parts.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in self.missing) + ". ")
            if self.unexpected:
                parts.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in self.unexpected) + ". ")
            raise RuntimeError(f"Error(s) in loading state_dict for {what} from {path!r} (nothing was read):\n\t"
                               + "\n\t".join(parts))

        sources: List[Tuple[str, Any]] = []  # (checkpoint name, the module's tensor)
        mismatches = []
        for i, source in loaded_names.items():
            if source is None:
                continue
            t = expected[source]
            st_dtype, shape = rows[source]
            have = _DTYPES.get(str(t.dtype).replace("torch.", ""), str(t.dtype))
            if tuple(t.shape) != tuple(shape) or have != st_dtype:
                mismatches.append(f"{source!r} is {st_dtype} {list(shape)} in the checkpoint, but {have} "
                                  f"{list(t.shape)} in the module")
            elif t.device.type != "meta" and not t.is_contiguous():
                mismatches.append(f"{source!r} is not contiguous in the module, so it cannot be filled in place")
            sources.append((source, t))
        if mismatches:
            raise ValueError(f"Could not load {path!r} into {what} (nothing was read): " + "; ".join(mismatches))
        self.on_meta = [(n, t) for n, t in sources if t.device.type == "meta"]
        self.real = [(n, t) for n, t in sources if t.device.type != "meta"]
        if strict:
            _refuse_meta_left(module, {id(t) for _, t in sources}, what, path)

    def install(self, module: Any, tensors: Dict[str, Any]) -> None:
        """Sets the loaded ``tensors`` in place of the meta ones (no copy) and copies into the real ones."""
        for source, old in self.on_meta:
            # One new tensor per group, set under every name: tied weights stay tied.
            fresh = tensors[source]
            new = _parameter_like(old, fresh) if isinstance(old, torch.nn.Parameter) else fresh
            for name in self.groups[id(old)]:
                owner, leaf = _owner(module, name)
                (owner._parameters if leaf in owner._parameters else owner._buffers)[leaf] = new
        with torch.no_grad():
            for source, t in self.real:
                t.copy_(tensors[source])

    def result(self, module: Any, path: str, stats: Dict[str, Any], report: Any, stacklevel: int = 3) -> ModuleLoadResult:
        meta_left = _meta_left(module, set())
        if meta_left:
            warnings.warn(f"{self.what}: {len(meta_left)} tensor(s) are still on the meta device after loading {path!r} "
                          f"(the module cannot run until they are set): {', '.join(meta_left[:5])}"
                          + (", ..." if len(meta_left) > 5 else ""), stacklevel=stacklevel)
        tied = [names for names in self.groups.values() if len(names) > 1]
        return ModuleLoadResult(self.missing, self.unexpected, stats, report, tied, meta_left)


def _meta_left(module: Any, loaded: Any) -> List[str]:
    """Names of the module's parameters and buffers (non-persistent ones too) on the meta device that no
    checkpoint tensor fills (``loaded``: ids of the tensors that are filled)."""
    named = list(module.named_parameters()) + list(module.named_buffers())
    return [n for n, t in named if t.device.type == "meta" and id(t) not in loaded]


def _refuse_meta_left(module: Any, loaded: Any, what: str, path: str) -> None:
    """strict=True promises a module that runs: refuses, before any read, one that would keep meta tensors."""
    left = _meta_left(module, loaded)
    if not left:
        return
    shown = ", ".join(left[:8]) + (", ..." if len(left) > 8 else "")
    raise RuntimeError(
        f"Could not load {path!r} into {what} (nothing was read): {len(left)} tensor(s) are on the meta device and "
        f"not in the checkpoint, so the module could not run after the load: {shown}. Build the model with "
        f"ferry.torch.meta_parameters(buffers_device=...) (parameters on meta, buffers real) instead of "
        f"torch.device(\"meta\") or init_empty_weights(include_buffers=True), or pass strict=False and set them "
        f"yourself (the result's .meta lists them)")


def _load_by_group(module: Any, checkpoint: _checkpoint.PathLike, path: str, strict: bool, device: Device, progress: Any,
                   process_group: Any, shard_rules: Any, timeout: Any, settings: Dict[str, Any]) -> ModuleLoadResult:
    from . import distributed

    plans: List[_ModulePlan] = []
    target = _device_text(device) if device is not None else _default_device(module)
    result = distributed.load(checkpoint, target, process_group=process_group, shard_rules=shard_rules, timeout=timeout,
                              progress=progress, check=lambda rows: plans.append(_ModulePlan(module, rows, strict, path)),
                              **settings)
    plans[0].install(module, result.tensors)
    return plans[0].result(module, path, result.stats, result.report, stacklevel=4)
