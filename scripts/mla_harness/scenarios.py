"""Scenarios for the differential and contract tests: generated and named.

A generated scenario fixes the backends' setup (page size 32 or 64, 2..5 draft
steps, topk 1, 2..8 draft tokens, a max batch size) and a few batches with
sequence lengths on and around page boundaries and Triton block boundaries
(4096 tokens), batch sizes from 1 to max (so graph replays also run padded,
with bs > raw_bs), and distinct, shuffled request-pool rows.

``TEST_CASES`` are hand-written, named edge cases beside them (as SGLang's own
backend tests have a ``DEFAULT_CONFIG`` and a ``TEST_CASES`` table), each a
change of ``DEFAULT_CONFIG`` and its batches, in the same form.
"""

from __future__ import annotations

import random
import zlib

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


DEFAULT_CONFIG = {"page_size": 64, "context_len": 8192, "max_bs": 4, "steps": 3, "draft_tokens": 4}


def case(name: str, batches, capture_bs=None, **changes) -> dict:
    """A named scenario: ``DEFAULT_CONFIG`` with ``changes``; ``batches`` as
    (seq_lens, extend_lens) on the pool's last rows, last first."""
    setup = {**DEFAULT_CONFIG, **changes}
    rows = Setup(max_bs=setup["max_bs"]).rows
    out = {"name": name, "seed": zlib.crc32(name.encode()), "setup": setup, "batches": []}
    top = (
        setup["context_len"]
        - Setup(steps=setup["steps"], draft_tokens=setup["draft_tokens"]).reserve
    )
    for lens, ext in batches:
        assert max(lens) <= top, f"{name}: no room for an iteration"
        assert all(1 <= e <= min(setup["steps"] + 1, n) for n, e in zip(lens, ext, strict=True))
        rpi = [rows - 1 - i for i in range(len(lens))]
        out["batches"].append({"req_pool_indices": rpi, "seq_lens": lens, "extend_lens": ext})
    if capture_bs:
        out["capture_bs"] = list(capture_bs)
    return out


TEST_CASES = (
    # The shortest requests: a one-token context, alone and beside a second.
    case("one-token", [((1,), (1,)), ((1, 2), (1, 2)), ((2,), (1,))], max_bs=2),
    # Lengths one short of, on and one past a page (64, then 32 tokens).
    case("page-edges-64", [((63, 64, 65), (1, 2, 4)), ((128, 127), (4, 3))], max_bs=3),
    case("page-edges-32", [((31, 32, 33), (1, 2, 4)), ((96, 95), (4, 3))], max_bs=3, page_size=32),
    # Around the Triton kernel's 4096-token block, where a second block starts.
    case("block-edges", [((4095, 4096, 4097), (4, 1, 2)), ((4097,), (3,))], max_bs=3),
    # Every request at the longest length the context leaves room for (8192 - 5).
    case("context-end", [((8187, 8187), (1, 4)), ((8187, 1), (4, 1)), ((8187,), (2,))], max_bs=2),
    # Uneven accept lengths, 1 to steps + 1, in one batch (5 steps).
    case(
        "uneven-accept",
        [((700, 1500, 640, 2000), (1, 6, 3, 6)), ((33, 2000), (6, 1))],
        steps=5,
        page_size=32,
        context_len=2048,
    ),
    # Captured sizes 1, 2, 4, 8 as a runner's list: replays padded over stale rows.
    case(
        "sparse-capture",
        [((500,) * 7, (4,) * 7), ((4096, 1, 64), (4, 1, 2)), ((3000,) * 5, (2,) * 5)],
        capture_bs=(1, 2, 4, 8),
        max_bs=8,
    ),
)


def plan(
    count: int, seed: int = 2026, max_bs_cap: int = 6, cases=(), phases=(), eager_forward=False
) -> dict:
    """``count`` generated scenarios (seeded), then the named ``cases``;
    ``phases`` (``probe.phase_names(base)``): the phases to run, where not
    every phase of the table (a base without DRAFT_EXTEND v1);
    ``eager_forward``: after each eager metadata call, also run the forward
    and record what the kernel receives (``records.EagerCall``)."""
    rng = random.Random(seed)
    out = {"scenarios": [scenario(rng, i, max_bs_cap) for i in range(count)] + list(cases)}
    if phases:
        out["phases"] = list(phases)
    if eager_forward:
        out["eager_forward"] = True
    return out
