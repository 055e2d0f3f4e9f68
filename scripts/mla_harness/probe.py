"""Run scenarios against one SGLang tree, in a process of its own.

``python -m mla_harness.probe --tree DIR --plan plan.json --out result.pkl``
imports ``sglang`` from ``DIR`` (a ``python/`` root), builds the real backends
for every scenario, drives them through the calls an EAGLE decode loop makes
(eager ``init_forward_metadata``; CUDA-graph state, capture for every batch
size, then replays with new inputs, each followed by the attention layers of
the captured forward, as the graph would run them) and records, per call, the
metadata the attention kernel is given, the graph buffers' pointers and the
launch counts of the replay call and of each layer's forward.
``run_probe`` does the same from another process and returns the result.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from . import attention, replacements, standin, subprocess_env
from .batches import (
    Batch,
    StaticInputs,
    draft_spec_info,
    forward_batch,
    verify_spec_info,
)
from .launches import count_launches
from .visible import buffer_pointers, kernel_call_view, kernel_view

HERE = Path(__file__).resolve().parent
DRAFT_LAYER = 61  # DeepSeek-V3's MTP layer follows its 61 target layers
TARGET_LAYERS = (0, 1)  # the first two attention layers of a graph's forward

PHASES = (
    "draft_eager",
    "draft_graph",
    "decode_eager",
    "decode_graph",
    "verify_eager",
    "verify_graph",
    "extend_v1_eager",
    "extend_v1_graph",
    "extend_v2_eager",
    "extend_v2_graph",
)


def run_probe(tree: Path, plan: dict, device: str = "cpu", timeout: int = 3000) -> dict:
    """Run ``plan`` against ``tree`` in a fresh interpreter; return its result."""
    with tempfile.TemporaryDirectory() as tmp:
        plan_file = Path(tmp, "plan.json")
        out_file = Path(tmp, "out.pkl")
        plan_file.write_text(json.dumps(plan))
        env = subprocess_env()
        cmd = [sys.executable, "-m", "mla_harness.probe", "--tree", str(tree)]
        cmd += ["--plan", str(plan_file), "--out", str(out_file), "--device", device]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"probe failed on {tree}:\n{proc.stderr[-6000:]}")
        return pickle.loads(out_file.read_bytes())


class Driver:
    """Drives one scenario's backends; every ``phase_*`` returns its records."""

    def __init__(self, scenario: dict, device: str):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        self.mode = ForwardMode
        self.device = device
        self.use_cuda = device.startswith("cuda")
        self.setup = standin.Setup(**scenario["setup"])
        self.backends = standin.build_backends(self.setup, device, scenario.get("seed", 0))
        self.batches = [Batch(**b) for b in scenario["batches"]]
        self.capture_bs = scenario.get("capture_bs") or list(range(1, self.setup.max_bs + 1))

    # -- helpers -------------------------------------------------------------
    def _call(self, fn, *args, **kwargs):
        with replacements.cuda_factories_on_cpu(self.use_cuda), count_launches() as counts:
            fn(*args, **kwargs)
            if self.use_cuda:
                import torch

                torch.cuda.synchronize()
        return counts.as_dict()

    def _fb(self, batch, mode, spec_info=None):
        return forward_batch(batch, mode, self.backends.runner, self.device, spec_info)

    def _view(self, metadata, seq_lens, bs):
        return kernel_view(metadata, seq_lens, bs, self.setup.page_size)

    def _graph_bs(self, raw_bs):
        return min(b for b in self.capture_bs if b >= raw_bs)

    def _graph_batch(self, mode, bs, rpi, lens, spec_info):
        pool = attention.zero_kv_pool(self.setup.page_size, self.device)
        return attention.graph_batch(mode, bs, rpi, lens, spec_info, pool)

    def _graph_forward(self, backends, fb, q_len, layer_ids):
        """The captured forward's attention layers, in order, on ``fb``: launch
        counts per layer and what the kernel is given at each."""
        import torch

        heads = self.setup.model.q_heads
        q = torch.zeros(fb.batch_size * q_len, heads * attention.KV_DIM, dtype=torch.bfloat16)
        q = q.to(self.device)
        counts, views = [], []
        for backend, layer in attention.each_layer(backends, fb.batch_size, layer_ids, heads):
            with attention.kernel_sink(backend) as calls:
                counts.append(self._call(attention.attend, backend, fb, layer, q))
            (call,) = calls
            meta = backend.forward_decode_metadata
            views.append(
                kernel_call_view(call, meta.max_seq_len_k, fb.batch_size, self.setup.page_size)
            )
        return counts, views

    def _replay_record(self, batch, bs, counts, backends, graph_fb, q_len, layer_ids, static):
        """One graph replay: the replay call's counts, then the captured forward's."""
        metas = [b.decode_cuda_graph_metadata[bs] for b in backends]
        forward_counts, views = self._graph_forward(backends, graph_fb, q_len, layer_ids)
        return {
            "bs": bs,
            "raw_bs": batch.size,
            "counts": counts,
            "forward_counts": forward_counts,
            "views": views,
            "ptrs": [buffer_pointers(m) for m in metas],
            "inputs": _inputs(static, bs),
        }

    # -- multi-step draft ----------------------------------------------------
    def phase_draft_eager(self):
        draft = self.backends.draft
        records = []
        for batch in self.batches:
            fb = self._fb(batch, self.mode.DECODE, draft_spec_info())
            counts = self._call(draft.init_forward_metadata, fb)
            views = [
                self._view(b.forward_decode_metadata, fb.seq_lens, fb.batch_size)
                for b in draft.attn_backends
            ]
            records.append({"counts": counts, "views": views})
        return records

    def phase_draft_graph(self):
        draft, s = self.backends.draft, self.setup
        fill = draft.attn_backends[0].get_cuda_graph_seq_len_fill_value()
        static = StaticInputs(s.max_bs, fill, self.device)
        state = self._call(draft.init_cuda_graph_state, s.max_bs, s.max_bs * s.topk)
        ptrs, graph_fbs = {}, {}
        for bs in self.capture_bs:
            rpi, lens = static.capture_inputs(bs)
            batch = Batch(tuple(rpi.tolist()), tuple(lens.tolist()))
            fb = self._fb(batch, self.mode.DECODE, draft_spec_info())
            fb.req_pool_indices, fb.seq_lens = rpi, lens
            self._call(draft.init_forward_metadata_capture_cuda_graph, fb)
            ptrs[bs] = [
                buffer_pointers(b.decode_cuda_graph_metadata[bs]) for b in draft.attn_backends
            ]
            graph_fbs[bs] = self._graph_batch(self.mode.DECODE, bs, rpi, lens, draft_spec_info())
        records = [{"state": state, "capture_ptrs": ptrs}]
        for batch in self.batches:
            bs = self._graph_bs(batch.size)
            fb = static.padded_draft_batch(self._fb(batch, self.mode.DECODE, draft_spec_info()), bs)
            counts = self._call(draft.init_forward_metadata_replay_cuda_graph, fb, bs)
            # Each draft step runs the draft model (one MTP layer) on its own backend.
            records.append(
                self._replay_record(
                    batch, bs, counts, draft.attn_backends, graph_fbs[bs], 1, [DRAFT_LAYER], static
                )
            )
        return records

    # -- single backends: decode, target verify, draft extend ----------------
    def _single_eager(self, backend, mode, spec_info=None, kernel_lens="seq_lens_k"):
        records = []
        for batch in self.batches:
            fb = self._fb(batch, mode, spec_info)
            counts = self._call(backend.init_forward_metadata, fb)
            meta = fb.decode_trtllm_mla_metadata
            lens = fb.seq_lens if kernel_lens == "seq_lens" else meta.seq_lens_k
            records.append({"counts": counts, "views": [self._view(meta, lens, batch.size)]})
        return records

    def _single_graph(self, backend, mode, tokens_per_bs, spec_info=None):
        s = self.setup
        fill = backend.get_cuda_graph_seq_len_fill_value()
        static = StaticInputs(s.max_bs, fill, self.device)
        state = self._call(backend.init_cuda_graph_state, s.max_bs, s.max_bs * tokens_per_bs)
        ptrs, graph_fbs = {}, {}
        for bs in self.capture_bs:
            rpi, lens = static.capture_inputs(bs)
            self._call(
                backend.init_forward_metadata_capture_cuda_graph,
                bs,
                bs * tokens_per_bs,
                rpi,
                lens,
                None,
                mode,
                spec_info,
            )
            ptrs[bs] = [buffer_pointers(backend.decode_cuda_graph_metadata[bs])]
            graph_fbs[bs] = self._graph_batch(mode, bs, rpi, lens, spec_info)
        records = [{"state": state, "capture_ptrs": ptrs}]
        for batch in self.batches:
            bs = self._graph_bs(batch.size)
            fb = self._fb(batch, mode, spec_info)
            static.load(fb, bs)
            # The draft-extend runner passes its whole static buffers; the
            # others pass [:bs] slices (as SGLang's runners do).
            rows = None if mode.is_draft_extend(include_v2=True) else bs
            counts = self._call(
                backend.init_forward_metadata_replay_cuda_graph,
                bs,
                static.req_pool_indices[:rows],
                static.seq_lens[:rows],
                fb.seq_lens_sum + (bs - batch.size) * fill,
                None,
                mode,
                spec_info,
                seq_lens_cpu=static.seq_lens_cpu[:rows],
            )
            records.append(
                self._replay_record(
                    batch,
                    bs,
                    counts,
                    [backend],
                    graph_fbs[bs],
                    tokens_per_bs,
                    TARGET_LAYERS,
                    static,
                )
            )
        return records

    def phase_decode_eager(self):
        return self._single_eager(self.backends.target, self.mode.DECODE, kernel_lens="seq_lens")

    def phase_decode_graph(self):
        return self._single_graph(self.backends.target, self.mode.DECODE, 1)

    def _verify_info(self):
        return verify_spec_info(self.setup.draft_tokens)

    def phase_verify_eager(self):
        return self._single_eager(
            self.backends.target, self.mode.TARGET_VERIFY, self._verify_info()
        )

    def phase_verify_graph(self):
        return self._single_graph(
            self.backends.target,
            self.mode.TARGET_VERIFY,
            self.setup.draft_tokens,
            self._verify_info(),
        )

    def phase_extend_v1_eager(self):
        return self._single_eager(self.backends.draft_extend, self.mode.DRAFT_EXTEND)

    def phase_extend_v1_graph(self):
        return self._single_graph(
            self.backends.draft_extend, self.mode.DRAFT_EXTEND, self.setup.steps + 1
        )

    def _uniform_extend(self):
        # DRAFT_EXTEND_V2 (the overlap worker) extends every request by
        # speculative_num_draft_tokens: a fixed shape.
        n = self.setup.draft_tokens
        self.batches = [replace(b, extend_lens=(n,) * b.size) for b in self.batches]

    def phase_extend_v2_eager(self):
        self._uniform_extend()
        return self._single_eager(self.backends.draft_extend, self.mode.DRAFT_EXTEND_V2)

    def phase_extend_v2_graph(self):
        self._uniform_extend()
        return self._single_graph(
            self.backends.draft_extend, self.mode.DRAFT_EXTEND_V2, self.setup.draft_tokens
        )


def _inputs(static, bs):
    return {
        "req_pool_indices": static.req_pool_indices[:bs].cpu().numpy().copy(),
        "seq_lens": static.seq_lens[:bs].cpu().numpy().copy(),
    }


def run_plan(plan: dict, device: str) -> dict:
    results = []
    for scenario in plan["scenarios"]:
        phases = scenario.get("phases") or plan.get("phases") or PHASES
        # Each scenario gets fresh backends per phase: phases must not see
        # each other's graph state (a real server builds each once).
        out = {}
        for phase in phases:
            driver = Driver(scenario, device)
            out[phase] = getattr(driver, f"phase_{phase}")()
        out["req_to_token"] = driver.backends.runner.req_to_token_pool.req_to_token.cpu().numpy()
        results.append(out)
    return {"scenarios": results}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args(argv)

    replacements.prepare_environment(args.device == "cuda")
    sys.path.insert(0, str(args.tree.resolve()))
    result = run_plan(json.loads(args.plan.read_text()), args.device)
    import sglang

    result["sglang_file"] = sglang.__file__
    args.out.write_bytes(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
