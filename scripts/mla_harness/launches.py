"""Count what a call does on the device: Triton launches, torch ops, syncs, bytes.

Works the same on CPU (Triton interpreter) and GPU, so launch counts measured
in CI are the counts a GPU would see:

- ``triton``: launches of ``@triton.jit`` kernels (``kernel[grid](...)``), by name,
  and on a GPU those through a compiled kernel's launcher (``DIRECT``);
- ``torch``: aten ops that run a device kernel, i.e. not views and not bare
  allocations (``empty``), on device tensors; a foreach op as many as it
  launches on a GPU (one on PyTorch's fast route, else one per index);
- ``graphs``: ``torch.cuda.CUDAGraph.replay`` calls (one launch each);
- ``launches``: the three together: what the host launches;
- ``syncs``: device-to-host reads (``.item()``, ``.tolist()``) of device tensors;
- ``alloc_bytes`` / ``allocs``: fresh device storage created during the call.

"Device tensor" means ``tensor.device.type == "cuda"`` on a GPU. On CPU every
tensor is a CPU tensor, so the harness marks the host-side ones (``seq_lens_cpu``
and what is computed from them only) with ``mark_host``; the rest stand for
device tensors.
"""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# Counts.triton's name for launches through a compiled kernel's launcher.
DIRECT = "compiled kernel (direct launch)"
ALLOCATION_ONLY = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"}
HOST_READS = {"_local_scalar_dense", "item"}


@dataclass
class Counts:
    triton: collections.Counter = field(default_factory=collections.Counter)
    torch: collections.Counter = field(default_factory=collections.Counter)
    graphs: int = 0
    syncs: int = 0
    allocs: int = 0
    alloc_bytes: int = 0

    @property
    def launches(self) -> int:
        return sum(self.triton.values()) + sum(self.torch.values()) + self.graphs

    def as_dict(self) -> dict:
        return {
            "launches": self.launches,
            "triton": dict(self.triton),
            "torch": dict(self.torch),
            "graphs": self.graphs,
            "syncs": self.syncs,
            "allocs": self.allocs,
            "alloc_bytes": self.alloc_bytes,
        }


# data_ptr -> tensor: holding the tensor keeps its address from being reused.
_host_storages: dict[int, torch.Tensor] = {}


def mark_host(*tensors: torch.Tensor) -> None:
    """Declare CPU tensors that stand for host memory (CPU runs only)."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type == "cpu":
            _host_storages[t.untyped_storage().data_ptr()] = t


def _is_device(t: torch.Tensor) -> bool:
    if t.device.type == "cuda":
        return True
    if t.device.type != "cpu" or torch.cuda.is_available():
        return False
    return t.untyped_storage().data_ptr() not in _host_storages


def _tensors(tree) -> list[torch.Tensor]:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def _layout(t: torch.Tensor) -> tuple:
    """(size, stride) of each dimension, size-1 ones aside (their strides do
    not matter to PyTorch's foreach fast route)."""
    return tuple((n, s) for n, s in zip(t.shape, t.stride(), strict=True) if n != 1)


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: its strides, in order, are the products of
    the sizes below them."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in _layout(t)):
        if stride != expected:
            return False
        expected *= size
    return True


def _foreach_launches(name: str, args) -> int:
    """The kernels foreach op ``name`` over ``args``' tensor lists launches on a
    GPU: one where PyTorch's fast route takes the lists (every tensor dense
    and on one device, one dtype per list, across the lists too but for
    ``_foreach_copy_``, each index's tensors of one shape and strides, size-1
    dimensions aside), else one per index whose tensors are not all empty."""
    lists = [a for a in args if isinstance(a, (list, tuple)) and _tensors(a)]
    pairs = [at for at in zip(*lists, strict=True) if any(t.numel() for t in at)]
    if not pairs:
        return 0
    every = [t for tensors in lists for t in tensors]
    dtypes = [{t.dtype for t in tensors} for tensors in lists]
    fast = (
        len({(t.device, _is_device(t)) for t in every}) == 1
        and all(len(d) == 1 for d in dtypes)
        and (name == "_foreach_copy_" or len(set.union(*dtypes)) == 1)
        and all(_dense(t) for t in every)
        and all(len({_layout(t) for t in at}) == 1 for at in zip(*lists, strict=True))
    )
    return 1 if fast else len(pairs)


class _OpCounter(TorchDispatchMode):
    def __init__(self, counts: Counts):
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _inside_kernel:
            return out  # the interpreter's own tensor work is part of the launch
        inputs = _tensors((args, kwargs))
        outputs = _tensors(out)
        name = func.overloadpacket.__name__
        on_device = any(_is_device(t) for t in inputs) or (
            not inputs and any(_is_device(t) for t in outputs)
        )
        if not on_device:
            if outputs and inputs:
                mark_host(*outputs)  # derived from host data only
            return out
        if name in HOST_READS:
            self.counts.syncs += 1
            return out
        fresh = self._fresh_outputs(func, inputs, outputs)
        for t in fresh:
            self.counts.allocs += 1
            self.counts.alloc_bytes += t.untyped_storage().nbytes()
        if name.startswith("_foreach_"):  # in place ones return nothing
            launches = _foreach_launches(name, args)
            if launches:
                self.counts.torch[name] += launches
        elif not func.is_view and name not in ALLOCATION_ONLY and outputs:
            self.counts.torch[name] += 1
        return out

    @staticmethod
    def _fresh_outputs(func, inputs, outputs):
        if func.is_view:
            return []
        known = {t.untyped_storage().data_ptr() for t in inputs}
        seen, fresh = set(), []
        for t in outputs:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in known and ptr not in seen and t.untyped_storage().nbytes():
                seen.add(ptr)
                fresh.append(t)
        return fresh


_active: list[Counts] = []
_traces: list[Trace] = []
# What _install_triton_hook replaced: (owner, name, its own attribute or None).
_originals: list = []
_inside_kernel = 0


@dataclass
class Trace:
    """What a run touched that existed before it, and in what order it went.

    ``external``: the storages (data pointers) of the tensors its aten ops and
    Triton launches read or wrote that the run did not allocate itself; a
    CUDA graph replays with exactly the addresses of its capture, so a re-run
    that touches other ones is not what the graph would do. ``events``: Triton
    kernels by name, in launch order, and what ``note`` adds."""

    created: set = field(default_factory=set)
    external: set = field(default_factory=set)
    events: list = field(default_factory=list)

    def touch(self, inputs, outputs=()) -> None:
        for t in inputs:
            ptr = t.untyped_storage().data_ptr()
            if ptr and t.untyped_storage().nbytes() and ptr not in self.created:
                self.external.add(ptr)
        for t in outputs:
            ptr = t.untyped_storage().data_ptr()
            if ptr and ptr not in self.external:
                self.created.add(ptr)


def note(event: str) -> None:
    """Add ``event`` to every active ``trace``."""
    for trace in _traces:
        trace.events.append(event)


class _Tracer(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _inside_kernel:
            return out
        inputs = _tensors((args, kwargs))
        fresh = [] if func.is_view else _OpCounter._fresh_outputs(func, inputs, _tensors(out))
        for trace in _traces:
            trace.touch(inputs, fresh)
        return out


@contextlib.contextmanager
def trace():
    """``with trace() as t: ...`` then read ``t.external`` and ``t.events``."""
    _install_triton_hook()
    t = Trace()
    _traces.append(t)
    try:
        with _Tracer():
            yield t
    finally:
        _traces.remove(t)
        _uninstall_triton_hook()


def _install_triton_hook() -> None:
    """Count ``kernel[grid](...)`` launches of JIT and interpreted kernels alike,
    while a count or a trace is open (``_uninstall_triton_hook`` puts back the
    originals after the last one: the counters cost host time of their own, which
    a timed call outside them must not pay)."""
    if _originals:
        return
    from triton.runtime.jit import KernelInterface

    _originals.append((KernelInterface, "__getitem__", vars(KernelInterface).get("__getitem__")))
    original = KernelInterface.__getitem__

    def __getitem__(self, grid):
        launch = original(self, grid)
        name = getattr(getattr(self, "fn", None), "__name__", type(self).__name__)

        def counted(*args, **kwargs):
            global _inside_kernel
            for counts in _active:
                counts.triton[name] += 1
            if _traces:
                tensors = _tensors((args, kwargs))
                for t in _traces:
                    t.touch(tensors)
                    t.events.append(name)
            _inside_kernel += 1
            try:
                return launch(*args, **kwargs)
            finally:
                _inside_kernel -= 1

        return counted

    KernelInterface.__getitem__ = __getitem__
    # A compiled kernel launched through its launcher, not the JIT (as
    # kernels/ops/diffusion/common/fast_launch.py keeps one): counted there,
    # under DIRECT. The
    # interpreter (CPU) has no launcher; every launch is a JIT one.
    try:
        from triton.runtime import driver

        launcher = driver.active.launcher_cls
    except (ImportError, RuntimeError, AttributeError):
        launcher = None
    if launcher is not None:
        _originals.append((launcher, "__call__", vars(launcher).get("__call__")))
        call = launcher.__call__

        def counted_call(self, *args, **kwargs):
            if not _inside_kernel:
                for counts in _active:
                    counts.triton[DIRECT] += 1
            return call(self, *args, **kwargs)

        launcher.__call__ = counted_call
    if hasattr(torch.cuda, "CUDAGraph"):
        graph = torch.cuda.CUDAGraph
        _originals.append((graph, "replay", vars(graph).get("replay")))
        replay = graph.replay

        def counted_replay(self):
            for counts in _active:
                counts.graphs += 1
            return replay(self)

        graph.replay = counted_replay


def _uninstall_triton_hook() -> None:
    """Put back what ``_install_triton_hook`` replaced, once no count or trace is open."""
    if _active or _traces:
        return
    while _originals:
        owner, name, original = _originals.pop()
        if original is None:  # inherited: the subclass had none of its own
            delattr(owner, name)
        else:
            setattr(owner, name, original)


@contextlib.contextmanager
def count_launches():
    """``with count_launches() as c: ...`` then read ``c.launches`` etc."""
    _install_triton_hook()
    counts = Counts()
    _active.append(counts)
    try:
        with _OpCounter(counts):
            yield counts
    finally:
        _active.remove(counts)
        _uninstall_triton_hook()
