"""GPU check: real CUDA graphs of the backend's forward, replayed with new batches.

The trtllm-gen MLA kernel needs SM100; this reference paged MLA decode in torch
reads the same inputs (block table, per-request KV length) with static shapes,
so it can be captured in a ``torch.cuda.CUDAGraph``. It takes the kernel's
place through the backend's ``_run_decode_kernel`` hook (``attention.kernel_sink``).
For each mode, as a graph runner does: the backend's capture call per batch
size, one eager warm-up forward, then a graph captured around the backend's
real ``forward_decode`` / ``forward_extend`` (two target layers, or every
draft step). Each replay follows ``init_forward_metadata_replay_cuda_graph``
with a new random batch (padded half the time) and is compared with the same
consumer run eagerly on the metadata of ``init_forward_metadata``.

``python -m mla_harness.consumer --tree DIR --replays N`` prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

MODES = ("draft", "decode", "verify", "extend_v1", "extend_v2")


def paged_mla_decode(q, kv_cache, block_table, kv_lens, page_size, v_dim=512):
    """softmax(q k^T) v over the pages listed in ``block_table``, masked by ``kv_lens``.

    q: (bs, q_len, heads, 576); kv_cache: (pages, page_size, 576).
    The request's last ``q_len`` positions attend causally, as in verify.
    """
    import torch

    bs, q_len = q.shape[:2]
    width = block_table.shape[1]
    pages = kv_cache[block_table.clamp(min=0).long()]  # (bs, width, page, 576)
    kv = pages.reshape(bs, width * page_size, -1).double()
    pos = torch.arange(width * page_size, device=q.device)
    q_pos = kv_lens[:, None].long() - q_len + torch.arange(q_len, device=q.device)
    mask = pos[None, None, :] <= q_pos[:, :, None]  # (bs, q_len, keys)
    scores = torch.einsum("bqhd,bkd->bqhk", q.double(), kv) / 24.0
    scores = scores.masked_fill(~mask[:, :, None, :], float("-inf"))
    return torch.einsum("bqhk,bkd->bqhd", scores.softmax(-1), kv[..., :v_dim])


class Check:
    def __init__(self, setup, device="cuda", seed=0):
        import torch

        from . import standin
        from .batches import StaticInputs

        self.torch = torch
        self.setup = setup
        self.backends = standin.build_backends(setup, device, seed)
        self.rng = random.Random(seed)
        pages = setup.rows * (setup.context_len // setup.page_size) + 2
        gen = torch.Generator(device=device).manual_seed(seed)
        self.device = device
        self.kv_cache = torch.randn(pages, setup.page_size, 576, device=device, generator=gen).to(
            torch.bfloat16
        )
        self.static_cls = StaticInputs
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        self.mode = ForwardMode

    def batch(self, raw_bs, extend_uniform=None):
        from .batches import Batch

        s = self.setup
        reserve = max(s.draft_tokens, s.steps + 1) + 1
        lens = tuple(
            self.rng.randint(s.draft_tokens + 1, s.context_len - reserve) for _ in range(raw_bs)
        )
        ext = tuple(extend_uniform or self.rng.randint(1, s.steps + 1) for _ in range(raw_bs))
        return Batch(tuple(self.rng.sample(range(s.rows), raw_bs)), lens, ext)

    def run(self, mode: str, replays: int) -> dict:
        torch, s = self.torch, self.setup
        from . import attention
        from .batches import draft_spec_info, forward_batch, verify_spec_info

        b = self.backends
        backend = {"draft": b.draft, "decode": b.target, "verify": b.target}.get(
            mode, b.draft_extend
        )
        fmode = {
            "draft": self.mode.DECODE,
            "decode": self.mode.DECODE,
            "verify": self.mode.TARGET_VERIFY,
            "extend_v1": self.mode.DRAFT_EXTEND,
            "extend_v2": self.mode.DRAFT_EXTEND_V2,
        }[mode]
        q_len = {
            "verify": s.draft_tokens,
            "extend_v1": s.steps + 1,
            "extend_v2": s.draft_tokens,
        }.get(mode, 1)
        spec = verify_spec_info(s.draft_tokens) if mode == "verify" else draft_spec_info()
        # Graph replays run every request at the runner's full tokens-per-request.
        uniform = {"extend_v1": s.steps + 1, "extend_v2": s.draft_tokens}.get(mode)
        fill = (
            b.draft.attn_backends[0] if mode == "draft" else backend
        ).get_cuda_graph_seq_len_fill_value()
        static = self.static_cls(s.max_bs, fill, self.device)
        if mode == "draft":
            backend.init_cuda_graph_state(s.max_bs, s.max_bs)
        else:
            backend.init_cuda_graph_state(s.max_bs, s.max_bs * q_len)
        # The layers each graph's forward runs: every draft step runs the
        # one-layer draft model on its own backend; the target two layers.
        steps = list(backend.attn_backends) if mode == "draft" else [backend]
        layer_ids = [61] if mode == "draft" else [0, 1]
        heads = s.model.q_heads
        pool = attention.KVPool(self.kv_cache)

        def consume(query, kv, block_tables, kv_lens):
            return paged_mla_decode(query, kv, block_tables, kv_lens, s.page_size).contiguous()

        def forward(fb, q):
            return attention.run_layers(steps, fb, q, layer_ids, heads, consume)

        graphs, worst, compared = {}, 0.0, 0
        for bs in range(1, s.max_bs + 1):
            rpi, lens = static.capture_inputs(bs)
            if mode == "draft":
                fb = forward_batch(self.batch(bs), fmode, b.runner, self.device, spec)
                fb.req_pool_indices, fb.seq_lens = rpi, lens
                backend.init_forward_metadata_capture_cuda_graph(fb)
            else:
                backend.init_forward_metadata_capture_cuda_graph(
                    bs, bs * q_len, rpi, lens, None, fmode, spec
                )
            graph_fb = attention.graph_batch(fmode, bs, rpi, lens, spec, pool)
            q = torch.randn(bs * q_len, heads * attention.KV_DIM, device=self.device)
            q = q.to(torch.bfloat16)
            graphs[bs] = (_Graph(forward, graph_fb, q, self.device), q)
        for i in range(replays):
            raw_bs = self.rng.randint(1, s.max_bs)
            bs = raw_bs if i % 2 else self.rng.randint(raw_bs, s.max_bs)  # padded half the time
            batch = self.batch(raw_bs, uniform)
            g, q = graphs[bs]
            q.copy_(torch.randn(q.shape, device=self.device))
            fb = forward_batch(batch, fmode, b.runner, self.device, spec)
            if mode == "draft":
                backend.init_forward_metadata_replay_cuda_graph(
                    static.padded_draft_batch(fb, bs), bs
                )
            else:
                static.load(fb, bs)
                rows = None if mode.startswith("extend") else bs  # as SGLang's runners pass them
                backend.init_forward_metadata_replay_cuda_graph(
                    bs,
                    static.req_pool_indices[:rows],
                    static.seq_lens[:rows],
                    fb.seq_lens_sum,
                    None,
                    fmode,
                    spec,
                    seq_lens_cpu=static.seq_lens_cpu[:rows],
                )
            outs = g.replay()
            eager_fb = forward_batch(batch, fmode, b.runner, self.device, spec)
            backend.init_forward_metadata(eager_fb)
            eager_metas = (
                [x.forward_decode_metadata for x in backend.attn_backends]
                if mode == "draft"
                else [eager_fb.decode_trtllm_mla_metadata]
            )
            per_layer = [m for m in eager_metas for _ in layer_ids]
            q4 = q.view(bs, q_len, heads, attention.KV_DIM)[:raw_bs]
            for out, meta in zip(outs, per_layer, strict=True):
                kl = eager_fb.seq_lens if mode in ("draft", "decode") else meta.seq_lens_k
                ref = paged_mla_decode(q4, self.kv_cache, meta.block_kv_indices, kl, s.page_size)
                got = out.view(bs, q_len, heads, attention.V_DIM)[:raw_bs]
                err = ((got - ref).norm() / ref.norm()).item()
                worst = max(worst, err)
                compared += 1
        return {"mode": mode, "replays": replays, "compared": compared, "max_rel_err": worst}


class _Graph:
    """``forward(fb, q)`` captured as a runner captures it (one eager warm-up,
    then a ``torch.cuda.CUDAGraph``); ``replay`` returns its outputs. Off CUDA
    (a smoke test of this harness only) a replay re-runs the forward eagerly."""

    def __init__(self, forward, fb, q, device):
        import torch

        self.run = lambda: forward(fb, q)  # noqa: E731
        self.graph = None
        self.outs = self.run()  # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outs = self.run()

    def replay(self):
        if self.graph is None:
            self.outs = self.run()
        else:
            self.graph.replay()
        return self.outs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--replays", type=int, default=2000)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args(argv)
    from . import replacements

    replacements.prepare_environment(args.device == "cuda")
    sys.path.insert(0, str(args.tree.resolve()))
    from .standin import Setup

    report = []
    for i, setup in enumerate(
        [
            Setup(page_size=64, context_len=2048, max_bs=4),
            Setup(page_size=32, context_len=1024, max_bs=3, steps=4, draft_tokens=5),
        ]
    ):
        for mode in MODES:
            with replacements.cuda_factories_on_cpu(args.device == "cuda"):
                check = Check(setup, device=args.device, seed=i)
                report.append({"setup": i, **check.run(mode, args.replays)})
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
