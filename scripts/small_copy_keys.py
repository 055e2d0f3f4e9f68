"""Does SmallCopy launch a kept Triton kernel only where Triton's JIT would?

``SmallCopy`` (python/sglang/kernels/ops/memory/small_copy.py of a patched
v0.5.23 tree) launches each kernel's first call through Triton's JIT, keeps
the compiled kernel under a key of its own and launches it directly from then
on. Triton compiles one kernel per specialization of the arguments (types,
16-byte alignment of pointers, integers equal to 1 or divisible by 16), so
SmallCopy's key must tell apart every pair of calls Triton's does.

This runs ``SmallCopy.__call__`` on CPU tensors that report a CUDA device,
with the JIT and the compiled launcher replaced by recorders: the JIT's
recorder specializes the call with the installed Triton's own binder
(``create_function_from_signature`` over the real kernel's parameters, CUDA
backend, sm_90) and returns one kernel per specialization; a direct launch
re-specializes its own arguments (the pointers mapped back to the call's
tensors) and is a mismatch where that differs from its kernel's. Nothing is
compiled or launched. Sequences: the upstream test's
``test_sources_change_between_calls`` (2 sweeps of 12 steps) and
``test_sizes_and_strides_between_calls`` (2 sweeps of 4), a seeded random
one (400 calls drawn from 40 sets of rows 0, 1, 2, 15, 16, 17, 32, 33 or 64,
offsets 0-3, strided or not, dtypes swapped or not; no cap on kernels kept),
destinations off 16-byte alignment with rows 0 and 16 in turn, and calls made
while another device is current.

Run with the tree's python/ (and the Triton to check) first on the path:
    PYTHONPATH=<triton>:build/v0.5.23/sglang/python python scripts/small_copy_keys.py
Exit status 1 where any direct launch used another specialization's kernel.
"""

from __future__ import annotations

import random
import sys
from types import SimpleNamespace

import torch
import triton
from sglang.kernels.ops.memory import small_copy
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.runtime.jit import create_function_from_signature

BLOCK = small_copy._BLOCK
# The upstream test's TestSmallCopy.LAYOUT: (dtype, shape, axis).
LAYOUT = [
    (torch.int64, (64,), 0),
    (torch.int32, (64,), 0),
    (torch.float32, (64, 2), 0),
    (torch.int64, (3, 64), 1),
    (torch.bfloat16, (64,), 0),
    (torch.int32, (5,), None),
]


class OnCuda(torch.Tensor):
    """A CPU tensor that reports CUDA device 0 (SmallCopy copies only there)."""

    @property
    def device(self):
        return torch.device("cuda", 0)


class Kernel:
    def __init__(self, spec, device):
        self.spec, self.device = spec, device
        self.function = self.packed_metadata = None

    def run(self, *args):
        # grid (3), stream, function, metadata, launch metadata, hooks (2).
        assert args[6:9] == (None, None, None), args[6:9]
        src_ptrs, dst_ptrs, *rest = args[9:]
        run = STATE.call
        assert src_ptrs == tuple(s.data_ptr() for s in run.srcs)
        # The buffers' addresses; the JIT sees the views' (0 where empty).
        assert all(p == v.data_ptr() for p, v in zip(dst_ptrs, run.views, strict=True) if v.numel())
        *ints, widths, block = rest
        spec = specialize(run.srcs, run.views, ints, widths, block)
        STATE.direct += 1
        if spec != self.spec or self.device != CURRENT[0]:
            STATE.mismatches.append((run.label, self.spec, spec))


class JIT:
    """The JIT's part SmallCopy sees: kernel lookup by specialization."""

    pre_run_hooks: list = []

    def __init__(self):
        self.kernels = {}

    def __getitem__(self, grid):
        def launch(srcs, views, *ints, BLOCK):
            *ints, widths = ints
            spec = specialize(srcs, views, ints, widths, BLOCK)
            STATE.jit += 1
            key = (CURRENT[0], spec)
            if key not in self.kernels:
                self.kernels[key] = Kernel(spec, CURRENT[0])
            return self.kernels[key]

        return launch


def specialize(srcs, views, ints, widths, block):
    """Triton's specialization of a call, as its JIT computes it."""
    plain = tuple(torch.Tensor._make_subclass(torch.Tensor, t) for t in srcs)
    dsts = tuple(torch.Tensor._make_subclass(torch.Tensor, t) for t in views)
    _, spec, _ = BINDER(plain, dsts, *ints, widths, BLOCK=block)
    return str(spec)


def fresh(shape, dtype, offset=0, strided=False):
    """The upstream test's _fresh, on the host."""
    step = 2 if strided else 1
    n = torch.Size(shape).numel() * step
    if dtype.is_floating_point:
        flat = torch.randn(n + offset).to(dtype)
    else:
        flat = torch.randint(-(2**30), 2**30, (n + offset,)).to(dtype)
    return flat[offset:][::step].view(shape).as_subclass(OnCuda)


def sources(rows, step, offsets=None, strided=None, layout=LAYOUT):
    """The upstream test's TestSmallCopy._sources (per-source offsets and
    strides where given)."""
    srcs = []
    for i, ((dtype, shape, axis), n) in enumerate(zip(layout, rows, strict=True)):
        shape = list(shape)
        if axis is not None:
            shape[axis] = n
        if dtype in (torch.int32, torch.int64) and step % 2:
            dtype = torch.int64 if dtype == torch.int32 else torch.int32
        offset = step % 3 if offsets is None else offsets[i]
        stride = step % 4 == 3 if strided is None else strided[i]
        srcs.append(fresh(tuple(shape), dtype, offset=offset, strided=stride))
    return srcs


def call(copy, label, srcs, rows):
    STATE.call = SimpleNamespace(label=label, srcs=srcs, views=copy.views(rows))
    assert copy(srcs, rows), label


def new_copy(layout=LAYOUT, offset=0):
    """A SmallCopy into new buffers, each ``offset`` elements into its storage."""
    buffers = [
        torch.full((torch.Size(shape).numel() + offset,), -1)
        .to(dtype)[offset:]
        .view(shape)
        .as_subclass(OnCuda)
        for dtype, shape, _ in layout
    ]
    copy = small_copy.SmallCopy(buffers, [axis for _, _, axis in layout])
    assert copy._ready
    return copy


def main() -> int:
    print(f"triton {triton.__version__} ({triton.__file__})")
    print(f"small_copy: {small_copy.__file__}")
    results = {}
    # The upstream test's test_sources_change_between_calls.
    copy = new_copy()
    for sweep in range(2):
        for step in range(12):
            rows = (step * 5 % 65, step * 3 % 65, step, 64 - step, step % 9, 5)
            call(copy, f"upstream sequence: sweep {sweep} step {step}", sources(rows, step), rows)
    results["upstream sequence"] = copy
    # The upstream test's test_sizes_and_strides_between_calls.
    copy = new_copy()
    for sweep in range(2):
        for n, strided in ((1, False), (16, False), (9, False), (16, True)):
            rows = (n, n, n, n, n, 5)
            srcs = sources(rows, 0, offsets=[0] * 6, strided=[strided] * 6)
            call(copy, f"sizes and strides: sweep {sweep} rows {n} strided {strided}", srcs, rows)
    results["sizes and strides"] = copy
    # Seeded random rows, offsets, strides and dtypes, every kernel kept.
    kept, small_copy._KEPT_KERNELS = small_copy._KEPT_KERNELS, 10**6
    rng = random.Random(0)
    pool = [
        (
            tuple(rng.choice((0, 1, 2, 15, 16, 17, 32, 33, 64)) for _ in range(5)) + (5,),
            rng.randrange(2),
            [rng.randrange(4) for _ in LAYOUT],
            [rng.random() < 0.3 for _ in LAYOUT],
        )
        for _ in range(40)
    ]
    copy = new_copy()
    for i in range(400):
        rows, step, offsets, strided = rng.choice(pool)
        srcs = sources(rows, step, offsets=offsets, strided=strided)
        call(copy, f"random sequence: call {i} rows {rows}", srcs, rows)
    results["random sequence"] = copy
    small_copy._KEPT_KERNELS = kept
    # Destinations 8 bytes past 16-byte alignment, their rows empty or not.
    layout = [(torch.float32, (64, 2), 0), (torch.int32, (5,), None)]
    copy = new_copy(layout, offset=2)
    for i, n in enumerate((0, 16, 0, 16)):
        srcs = sources((n, 5), 0, layout=layout)
        call(copy, f"misaligned destinations: call {i} rows {n}", srcs, (n, 5))
    results["misaligned destinations"] = copy
    # A first call, then calls while device 1 is current, then device 0 again.
    copy = new_copy()
    rows = (8, 8, 8, 8, 8, 5)
    for i, device in enumerate((0, 1, 1, 0, 0)):
        CURRENT[0] = device
        call(copy, f"other device current: call {i} on device {device}", sources(rows, 0), rows)
    CURRENT[0] = 0
    results["other device current"] = copy
    print(
        f"calls {STATE.calls()}; JIT launches {STATE.jit}; direct launches "
        f"{STATE.direct}; Triton specializations {len(JIT_.kernels)}"
    )
    for name, copy in results.items():
        bad = sum(label.startswith(name) for label, _, _ in STATE.mismatches)
        print(f"  {name}: kept kernels {len(copy._kernels)}, mismatches {bad}")
    for label, kept, wanted in STATE.mismatches[:5]:
        print(f"MISMATCH {label}:\n  kept kernel for {kept}\n  call needs     {wanted}")
    print(f"mismatches: {len(STATE.mismatches)}")
    return 1 if STATE.mismatches else 0


STATE = SimpleNamespace(call=None, jit=0, direct=0, mismatches=[])
STATE.calls = lambda: STATE.jit + STATE.direct
CURRENT = [0]
BINDER = create_function_from_signature(
    small_copy._small_copy_kernel.signature,
    small_copy._small_copy_kernel.params,
    CUDABackend(GPUTarget("cuda", 90, 32)),
)
JIT_ = JIT()
small_copy._small_copy_kernel = JIT_
small_copy.driver = SimpleNamespace(active=SimpleNamespace(get_current_stream=lambda index: 0))
torch.accelerator.current_device_index = lambda: CURRENT[0]

if __name__ == "__main__":
    sys.exit(main())
