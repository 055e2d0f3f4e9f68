"""Measure one tree: ``python -m mla_bench.worker --tree DIR --config cfg.json --out out.json``.

Per context length and batch size, after CUDA-graph capture (as the graph
runners do it), each replay phase of one EAGLE iteration is called
``repeats`` times: host time (perf_counter around the call, median), GPU time
(CUDA events around the call and, where the captured forward does metadata
work of its own, a replay of a CUDA graph of that forward's attention layers
with the attention kernel left out; median), and, from one counted call,
launches and bytes allocated. The multi-step draft's eager ``init_forward_metadata`` is
measured the same way. The memory figure is the bytes that
``init_cuda_graph_state`` allocates per backend.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import time
from pathlib import Path

PHASES = ("draft_replay", "verify_replay", "extend_replay", "draft_eager")


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
        )

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def forward_graph(self, backends, fb, q_len: int, layer_ids):
        """``replay`` of a CUDA graph of the captured forward's attention layers
        (kernel left out), or None where they launch nothing (or off CUDA)."""
        from mla_harness import attention
        from mla_harness.launches import count_launches

        torch = self.torch
        if not self.cuda:
            return None
        heads = self.model.q_heads
        q = torch.zeros(fb.batch_size * q_len, heads * attention.KV_DIM, dtype=torch.bfloat16)
        q = q.to(self.device)
        with count_launches() as counts:
            attention.run_layers(backends, fb, q, layer_ids, heads)  # warm-up
            torch.cuda.synchronize()
        if counts.launches == 0:
            return None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            attention.run_layers(backends, fb, q, layer_ids, heads)
        return graph.replay

    def timed(self, fn, in_graph=None) -> dict:
        """Median host and GPU microseconds, plus one counted call. ``in_graph``
        (a graph replay) runs after ``fn`` inside the GPU span only."""
        from mla_harness.launches import count_launches
        from mla_harness.replacements import cuda_factories_on_cpu

        with cuda_factories_on_cpu(self.cuda):
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

    def iteration(self, context_len: int) -> list[dict]:
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        from mla_harness import attention, standin
        from mla_harness.batches import (
            Batch,
            StaticInputs,
            draft_spec_info,
            forward_batch,
            verify_spec_info,
        )
        from mla_harness.replacements import cuda_factories_on_cpu

        c = self.cfg
        s = self.setup(context_len, c["cuda_graph_max_bs"])
        self.model = s.model
        b = standin.build_backends(s, self.device)
        extend_mode = (
            ForwardMode.DRAFT_EXTEND if c["extend_mode"] == "v1" else ForwardMode.DRAFT_EXTEND_V2
        )
        extend_tokens = s.steps + 1 if c["extend_mode"] == "v1" else s.draft_tokens
        verify_spec = verify_spec_info(s.draft_tokens)
        static_inputs, forward_graphs = {}, {}
        pool = attention.zero_kv_pool(s.page_size, self.device)
        with cuda_factories_on_cpu(self.cuda):
            b.draft.init_cuda_graph_state(s.max_bs, s.max_bs * s.topk)
            b.target.init_cuda_graph_state(s.max_bs, s.max_bs * s.draft_tokens)
            b.draft_extend.init_cuda_graph_state(s.max_bs, s.max_bs * extend_tokens)
            for name, fill in (
                ("draft", b.draft.attn_backends[0]),
                ("verify", b.target),
                ("extend", b.draft_extend),
            ):
                static_inputs[name] = StaticInputs(
                    s.max_bs, fill.get_cuda_graph_seq_len_fill_value(), self.device
                )
            for bs in c["batch_sizes"]:
                rpi, lens = static_inputs["draft"].capture_inputs(bs)
                fb = forward_batch(
                    Batch(tuple(range(bs)), (1,) * bs),
                    ForwardMode.DECODE,
                    b.runner,
                    self.device,
                    draft_spec_info(),
                )
                fb.req_pool_indices, fb.seq_lens = rpi, lens
                b.draft.init_forward_metadata_capture_cuda_graph(fb)
                # Every draft step runs the one-layer draft model.
                gfb = attention.graph_batch(
                    ForwardMode.DECODE, bs, rpi, lens, draft_spec_info(), pool
                )
                forward_graphs["draft", bs] = self.forward_graph(
                    b.draft.attn_backends, gfb, 1, [61]
                )
                rpi, lens = static_inputs["verify"].capture_inputs(bs)
                b.target.init_forward_metadata_capture_cuda_graph(
                    bs, bs * s.draft_tokens, rpi, lens, None, ForwardMode.TARGET_VERIFY, verify_spec
                )
                gfb = attention.graph_batch(
                    ForwardMode.TARGET_VERIFY, bs, rpi, lens, verify_spec, pool
                )
                forward_graphs["verify", bs] = self.forward_graph(
                    [b.target], gfb, s.draft_tokens, [0, 1]
                )
                rpi, lens = static_inputs["extend"].capture_inputs(bs)
                b.draft_extend.init_forward_metadata_capture_cuda_graph(
                    bs, bs * extend_tokens, rpi, lens, None, extend_mode, draft_spec_info()
                )
                gfb = attention.graph_batch(extend_mode, bs, rpi, lens, draft_spec_info(), pool)
                forward_graphs["extend", bs] = self.forward_graph(
                    [b.draft_extend], gfb, extend_tokens, [0, 1]
                )
        rows = []
        rng = random.Random(context_len)
        reserve = max(s.draft_tokens, s.steps + 1) + 1
        for bs in c["batch_sizes"]:
            lens = tuple(
                rng.randint(int(0.9 * context_len), context_len - reserve) for _ in range(bs)
            )
            batch = Batch(tuple(rng.sample(range(s.rows), bs)), lens, (extend_tokens,) * bs)
            draft_fb = forward_batch(
                batch, ForwardMode.DECODE, b.runner, self.device, draft_spec_info()
            )
            static_inputs["draft"].load(draft_fb, bs)
            phases = {}
            phases["draft_replay"] = self.timed(
                functools.partial(b.draft.init_forward_metadata_replay_cuda_graph, draft_fb, bs),
                forward_graphs["draft", bs],
            )
            for name, backend, mode, spec in (
                ("verify", b.target, ForwardMode.TARGET_VERIFY, verify_spec),
                ("extend", b.draft_extend, extend_mode, draft_spec_info()),
            ):
                st = static_inputs[name]
                st.load(forward_batch(batch, mode, b.runner, self.device, spec), bs)
                # As SGLang's runners: draft extend passes whole buffers, verify [:bs].
                n = None if name == "extend" else bs
                args = (bs, st.req_pool_indices[:n], st.seq_lens[:n], sum(lens), None, mode, spec)
                phases[f"{name}_replay"] = self.timed(
                    functools.partial(
                        backend.init_forward_metadata_replay_cuda_graph,
                        *args,
                        seq_lens_cpu=st.seq_lens_cpu[:n],
                    ),
                    forward_graphs[name, bs],
                )
            eager_fb = forward_batch(
                batch, ForwardMode.DECODE, b.runner, self.device, draft_spec_info()
            )
            phases["draft_eager"] = self.timed(
                functools.partial(b.draft.init_forward_metadata, eager_fb)
            )
            rows.append({"context": context_len, "bs": bs, "phases": phases})
            progress(f"  context {context_len} bs {bs} done")
        return rows

    def memory(self, max_bs: int) -> dict:
        from mla_harness import standin
        from mla_harness.launches import count_launches
        from mla_harness.replacements import cuda_factories_on_cpu

        c = self.cfg
        s = self.setup(c["memory_context"], max_bs)
        b = standin.build_backends(s, self.device)
        extend_tokens = s.steps + 1 if c["extend_mode"] == "v1" else s.draft_tokens
        out = {}
        for name, call in (
            ("draft", lambda: b.draft.init_cuda_graph_state(max_bs, max_bs * s.topk)),
            ("target", lambda: b.target.init_cuda_graph_state(max_bs, max_bs * s.draft_tokens)),
            (
                "draft_extend",
                lambda: b.draft_extend.init_cuda_graph_state(max_bs, max_bs * extend_tokens),
            ),
        ):
            before = self.torch.cuda.memory_allocated() if self.cuda else 0
            with cuda_factories_on_cpu(self.cuda), count_launches() as counts:
                call()
            out[name] = {
                "bytes": counts.alloc_bytes,
                "cuda_allocated_delta": (self.torch.cuda.memory_allocated() - before)
                if self.cuda
                else None,
            }
        return out


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    from mla_harness import replacements

    replacements.prepare_environment(cfg["device"] == "cuda")
    sys.path.insert(0, str(args.tree.resolve()))
    bench = TreeBench(cfg)
    rows = []
    for context in cfg["contexts"]:
        rows += bench.iteration(context)
    memory = {}
    for max_bs in cfg["memory_max_bs"]:
        progress(f"  memory at max bs {max_bs}")
        memory[str(max_bs)] = bench.memory(max_bs)
    import sglang

    args.out.write_text(
        json.dumps(
            {"rows": rows, "memory": memory, "machine": machine(), "sglang_file": sglang.__file__}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
