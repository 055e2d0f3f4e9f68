"""Host µs of the pieces a v0.5.23 runner's replay is made of, unprofiled, on the
patched tree: python3 ci/results/h200-2026-12-04j-profile/pieces.py TREE, from the
repository root (TREE: the python/ root holding sglang).

Each figure is the median over 15 batches of the mean of 400 back-to-back
calls (host time only; the GPU is synchronized between batches). The SmallCopy
rows call the tree's own SmallCopy on sources laid out as the EAGLE draft
runner's and draft extend runner's _copy_inputs pass them (6 and 9 fields,
bs rows of buffers for 64); its parts are timed by running the same
expressions as SmallCopy.__call__ on the same sources (an anatomy, not a
second implementation)."""

import dataclasses
import statistics
import sys
import time
from bisect import bisect_left

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, "scripts")

import torch  # noqa: E402
from mla_harness import replacements  # noqa: E402

# sgl_kernel is not installed on the H200 host: the harness's replacement 3.
replacements.prepare_environment(use_cuda=True)

from sglang.kernels.ops.memory import small_copy as sc_mod  # noqa: E402
from sglang.kernels.ops.memory.small_copy import SmallCopy  # noqa: E402
from sglang.srt.layers.logits_processor import LogitsProcessorOutput  # noqa: E402
from sglang.srt.model_executor.runner_utils.pool import (  # noqa: E402
    graph_pool_borrow_enabled,
    graph_pool_replay_scope,
)

DEV = "cuda"
MAX_BS, STEPS, TOPK, WIDTH = 64, 3, 1, 4


def per_call(fn, calls=400, batches=15):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    means = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(means)


def int_buf(n):
    return torch.zeros(n, dtype=torch.int64, device=DEV)


def fields(bs, extend):
    """(buffer, source) pairs as the draft (6) or draft extend (9) runner copies."""
    tokens = bs * (WIDTH if extend else 1)
    pairs = [
        (int_buf(MAX_BS), torch.randint(0, 99, (bs,), device=DEV)),  # seq_lens
        (
            int_buf(MAX_BS * WIDTH * STEPS),
            torch.randint(0, 99, (tokens * (1 if extend else STEPS),), device=DEV),
        ),  # out_cache_loc
        (int_buf(MAX_BS * WIDTH), torch.randint(0, 99, (tokens,), device=DEV)),
        (
            torch.zeros(MAX_BS, TOPK, device=DEV),
            torch.rand(bs, TOPK, device=DEV),
        ),  # topk_p
        (
            torch.zeros(MAX_BS, TOPK, dtype=torch.int64, device=DEV),
            torch.randint(0, 99, (bs, TOPK), device=DEV),
        ),  # topk_index
        (int_buf(MAX_BS), torch.randint(0, 99, (bs,), device=DEV)),  # req_pool
    ]
    if extend:
        pairs += [
            (int_buf(MAX_BS * WIDTH), torch.randint(0, 99, (tokens,), device=DEV)),
            (
                torch.zeros(MAX_BS, dtype=torch.int32, device=DEV),
                torch.randint(0, 99, (bs,), dtype=torch.int32, device=DEV),
            ),
            (int_buf(MAX_BS), torch.randint(0, 99, (bs,), device=DEV)),
        ]
    return [b for b, _ in pairs], [s for _, s in pairs]


def small_copy_rows(bs, extend):
    bufs, srcs = fields(bs, extend)
    copy = SmallCopy(bufs, [0] * len(bufs))
    rows = tuple(s.shape[0] for s in srcs)
    assert copy(srcs, rows), "SmallCopy refused the runner-like sources"
    torch.cuda.synchronize()
    for b, s in zip(bufs, srcs):
        assert torch.equal(b[: s.shape[0]], s)
    out = {}
    out["whole call"] = per_call(lambda: copy(srcs, rows))

    def key():
        return tuple(
            [
                (
                    s.dtype,
                    s.shape,
                    s.stride(),
                    s.get_device(),
                    s.requires_grad,
                    s.is_neg(),
                )
                for s in srcs
            ]
        )

    k = key()
    layouts = {k: copy._layouts[k]}

    def lru():
        layouts[k] = layouts.pop(k)

    layout = copy._layouts[k]
    extents = layout[4]
    starts, ends = copy._starts, copy._ends

    def overlap():
        pointers = [s.data_ptr() for s in srcs]
        for i, (pointer, extent) in enumerate(zip(pointers, extents)):
            j = bisect_left(starts, pointer + extent) - 1
            if extent and j >= 0 and ends[j] > pointer:
                return False
        return pointers

    out["  layout key"] = per_call(key)
    out["  LRU pop and insert"] = per_call(lru)
    out["  pointers and overlap check"] = per_call(overlap)
    out["  current_device_index"] = per_call(torch.accelerator.current_device_index)
    out["  _launch_hooked"] = per_call(sc_mod._launch_hooked)
    (launcher,) = copy._kernels.values()
    run, function, metadata = launcher
    _, grid, args, widths, _, _ = layout
    pointers = tuple(overlap())
    stream = copy._current_stream(copy.device.index)

    def launch():
        run(
            *grid,
            stream,
            function,
            metadata,
            None,
            None,
            None,
            pointers,
            copy._pointers,
            *args,
            widths,
            sc_mod._BLOCK,
        )

    out["  compiled launcher alone"] = per_call(launch)
    out["  current stream"] = per_call(lambda: copy._current_stream(0))
    return out


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for extend in (False, True):
        for bs in (1, 32, 64):
            name = "draft extend (9 fields)" if extend else "draft (6 fields)"
            for part, us in small_copy_rows(bs, extend).items():
                print(f"SmallCopy, {name}, bs {bs}: {part}: {us:.2f} µs")
    logits = torch.zeros(64 * WIDTH, 1000, device=DEV)
    hidden = torch.zeros(64 * WIDTH, 64, device=DEV)
    output = LogitsProcessorOutput(
        next_token_logits=logits, hidden_states=hidden, last_hidden_states=None
    )
    n = 32 * WIDTH
    print(
        "dataclasses.replace of the verify output (4 fields sliced): "
        f"{per_call(lambda: dataclasses.replace(output, next_token_logits=logits[:n], full_logits=None, hidden_states=hidden[:n], last_hidden_states=None)):.2f} µs"
    )
    print(f"  two slices alone: {per_call(lambda: (logits[:n], hidden[:n])):.2f} µs")

    def scope():
        with graph_pool_replay_scope():
            pass

    print(f"graph_pool_replay_scope enter and exit: {per_call(scope):.2f} µs")
    print(f"  graph_pool_borrow_enabled: {per_call(graph_pool_borrow_enabled):.2f} µs")
    x = torch.zeros(8, device=DEV)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x.add_(1)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            x.add_(1)
    torch.cuda.synchronize()
    print(f"CUDAGraph.replay of a one-kernel graph: {per_call(graph.replay):.2f} µs")
    hs = torch.zeros(64, 7168, dtype=torch.bfloat16, device=DEV)
    print(f"clone of 32 rows of 7168 bf16 hidden states: {per_call(lambda: hs[:32].clone()):.2f} µs")


main()
