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
reference run on lengths and a block table computed from ``req_to_token``
alone (``Check.oracle``), not from either tree's metadata code.

``python -m mla_harness.consumer --tree DIR --replays N`` prints a JSON summary.
"""

from __future__ import annotations

import json
import random
import sys
from functools import partial

from . import child
from .phases import TABLE, on_base

MODES = tuple(phase.name for phase in TABLE)  # on v0.5.12; ``on_base`` for others


def paged_mla_decode(q, kv_cache, block_table, kv_lens, page_size, v_dim=512):
    """softmax(q k^T) v over the pages listed in ``block_table``, masked by ``kv_lens``.

    q: (bs, q_len, heads, 576); kv_cache: (pages, page_size, 576).
    The request's last ``q_len`` positions attend causally, as in verify.
    An FP8 query or cache (``float8_e4m3fn``) is read at scale 1, in float64.
    On CUDA it reads every page of the table (static shapes: a CUDA graph or
    torch.compile captures it); elsewhere only the pages up to the longest
    request's last: the real kernel reads no later one, and every later key
    would be masked for every request (its cost on a CPU is per page read).
    """
    import torch

    bs, q_len = q.shape[:2]
    if not q.is_cuda and kv_lens.numel():
        block_table = block_table[:, : max(1, -(-int(kv_lens.max()) // page_size))]
    width = block_table.shape[1]
    table = block_table.clamp(min=0).long()
    if kv_cache.dtype == torch.float8_e4m3fn:  # gathered as bytes: any device indexes those
        pages = kv_cache.view(torch.uint8)[table].view(kv_cache.dtype)
    else:
        pages = kv_cache[table]  # (bs, width, page, 576)
    kv = pages.reshape(bs, width * page_size, -1).double()
    pos = torch.arange(width * page_size, device=q.device)
    q_pos = kv_lens[:, None].long() - q_len + torch.arange(q_len, device=q.device)
    mask = pos[None, None, :] <= q_pos[:, :, None]  # (bs, q_len, keys)
    scores = torch.einsum("bqhd,bkd->bqhk", q.double(), kv) / 24.0
    scores = scores.masked_fill(~mask[:, :, None, :], float("-inf"))
    return torch.einsum("bqhk,bkd->bqhd", scores.softmax(-1), kv[..., :v_dim])


def rel_err(got, ref) -> float:
    """‖got - ref‖ / ‖ref‖, and infinity where that is not finite (a NaN in
    ``got`` must fail a check, and ``max(worst, nan)`` would drop it)."""
    import math

    err = float(((got - ref).norm() / ref.norm()).item())
    return err if math.isfinite(err) else math.inf


class Check:
    """One setup's backends, a KV cache of random values, and seeded batches."""

    def __init__(self, setup, device="cuda", seed=0):
        import torch

        from . import standin

        self.setup, self.device = setup, device
        self.backends = standin.build_backends(setup, device, seed)
        self.rng = random.Random(seed)
        pages = setup.rows * (setup.context_len // setup.page_size) + 2
        unified = getattr(self.backends.runner, "unified_pool", None)
        if unified is not None:  # indexed by its physical and its virtual pages
            from .unified_pool import kv_pages

            pages = max(pages, kv_pages(unified.allocator))
        gen = torch.Generator(device=device).manual_seed(seed)
        self.kv_cache = torch.randn(pages, setup.page_size, 576, device=device, generator=gen).to(
            torch.bfloat16
        )

    def batch(self, raw_bs, extend_uniform=None):
        from .batches import Batch

        s = self.setup
        lens = tuple(
            self.rng.randint(s.draft_tokens + 1, s.context_len - s.reserve) for _ in range(raw_bs)
        )
        ext = tuple(extend_uniform or self.rng.randint(1, s.steps + 1) for _ in range(raw_bs))
        return Batch(tuple(self.rng.sample(range(s.rows), raw_bs)), lens, ext)

    def oracle(self, batch, offset: int, translated: bool = False):
        """The kernel lengths and block table of ``batch``, from ``req_to_token``
        alone (not from either tree's metadata code): each request's KV length
        is its seq_len plus ``offset`` (target verify's draft tokens), and its
        pages are the pages of its first token of each ``page_size``;
        ``translated``: those (virtual) pages' physical pages in the unified
        pool (``unified_pool.physical_pages``), for a reader of the target's
        translating pool."""
        import torch

        page = self.setup.page_size
        pool = self.backends.runner.req_to_token_pool.req_to_token
        lens = torch.tensor(batch.seq_lens, device=self.device) + offset
        width = int(-(-lens.max() // page))
        table = torch.zeros(batch.size, width, dtype=torch.int64, device=self.device)
        for r, (row, n) in enumerate(zip(batch.req_pool_indices, lens.tolist(), strict=True)):
            pages = pool[row, : -(-n // page) * page : page].long() // page
            table[r, : len(pages)] = pages
        if translated:
            from .unified_pool import physical_pages

            table = physical_pages(self.backends.runner.unified_pool.allocator, table)
        return lens, table

    def run(self, mode: str, replays: int) -> dict:
        """Capture every batch size of phase ``mode``, then ``replays`` replays of
        random batches (padded half the time), each against the reference run on
        the oracle's lengths and table."""
        import torch

        from .attention import KV_DIM, V_DIM, KVPool
        from .driver import ForwardGraph, PhaseDriver
        from .phases import BY_NAME

        s, phase = self.setup, BY_NAME[mode]
        # SGLang's MLA pool layout, (slots, 1, 576): both releases page it by view.
        pool = KVPool(self.kv_cache.view(-1, 1, KV_DIM))
        driver = PhaseDriver(phase, self.backends, s, self.device, pool)

        def consume(query, kv, block_tables, kv_lens):
            return paged_mla_decode(query, kv, block_tables, kv_lens, s.page_size).contiguous()

        driver.init_state()()
        graphs = {}
        for bs in range(1, s.max_bs + 1):
            driver.capture(bs)()
            q = driver.query(bs)
            q.copy_(torch.randn(q.shape, device=self.device))
            # The graph's own metadata step (v0.5.23), then the forward.
            graphs[bs] = (ForwardGraph(partial(driver.graph_step, bs, q, consume), self.device), q)
        # Graph replays run every request at the runner's full tokens-per-request.
        uniform = driver.q_len if phase.role == "draft_extend" else None
        offset = s.draft_tokens if phase.mode == "TARGET_VERIFY" else 0
        worst, compared = 0.0, 0
        for i in range(replays):
            raw_bs = self.rng.randint(1, s.max_bs)
            bs = raw_bs if i % 2 else self.rng.randint(raw_bs, s.max_bs)  # padded half the time
            batch = self.batch(raw_bs, uniform)
            graph, q = graphs[bs]
            q.copy_(torch.randn(q.shape, device=self.device))
            driver.replay(batch, bs)()
            outs = graph.replay()
            lens, table = self.oracle(batch, offset)
            q4 = q.view(bs, driver.q_len, driver.heads, KV_DIM)[:raw_bs]
            ref = paged_mla_decode(q4, self.kv_cache, table, lens, s.page_size)
            for out in outs:
                got = out.view(bs, driver.q_len, driver.heads, V_DIM)[:raw_bs]
                worst = max(worst, rel_err(got, ref))
                compared += 1
        return {"mode": mode, "replays": replays, "compared": compared, "max_rel_err": worst}


def main(argv=None) -> int:
    parser = child.parser(__doc__, device="cuda")
    parser.add_argument("--replays", type=int, default=2000)
    args = parser.parse_args(argv)
    child.enter(args)
    from . import replacements
    from .sglang_api import current
    from .standin import Setup

    report = []
    for i, setup in enumerate(
        [
            Setup(page_size=64, context_len=2048, max_bs=4),
            Setup(page_size=32, context_len=1024, max_bs=3, steps=4, draft_tokens=5),
        ]
    ):
        for mode in (phase.name for phase in on_base(current().base)):
            with replacements.cuda_factories_on_cpu(args.device == "cuda"):
                check = Check(setup, device=args.device, seed=i)
                report.append({"setup": i, **check.run(mode, args.replays)})
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.consumer", main))
