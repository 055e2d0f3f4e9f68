"""Does the host run slower after waiting longer for the GPU? From the
repository root: python3 ci/results/h100-2026-12-06c-waits/wait_probe.py TREE (TREE:
the python/ root holding sglang; CUDA, or FLOOR_DEVICE=cpu for a dry run).

runner_check's setup 0 at bs 1, 32 and 64; each runner's call (the draft's
execute, verify's load_batch and execute, the draft extend's execute) is
timed alone, the GPU synchronized before it as in the benchmark's single
calls, after the GPU was first kept busy for WAIT µs (torch.cuda._sleep; 0:
nothing queued; "8000 polled": the host polls an event in a loop until the
GPU is done, then synchronizes). The waits alternate iteration by
iteration, so a drift of the host falls on all of them alike. Also timed the same way: a fixed piece of pure
Python (no CUDA call) after each wait. Printed: per size and wait, the
median µs of the iteration (the four calls summed) and of the Python piece,
and the median µs the synchronize itself waited."""

import json
import os
import statistics
import sys
import time

TREE = sys.argv[1]
DEVICE = os.environ.get("FLOOR_DEVICE", "cuda")
sys.path.insert(0, "scripts")

from mla_harness import runner_check  # noqa: E402

SIZES = (1, 32, 64) if DEVICE == "cuda" else (1, 2)
WAITS = tuple(
    w if w.endswith("polled") else int(w)
    for w in os.environ.get("WAITS", "0,500,2000,8000,8000 polled").split(",")
)
CALLS = int(os.environ.get("CALLS", 300)) if DEVICE == "cuda" else 2 * len(WAITS)
WARM = 12 if DEVICE == "cuda" else 0


def python_piece():
    total = 0
    for i in range(2000):
        total += i & 7
    return total


def probe(self, iterations, warmup=3):
    import torch

    cuda = DEVICE == "cuda"
    if cuda:
        # cycles per µs of torch.cuda._sleep, measured
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(10_000_000)
        end.record()
        end.synchronize()
        per_us = 10_000_000 / (start.elapsed_time(end) * 1000)

    def busy(wait):
        if cuda and wait:
            torch.cuda._sleep(int(int(str(wait).split()[0]) * per_us))

    def sync(wait):
        if cuda and str(wait).endswith("polled"):
            done = torch.cuda.Event()
            done.record()
            while not done.query():
                pass
        if cuda:
            torch.cuda.synchronize()

    report = {}
    for bs in SIZES:
        calls = []
        for _ in range(CALLS + WARM):
            for r in self.runners:
                _, call = r.ready(bs)
                if r.path == "execute":  # VerifyRunner.ready: keep the plain execute path
                    r.path = "load_batch, execute"
                calls.append(call)
        n = len(self.runners)
        iters = {w: [] for w in WAITS}
        synced = {w: [] for w in WAITS}
        piece = {w: [] for w in WAITS}
        for i in range(CALLS + WARM):
            wait = WAITS[i % len(WAITS)]
            spent = waited = 0.0
            for call in calls[i * n : (i + 1) * n]:
                busy(wait)
                t = time.perf_counter()
                sync(wait)
                t0 = time.perf_counter()
                call()
                t1 = time.perf_counter()
                spent += t1 - t0
                waited += t0 - t
            busy(wait)
            sync(wait)
            t0 = time.perf_counter()
            python_piece()
            t1 = time.perf_counter()
            if i >= WARM:
                iters[wait].append(spent * 1e6)
                synced[wait].append(waited * 1e6 / n)
                piece[wait].append((t1 - t0) * 1e6)
        report[bs] = {
            w: {
                "iteration_us": round(statistics.median(iters[w]), 1),
                "sync_us": round(statistics.median(synced[w]), 1),
                "python_us": round(statistics.median(piece[w]), 1),
                "n": len(iters[w]),
            }
            for w in WAITS
        }
        print(f"bs {bs}: " + json.dumps(report[bs]), flush=True)
    print("WAITS " + json.dumps(report))
    return []


def main():
    from mla_harness import replacements  # noqa: F401  (runner_check sets up the tree)

    runner_check.RunnerCheck.loop = probe
    runner_check.RunnerCheck.time_execute = lambda self, repeats, warmup=3: []
    return runner_check.main(
        ["--tree", TREE, "--device", DEVICE, "--time", "1", "--loop", "1",
         "--sizes", ",".join(map(str, SIZES))]
    )


sys.exit(main())
