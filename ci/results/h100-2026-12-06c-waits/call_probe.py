"""Which CUDA calls run slower after the host waited for the GPU? python3
ci/results/h100-2026-12-06c-waits/call_probe.py (CUDA; torch only, no SGLang).

After the GPU was kept busy for a nominal WAIT µs (torch.cuda._sleep) and
synchronized, the host times, in this order: a small in-place add (the first
CUDA call), the same add again, one replay of a captured CUDA graph of 8
such adds, one torch._foreach_copy_ of 6 small tensors, a fixed piece of
pure Python. The waits alternate rep by rep. Printed per wait: each step's
median µs over REPS reps and the median µs the synchronize waited."""

import json
import statistics
import time

import torch

WAITS = (0, 500, 2000, 8000)
REPS = 400
STEPS = ("first add", "second add", "graph replay", "foreach copy", "python")


def python_piece():
    total = 0
    for i in range(2000):
        total += i & 7
    return total


def main():
    x = torch.zeros(64, device="cuda")
    dsts = [torch.zeros(64, dtype=torch.int64, device="cuda") for _ in range(6)]
    srcs = [torch.ones(64, dtype=torch.int64, device="cuda") for _ in range(6)]
    g_in = torch.zeros(64, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            g_in.add_(1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(8):
            g_in.add_(1)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    per_us = 10_000_000 / (start.elapsed_time(end) * 1000)
    times = {w: {s: [] for s in STEPS + ("sync",)} for w in WAITS}
    for rep in range(REPS + 2 * len(WAITS)):
        wait = WAITS[rep % len(WAITS)]
        if wait:
            torch.cuda._sleep(int(wait * per_us))
        t = time.perf_counter()
        torch.cuda.synchronize()
        marks = [time.perf_counter()]
        x.add_(1)
        marks.append(time.perf_counter())
        x.add_(1)
        marks.append(time.perf_counter())
        graph.replay()
        marks.append(time.perf_counter())
        torch._foreach_copy_(dsts, srcs)
        marks.append(time.perf_counter())
        python_piece()
        marks.append(time.perf_counter())
        torch.cuda.synchronize()
        if rep >= 2 * len(WAITS):
            times[wait]["sync"].append((marks[0] - t) * 1e6)
            for i, step in enumerate(STEPS):
                times[wait][step].append((marks[i + 1] - marks[i]) * 1e6)
    report = {
        w: {s: round(statistics.median(v), 2) for s, v in steps.items()} for w, steps in times.items()
    }
    for w, row in report.items():
        print(f"wait {w}: " + json.dumps(row), flush=True)
    print("CALLS " + json.dumps(report))


main()
