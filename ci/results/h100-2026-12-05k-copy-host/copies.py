"""Host time of one grouped input copy, as the kept replays make it, and of the
ways a C++ call could make it instead; and each way's GPU time in a graph.

python3 copies.py  (from the repository root, PYTHONPATH holding the
queue's sglang tree first, as run1.sh gives it); prints a table per
field set and batch size: median host µs per call (the GPU idle before each
call), the parts of a SmallCopy call, and GPU µs per copy (50 copies in one
CUDA graph, replayed 20 times) and GPU operations per call. "RowsCopy (the tree's)"
is the runners' copy as the tree on PYTHONPATH makes it: the series' SmallCopy
route, or with ``series.diff`` folded in, candidate A; "RowsCopyB" is
alternative B, written here for timing only.
"""

import statistics
import time

import importlib.util
import sys

import torch
from triton.runtime import driver

# What the harness's children install before importing a tree's sglang
# (scripts/mla_harness/replacements.py; none of it replaces the copies).
sys.path.insert(0, "scripts")
from mla_harness import replacements  # noqa: E402

replacements.prepare_environment(True)
if importlib.util.find_spec("datasets") is None:
    sys.meta_path.insert(0, replacements._AbsentFinder(["datasets"]))
replacements.install_inert_modules(replacements.SERVER_MODULES)

from sglang.kernels.ops.memory.small_copy import SmallCopy, _launch_hooked  # noqa: E402
from sglang.srt.model_executor.runner_utils.buffers import RowsCopy  # noqa: E402

CALLS = 400
_KEPT_ROWS = 256


class RowsCopyB:
    """Alternative B as the README describes it, for timing only: the sources
    grouped by their buffers' dtype, one ``torch._foreach_copy_`` per group into
    views kept per ``rows`` (least recently used out), no per-source checks."""

    def __init__(self, buffers, axes):
        self.buffers, self.axes = buffers, axes
        groups = {}
        for i, buf in enumerate(buffers):
            groups.setdefault(buf.dtype, []).append(i)
        self.groups = tuple(groups.values())
        self.kept = {}

    def _views(self, rows):
        views = self.kept.pop(rows, None)
        if views is None:
            if len(self.kept) >= _KEPT_ROWS:
                del self.kept[next(iter(self.kept))]
            with torch.inference_mode(False):
                every = [
                    buf if axis is None else buf[:n] if axis == 0 else buf.narrow(axis, 0, n)
                    for buf, axis, n in zip(self.buffers, self.axes, rows)
                ]
                views = [[every[i] for i in index] for index in self.groups]
        self.kept[rows] = views
        return views

    def __call__(self, srcs, rows):
        for index, views in zip(self.groups, self._views(rows)):
            torch._foreach_copy_(views, [srcs[i] for i in index])
MAX_BS = 64
dev = torch.device("cuda")
I64, I32, F32 = torch.int64, torch.int32, torch.float32


def field_sets(bs):
    """(buffer shape, dtype, rows) of the three runners' kept copies, EAGLE
    3 steps / topk 1 / 4 draft tokens (the benchmark's configuration)."""
    draft = [  # seq_lens, out_cache_loc, positions, topk_p, topk_index, req_pool_indices
        ((MAX_BS,), I64, bs),
        ((MAX_BS * 3,), I64, bs * 3),
        ((MAX_BS,), I64, bs),
        ((MAX_BS, 1), F32, bs),
        ((MAX_BS, 1), I64, bs),
        ((MAX_BS,), I64, bs),
    ]
    verify = [  # input_ids, req_pool_indices, seq_lens, out_cache_loc, positions
        ((MAX_BS * 4,), I64, bs * 4),
        ((MAX_BS,), I64, bs),
        ((MAX_BS,), I64, bs),
        ((MAX_BS * 4,), I64, bs * 4),
        ((MAX_BS * 4,), I64, bs * 4),
    ]
    extend = verify + [((MAX_BS,), I32, bs), ((MAX_BS,), I32, bs)]
    return {"draft": draft, "verify": verify, "extend": extend}


def make(spec):
    bufs = [torch.zeros(shape, dtype=dt, device=dev) for shape, dt, _ in spec]
    rows = tuple(n for _, _, n in spec)
    srcs = [
        torch.arange(1, 1 + n * (shape[1] if len(shape) > 1 else 1), device=dev)
        .to(dt)
        .reshape((n, *shape[1:]))
        for shape, dt, n in spec
    ]
    return bufs, srcs, rows


def ways(bufs, srcs, rows):
    sc = SmallCopy(bufs, [0] * len(bufs))
    assert sc(srcs, rows)  # the first call compiles and keeps the launcher
    assert sc(srcs, rows)
    views = sc.views(rows)
    groups = {}
    for i, v in enumerate(views):
        groups.setdefault(v.dtype, []).append(i)
    groups = [(idx, [views[i] for i in idx]) for idx in groups.values()]

    def foreach_grouped():
        for idx, vs in groups:
            torch._foreach_copy_(vs, [srcs[i] for i in idx])

    byte_views = [v.view(torch.uint8) for v in views]

    def foreach_bytes():
        torch._foreach_copy_(byte_views, [s.view(torch.uint8) for s in srcs])

    rows_copy = RowsCopy(bufs, [0] * len(bufs))
    rows_copy_b = RowsCopyB(bufs, [0] * len(bufs))

    def foreach_mixed():
        torch._foreach_copy_(views, srcs)

    def copy_loop():
        for v, s in zip(views, srcs):
            v.copy_(s)

    def key():
        return tuple(
            [
                (s.dtype, s.shape, s.stride(), s.get_device(), s.requires_grad, s.is_neg())
                for s in srcs
            ]
        )

    def key_lite():
        return tuple([(s.dtype, s.shape, s.stride()) for s in srcs])

    def pointers():
        return [s.data_ptr() for s in srcs]

    if len(sc._kernels) != 1:  # the direct launch refused or off
        raise SystemExit(f"SmallCopy keeps {len(sc._kernels)} launchers, not 1")
    ((kernel_key, (run, function, metadata)),) = sc._kernels.items()
    _, grid, args, widths, _, _ = next(iter(sc._layouts.values()))
    ptrs = tuple(s.data_ptr() for s in srcs)
    stream = driver.active.get_current_stream

    def launcher():
        run(*grid, stream(0), function, metadata, None, None, None, ptrs,
            sc._pointers, *args, widths, 256)

    return {
        "SmallCopy": lambda: sc(srcs, rows),
        "  key": key,
        "  key (dtype, shape, strides)": key_lite,
        "  pointers": pointers,
        "  _launch_hooked": _launch_hooked,
        "  current_device_index": torch.accelerator.current_device_index,
        "  get_current_stream": lambda: stream(0),
        "  launcher.run": launcher,
        "foreach per dtype": foreach_grouped,
        "foreach as bytes": foreach_bytes,
        "RowsCopy (the tree's)": lambda: rows_copy(srcs, rows),
        "RowsCopyB (alternative B)": lambda: rows_copy_b(srcs, rows),
        "foreach mixed": foreach_mixed,
        "copy_ each": copy_loop,
    }, views, srcs


def host(fns):
    times = {name: [] for name in fns}
    for _ in range(CALLS):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            t = time.perf_counter_ns()
            fn()
            times[name].append(time.perf_counter_ns() - t)
    torch.cuda.synchronize()
    return {name: statistics.median(ts) / 1e3 for name, ts in times.items()}


def gpu(fn):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for _ in range(50):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / (20 * 50)


def kernels(fn):
    """The GPU operations one call makes (kernels, and copies)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(
        1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
    )


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    for bs in (1, 32, 64):
        for name, spec in field_sets(bs).items():
            fns, views, srcs = ways(*make(spec))
            h = host(fns)
            # each way writes the same rows
            wrong = set()  # the ways whose copy is not the sources'
            for way in tuple(w for w in fns if not w.startswith(" ")):
                for v in views:
                    v.zero_()
                fns[way]()
                torch.cuda.synchronize()
                if not all(torch.equal(v, s) for v, s in zip(views, srcs)):
                    wrong.add(way)
            print(f"\n{name} bs {bs} ({len(spec)} fields): host µs median of {CALLS}; GPU µs per copy in a graph; GPU operations")
            for way, us in h.items():
                g = "" if way.startswith(" ") else f"{gpu(fns[way]):8.2f} {kernels(fns[way]):4d}"
                print(f"  {way:30s} {us:8.2f} {g}{'  WRONG' if way in wrong else ''}")


main()
