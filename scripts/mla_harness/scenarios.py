"""Seeded scenario generation for the differential and contract tests.

Each scenario fixes the backends' setup (page size 32 or 64, 2..5 draft
steps, topk 1, 2..8 draft tokens, a max batch size) and a few batches with
sequence lengths on and around page boundaries and Triton block boundaries
(4096 tokens), batch sizes from 1 to max (so graph replays also run padded,
with bs > raw_bs), and distinct, shuffled request-pool rows.
"""

from __future__ import annotations

import random

from .standin import Setup

TRITON_BLOCK_TOKENS = 4096  # _FLASHMLA_CREATE_KV_BLOCK_SIZE in layers/attention/utils.py


def boundary_lengths(page: int, context_len: int, reserve: int) -> list[int]:
    """Sequence lengths on and around page and block boundaries."""
    top = context_len - reserve
    marks = {1, 2, page, 2 * page, 3 * page, TRITON_BLOCK_TOKENS, top}
    lens = {m + d for m in marks for d in (-1, 0, 1)}
    return sorted(x for x in lens if 1 <= x <= top)


def scenario(rng: random.Random, index: int, max_bs_cap: int = 6) -> dict:
    page = rng.choice((32, 64))
    steps = rng.randint(2, 5)
    draft_tokens = rng.randint(2, 8)
    max_bs = rng.randint(1, max_bs_cap)
    context_len = rng.choice((1024, 2048, 8192))
    reserve = Setup(steps=steps, draft_tokens=draft_tokens).reserve
    lengths = boundary_lengths(page, context_len, reserve)
    rows = max_bs + 4
    batches = []
    for _ in range(3):
        raw_bs = rng.randint(1, max_bs)
        seq_lens = [
            rng.choice(lengths) if rng.random() < 0.7 else rng.randint(1, context_len - reserve)
            for _ in range(raw_bs)
        ]
        extend = [rng.randint(1, min(steps + 1, s)) for s in seq_lens]
        batches.append(
            {
                "req_pool_indices": rng.sample(range(rows), raw_bs),
                "seq_lens": seq_lens,
                "extend_lens": extend,
            }
        )
    return {
        "name": f"s{index}-p{page}-steps{steps}-dt{draft_tokens}-bs{max_bs}-ctx{context_len}",
        "seed": index,
        "setup": {
            "page_size": page,
            "context_len": context_len,
            "max_bs": max_bs,
            "steps": steps,
            "draft_tokens": draft_tokens,
        },
        "batches": batches,
    }


def plan(count: int, seed: int = 2026, max_bs_cap: int = 6) -> dict:
    rng = random.Random(seed)
    return {"scenarios": [scenario(rng, i, max_bs_cap) for i in range(count)]}
