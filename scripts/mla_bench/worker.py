"""Measure one tree: ``python -m mla_bench.worker --tree DIR --config cfg.json --out out.json``.

Per context length and batch size, after CUDA-graph capture (as the graph
runners do it, ``mla_harness.driver``), each measurement of ``MEASUREMENTS``
is taken: the replay call of each phase of one EAGLE iteration, the multi-step
draft's eager ``init_forward_metadata``, and the replay call of plain decode
(no speculation: backends of its own, not part of the iteration). Each is
called ``repeats`` times: host time (perf_counter around the call, median),
GPU time (CUDA events around the call and, where the captured forward does
metadata work of its own, a replay of a CUDA graph of that forward's attention
layers with the attention kernel left out; median), and, from one counted
call, launches and bytes allocated. On CUDA, each phase's metadata work alone
(``metadata_graph``) is also timed as a CUDA graph replayed back to back, and
right after it a graph of one tiny kernel (``graph_floor_us``). The memory figure is the bytes that
``init_cuda_graph_state`` allocates per backend of the EAGLE iteration.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mla_harness import child

if TYPE_CHECKING:
    from mla_harness.batches import Batch
    from mla_harness.driver import PhaseDriver

# The bench's phases: rows of mla_harness.phases.TABLE ("extend": --extend-mode).
BENCH_PHASES = ("draft", "verify", "extend", "decode")


@dataclass
class Captured:
    """One phase's driver after capture, and its forward's graph per bs."""

    driver: PhaseDriver
    forward_graphs: dict = field(default_factory=dict)  # bs -> replay, or None


def replay(bench: TreeBench, run: Captured, batch: Batch, bs: int) -> dict:
    """The replay call a runner makes before replaying its graph."""
    return bench.timed(run.driver.replay(batch, bs), run.forward_graphs[bs])


def eager(bench: TreeBench, run: Captured, batch: Batch, bs: int) -> dict:
    """``init_forward_metadata``, as the model runner calls it without a graph."""
    return bench.timed(run.driver.eager(run.driver.forward_batch(batch)))


def metadata_graph(bench: TreeBench, run: Captured, batch: Batch, bs: int) -> dict:
    """GPU only: the metadata work one replay needs, alone in a CUDA graph
    replayed back to back: v0.5.12's replay call (seq_lens_k add and copy, the
    block-table kernel), or, where the captured forward rebuilds its own
    metadata (v0.5.12 0007, v0.5.23 0008), that rebuild (``graph_rebuild.fill``
    of the first step)."""
    rebuild = getattr(run.driver.graph_metadata(bs)[0], "graph_rebuild", None)
    work = run.driver.replay(batch, bs) if rebuild is None else rebuild.fill
    in_graph = run.driver.in_graph(bs)
    if in_graph is not None:  # v0.5.23: the replay call, then the graph's own step
        replay_call = work

        def work():
            replay_call()
            in_graph()

    if not bench.cuda:
        return {"graph_us": None, "floor_us": None}
    # The one-kernel graph right after, so both see the same clocks.
    return {"graph_us": bench.graph_us(work), "floor_us": bench.graph_floor_us()}


# What is measured per (context, bs), in this order: (name in the results, bench
# phase, measure(bench, captured phase, batch, bs) -> figures). A new quantity is
# a function and a line here; the report sums the first three (one EAGLE iteration).
MEASUREMENTS = (
    ("draft_replay", "draft", replay),
    ("verify_replay", "verify", replay),
    ("extend_replay", "extend", replay),
    ("draft_eager", "draft", eager),
    ("decode_replay", "decode", replay),
    ("draft_fill", "draft", metadata_graph),
    ("verify_fill", "verify", metadata_graph),
    ("extend_fill", "extend", metadata_graph),
    ("decode_fill", "decode", metadata_graph),
)
GRAPH_REPLAYS = 1000  # back-to-back replays per graph_us sample


class TreeBench:
    def __init__(self, cfg: dict):
        import torch

        self.torch = torch
        self.cfg = cfg
        self.device = cfg["device"]
        self.cuda = self.device == "cuda"

    def setup(self, context_len: int, max_bs: int):
        from mla_harness.standin import MLAModel, Setup

        c = self.cfg
        return Setup(
            model=MLAModel(num_attention_heads=c["num_heads"], attention_tp_size=c["attn_tp_size"]),
            page_size=c["page_size"],
            context_len=context_len,
            max_bs=max_bs,
            steps=c["steps"],
            topk=c["topk"],
            draft_tokens=c["draft_tokens"],
            dcp_size=c.get("dcp_size", 1),
        )

    def phase(self, name: str):
        """The phase table's row for a bench phase name, on the tree's base."""
        from mla_harness.phases import BY_NAME
        from mla_harness.sglang_api import current
        from sglpatch.errors import UserError

        row = BY_NAME[f"extend_{self.cfg['extend_mode']}" if name == "extend" else name]
        base = current().base
        if base not in row.bases:
            raise UserError(
                f"{base} has no {row.name} phase (ForwardMode.{row.mode}):"
                " pick another --extend-mode"
            )
        return row

    def device_calls(self):
        """The replacements every backend call runs under (``sglang_api``)."""
        from mla_harness.sglang_api import current

        return current().device_calls(self.cuda)

    def drivers(self, setup, names=BENCH_PHASES) -> dict[str, PhaseDriver]:
        """A driver per bench phase: the EAGLE phases share one set of backends
        (as one server does); plain decode is a server of its own."""
        from mla_harness import standin
        from mla_harness.driver import PhaseDriver

        servers, out = {}, {}
        for name in names:
            phase = self.phase(name)
            if phase.eagle not in servers:
                servers[phase.eagle] = standin.build_backends(setup, self.device)
            out[name] = PhaseDriver(phase, servers[phase.eagle], setup, self.device)
        return out

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def forward_graph(self, driver, bs: int):
        """``replay`` of a CUDA graph of the forward captured at ``bs`` (its
        attention layers, kernel left out), or None where they launch nothing
        (or off CUDA). Under DCP only the graph's metadata step is captured:
        the DCP layers do no metadata work of their own (they slice the
        captured lengths) and end in the cross-rank zero-KV fixup, which the
        bench does not run (replacement 17)."""
        from functools import partial

        from mla_harness.driver import ForwardGraph

        if not self.cuda:
            return None
        if self.cfg.get("dcp_size", 1) > 1:
            run = driver.in_graph(bs)
            if run is None:
                return None
        else:
            run = partial(driver.graph_step, bs, driver.query(bs))
        forward = ForwardGraph(run, self.device, skip_idle=True)
        return None if forward.graph is None else forward.graph.replay

    def timed(self, fn, in_graph=None) -> dict:
        """Median host and GPU microseconds, plus one counted call. ``in_graph``
        (a graph replay) runs after ``fn`` inside the GPU span only."""
        from mla_harness.launches import count_launches

        with self.device_calls():
            for _ in range(self.cfg["warmup"]):
                fn()
            host, gpu = [], []
            for _ in range(self.cfg["repeats"]):
                self._sync()
                if self.cuda:
                    start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
                    start.record()
                t0 = time.perf_counter()
                fn()
                t1 = time.perf_counter()
                if in_graph is not None:
                    in_graph()
                if self.cuda:
                    end.record()
                    end.synchronize()
                    gpu.append(start.elapsed_time(end) * 1e3)
                host.append((t1 - t0) * 1e6)
            with count_launches() as counts:
                fn()
                self._sync()
        return {
            "host_us": statistics.median(host),
            "gpu_us": statistics.median(gpu) if gpu else None,
            **{
                k: counts.as_dict()[k]
                for k in ("launches", "triton", "torch", "syncs", "allocs", "alloc_bytes")
            },
        }

    def graph_us(self, work) -> float:
        """GPU µs per replay of a CUDA graph of ``work``: ``GRAPH_REPLAYS``
        back-to-back replays between CUDA events, median of ``repeats // 10``
        (at least 3) such samples."""
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture, as runners do
            work()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            work()
        samples = []
        for _ in range(max(3, self.cfg["repeats"] // 10)):
            for _ in range(self.cfg["warmup"]):
                graph.replay()
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            for _ in range(GRAPH_REPLAYS):
                graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / GRAPH_REPLAYS)
        return statistics.median(samples)

    def graph_floor_us(self) -> float:
        """``graph_us`` of a graph of one tiny kernel: what any graph replay costs."""
        x = self.torch.zeros(1, device=self.device)
        return self.graph_us(lambda: x.add_(1))

    def capture(self, setup) -> dict[str, Captured]:
        """Every bench phase's graph state, then per batch size each phase's
        capture call and a graph of its forward (as the runners capture)."""
        runs = {name: Captured(d) for name, d in self.drivers(setup).items()}
        with self.device_calls():
            for run in runs.values():
                run.driver.init_state()()
            for bs in self.cfg["batch_sizes"]:
                for run in runs.values():
                    run.driver.capture(bs)()
                    run.forward_graphs[bs] = self.forward_graph(run.driver, bs)
                    in_graph = run.driver.in_graph(bs)
                    if in_graph is not None and not self.cuda:
                        in_graph()  # recorded by the capture (on CUDA: in forward_graph)
        return runs

    def iteration(self, context_len: int, clock: Progress) -> list[dict]:
        from mla_harness.batches import Batch

        c = self.cfg
        s = self.setup(context_len, c["cuda_graph_max_bs"])
        runs = self.capture(s)
        extend_tokens = runs["extend"].driver.q_len
        rows = []
        rng = random.Random(context_len)
        for bs in c["batch_sizes"]:
            lens = tuple(
                rng.randint(int(0.9 * context_len), context_len - s.reserve) for _ in range(bs)
            )
            batch = Batch(tuple(rng.sample(range(s.rows), bs)), lens, (extend_tokens,) * bs)
            phases = {name: f(self, runs[phase], batch, bs) for name, phase, f in MEASUREMENTS}
            rows.append({"context": context_len, "bs": bs, "phases": phases})
            progress(f"  context {context_len} bs {bs} done ({clock.step()})")
        return rows

    def memory(self, max_bs: int) -> dict:
        """Bytes ``init_cuda_graph_state`` allocates, per backend of the iteration."""
        from mla_harness.launches import count_launches

        setup = self.setup(self.cfg["memory_context"], max_bs)
        out = {}
        for driver in self.drivers(setup, ("draft", "verify", "extend")).values():
            before = self.torch.cuda.memory_allocated() if self.cuda else 0
            with self.device_calls(), count_launches() as counts:
                driver.init_state()()
            out[driver.phase.role] = {
                "bytes": counts.alloc_bytes,
                "cuda_allocated_delta": (self.torch.cuda.memory_allocated() - before)
                if self.cuda
                else None,
            }
        return out


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Progress:
    """Points done out of ``total`` in this tree, and the time left at that pace."""

    total: int
    done: int = 0
    start: float = field(default_factory=time.monotonic)

    def step(self) -> str:
        """Count one point; ``2/8 points, 75 s so far, about 3 min left in this tree``."""
        self.done += 1
        spent = time.monotonic() - self.start
        left = spent / self.done * (self.total - self.done)
        return f"{self.done}/{self.total} points, {duration(spent)} so far{time_left(left)}"


def time_left(seconds: float, where: str = " in this tree") -> str:
    """``, about 3 min left in this tree`` on long runs (a minute or more), else ''."""
    return f", about {duration(seconds)} left{where}" if seconds >= 60 else ""


def duration(seconds: float) -> str:
    """``40 s``, ``12 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# Warnings SGLang's modules raise on import when the machine has no CUDA
# (message start, what it is about). They say nothing about this measurement,
# so the worker hides them and counts them; the report says so in one line.
PLATFORM_NOTICES = (
    ("Triton is not supported on current platform", "fla kernels"),
    ("Only CUDA, HIP and XPU support AWQ", "AWQ"),
    ("Only CUDA, MUSA and NPU support GGUF", "GGUF"),
)


def hide_platform_notices() -> list[str]:
    """Swallow the ``PLATFORM_NOTICES`` from now on; return the list they go to."""
    import warnings

    hidden: list[str] = []
    show = warnings.showwarning

    def filtered(message, category, filename, lineno, file=None, line=None):
        for start, what in PLATFORM_NOTICES:
            if str(message).startswith(start):
                hidden.append(what)
                return
        show(message, category, filename, lineno, file, line)

    warnings.showwarning = filtered
    return hidden


def machine() -> dict:
    import platform

    import torch
    import triton

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cpu": platform.processor() or platform.machine(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    return info


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    hidden = hide_platform_notices()
    child.enter(args)
    bench = TreeBench(cfg)
    rows = []
    clock = Progress(len(cfg["contexts"]) * len(cfg["batch_sizes"]))
    for context in cfg["contexts"]:
        rows += bench.iteration(context, clock)
    memory = {}
    for max_bs in cfg["memory_max_bs"]:
        progress(f"  memory at max bs {max_bs}")
        memory[str(max_bs)] = bench.memory(max_bs)
    import sglang

    args.out.write_text(
        json.dumps(
            {
                "rows": rows,
                "memory": memory,
                "machine": machine(),
                "sglang_file": sglang.__file__,
                "hidden_warnings": hidden,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_bench.worker", main))
