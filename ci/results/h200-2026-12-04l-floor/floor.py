"""How far below its runners' host time an EAGLE iteration's own work goes:
python3 ci/results/h200-2026-12-04l-floor/floor.py TREE ROUNDS, from the
repository root (TREE: the python/ root holding sglang; CUDA).

In one process, with runner_check's setup 0 capturing bs 1, 32 and 64, the
three v0.5.23 runners (draft, target verify, draft extend) are built as
`mla_bench --runners` builds them. Per size, one iteration of their `execute`
runs once under recording hooks, which note, in order, every operation that
reaches the GPU or the attention backend at the outermost level of the call:
each `SmallCopy` call (the kept grouped input copy, its own Python included),
each tensor `copy_` / `clone` / `fill_` / `zero_` (a torch function mode),
each `init_forward_metadata_out_graph` of a trtllm_mla backend, and each
`CUDAGraph.replay`. The "floor" of a runner is those operations called again
on the same arguments and nothing else: what a replay that only copies and
launches would cost (its lower bound in Python: no key, no view, no branch).
Then, alternating `ROUNDS` times: each runner's `execute` and its floor as
single calls (the GPU synchronized before each call), and three-runner
iterations back to back (nothing waiting for the GPU), for `execute` and for
the floors. Printed: host µs per iteration (the medians of the rounds'
medians, and their range), per runner, and the operations recorded."""

import contextlib
import json
import os
import statistics
import sys
import time

TREE, ROUNDS = sys.argv[1], int(sys.argv[2])
# A dry run of this script on CPU (no graphs there: runner_check re-runs the
# forward eagerly): FLOOR_DEVICE=cpu.
DEVICE = os.environ.get("FLOOR_DEVICE", "cuda")
# How single calls wait for the GPU before each call: FLOOR_WAIT=spin polls a
# CUDA event instead of torch.cuda.synchronize.
WAIT = os.environ.get("FLOOR_WAIT", "synchronize")
sys.path.insert(0, "scripts")

from mla_harness import runner_check  # noqa: E402

SIZES = (1, 32, 64) if DEVICE == "cuda" else (1, 2)
CALLS = 40 if DEVICE == "cuda" else 1  # per round and measure


def main_loop(self, iterations, warmup=3):
    import torch
    from torch.overrides import TorchFunctionMode

    from sglang.kernels.ops.memory import small_copy
    from sglang.srt.layers.attention import trtllm_mla_backend as tm

    if DEVICE != "cuda":
        sync = lambda: None  # noqa: E731
    elif WAIT == "spin":
        # The GPU idle as after torch.cuda.synchronize, the thread kept busy
        # polling an event meanwhile.
        def sync():
            done = torch.cuda.Event()
            done.record()
            while not done.query():
                pass

    else:
        sync = torch.cuda.synchronize
    depth = [0]
    ops = []

    def outermost(fn, label):
        def call(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            ops.append((label, fn, args, kwargs))
            depth[0] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1

        return call

    class Tensors(TorchFunctionMode):
        NAMES = {"copy_", "clone", "fill_", "zero_", "_foreach_copy_"}

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if not depth[0] and name in self.NAMES:
                ops.append((name, func, args, kwargs))
            return func(*args, **kwargs)

    patched = [
        # v0.5.23 has no SmallCopy: its copies are tensor functions.
        *[(c, "__call__", "SmallCopy") for c in [getattr(small_copy, "SmallCopy", None)] if c],
        (torch.cuda.CUDAGraph, "replay", "CUDAGraph.replay"),
        (tm.TRTLLMMLABackend, "init_forward_metadata_out_graph", "metadata"),
        (tm.TRTLLMMLAMultiStepDraftBackend, "init_forward_metadata_out_graph", "metadata"),
    ]

    @contextlib.contextmanager
    def recording():
        saved = [(cls, attr, cls.__dict__[attr]) for cls, attr, _ in patched]
        for cls, attr, label in patched:
            setattr(cls, attr, outermost(cls.__dict__[attr], label))
        try:
            with Tensors():
                yield
        finally:
            for cls, attr, fn in saved:
                setattr(cls, attr, fn)

    order = [r for r in self.runners]  # draft, verify, draft extend
    names = [r.label or r.name for r in order]

    def execute_call(r, bs):
        _, call = r.ready(bs)

        def run(r=r, call=call):
            if r.path == "execute":  # VerifyRunner.ready: keep the plain execute path
                r.path = "load_batch, execute"
            return call()

        return run

    def floor_call(op_list):
        bound = [(fn, args, kwargs) for _, fn, args, kwargs in op_list]

        def run():
            for fn, args, kwargs in bound:
                fn(*args, **kwargs)

        return run

    report = {"sizes": {}}
    for bs in SIZES:
        # Record one iteration, per runner.
        recorded = []
        for r in order:
            run = execute_call(r, bs)
            run()  # warm
            run = execute_call(r, bs)
            ops.clear()
            sync()
            with recording():
                run()
            recorded.append(list(ops))
        floors = [floor_call(o) for o in recorded]
        for f in floors:
            f()
        sync()

        rounds = {"single_execute": [], "single_floor": [], "loop_execute": [], "loop_floor": []}
        per_runner = {k: [[] for _ in order] for k in ("single_execute", "single_floor")}
        for _ in range(ROUNDS):
            for measure in ("execute", "floor"):
                # single calls, GPU idle before each
                sums = []
                for _ in range(CALLS):
                    calls = [execute_call(r, bs) for r in order] if measure == "execute" else floors
                    total = 0.0
                    for i, call in enumerate(calls):
                        sync()
                        start = time.perf_counter()
                        call()
                        us = (time.perf_counter() - start) * 1e6
                        per_runner[f"single_{measure}"][i].append(us)
                        total += us
                    sums.append(total)
                rounds[f"single_{measure}"].append(statistics.median(sums))
                # back to back
                iters = [
                    ([execute_call(r, bs) for r in order] if measure == "execute" else floors)
                    for _ in range(CALLS + 3)
                ]
                sync()
                host = []
                for calls in iters:
                    start = time.perf_counter()
                    for call in calls:
                        call()
                    host.append((time.perf_counter() - start) * 1e6)
                sync()
                rounds[f"loop_{measure}"].append(statistics.median(host[3:]))
        # Each recorded operation's own host µs, in single calls (the GPU
        # synchronized before each runner's operations) and back to back.
        per_op = {}
        for mode in ("single", "loop"):
            times = [[[] for _ in o] for o in recorded]
            sync()
            for _ in range(ROUNDS * CALLS):
                for i, op_list in enumerate(recorded):
                    if mode == "single":
                        sync()
                    for j, (_, fn, args, kwargs) in enumerate(op_list):
                        start = time.perf_counter()
                        fn(*args, **kwargs)
                        times[i][j].append((time.perf_counter() - start) * 1e6)
            sync()
            per_op[mode] = {
                names[i]: [
                    [recorded[i][j][0], round(statistics.median(t), 1)]
                    for j, t in enumerate(times[i])
                ]
                for i in range(len(order))
            }
        report["sizes"][bs] = {
            "per_op_us": per_op,
            "rounds": rounds,
            "per_runner_single_us": {
                k: {names[i]: statistics.median(v[i]) for i in range(len(order))}
                for k, v in per_runner.items()
            },
            "ops": {names[i]: [label for label, *_ in recorded[i]] for i in range(len(order))},
        }
    print("FLOOR " + json.dumps(report))
    return []


runner_check.RunnerCheck.loop = main_loop
# --time selects timing; its own per-runner figures are not wanted here.
runner_check.RunnerCheck.time_execute = lambda self, repeats, warmup=3: []
sys.exit(
    runner_check.main(
        [
            "--tree",
            TREE,
            "--device",
            DEVICE,
            "--time",
            "1",
            "--loop",
            "1",
            "--sizes",
            ",".join(map(str, SIZES)),
        ]
    )
)
