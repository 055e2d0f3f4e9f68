"""Checks of 0004's fused CUDA-graph metadata rebuild, run inside one tree.

``python -m mla_harness.rebuild_check --tree DIR [--cases N]`` prints JSON:

- ``kernel``: ``fill_cuda_graph_metadata_kernel`` against the unfused path it
  replaces (``seq_lens + offset`` cast into ``seq_lens_k``, then
  ``create_flashmla_kv_indices_triton``) on copies of one block table
  pre-filled with random garbage: every entry of both tables (so pages past
  the valid range too) and ``seq_lens_k`` must be bit-identical. Page sizes 32
  and 64, random table widths and batch sizes, lengths around page and
  4096-token block boundaries. On CUDA also the number of compiled variants
  after all cases (it must not grow with batch size or sequence length).
- ``guard`` (CUDA only): the rebuild captured with a runner's buffers is
  replayed only for those buffers (also passed whole, with more rows);
  other pointers, dtypes or too few rows take the direct launch, and the
  metadata is right after each call.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path


def _case(rng, device):
    import torch

    page = rng.choice((32, 64))
    ctx = rng.choice((1024, 4096, 8192 + 64))
    rows, bs = rng.randint(2, 9), rng.randint(1, 8)
    blocks = -(-ctx // page)
    width = blocks + rng.choice((0, 1, 7, 64))  # any block-table width
    pool = (
        torch.randperm(rows * ctx, dtype=torch.int64)[: rows * ctx].view(rows, ctx).to(torch.int32)
    )
    rpi = torch.tensor([rng.randrange(rows) for _ in range(bs)], dtype=torch.int64)
    offset = rng.choice((0, rng.randint(1, 8)))
    marks = [1, page - 1, page, page + 1, 4095, 4096, 4097, ctx - offset - 1, ctx - offset]
    lens = torch.tensor(
        [rng.choice([m for m in marks if 1 <= m <= ctx - offset]) for _ in range(bs)],
        dtype=torch.int64,
    )
    garbage = torch.randint(-(2**31), 2**31 - 1, (bs, width), dtype=torch.int32)
    to = lambda t: t.to(device)  # noqa: E731
    return page, to(pool), to(rpi), to(lens), offset, to(garbage)


def check_kernel(cases: int, device: str) -> dict:
    import torch
    from sglang.srt.layers.attention import trtllm_mla_backend as mod
    from sglang.srt.layers.attention.utils import create_flashmla_kv_indices_triton

    rng = random.Random(7)
    for _ in range(cases):
        page, pool, rpi, lens, offset, garbage = _case(rng, device)
        bs, width = garbage.shape
        want_table, got_table = garbage.clone(), garbage.clone()
        want_k = torch.full((bs,), -7, dtype=torch.int32, device=device)
        got_k = want_k.clone()
        kv_lens = lens + offset
        want_k.copy_(kv_lens)
        create_flashmla_kv_indices_triton[(bs,)](
            pool, rpi, kv_lens, None, want_table, pool.stride(0), width, PAGED_SIZE=page
        )
        mod.fill_cuda_graph_metadata_kernel[(bs,)](
            pool,
            rpi,
            lens,
            offset,
            got_k,
            got_table,
            pool.stride(0),
            width,
            PAGED_SIZE=page,
            WRITE_SEQ_LENS_K=True,
        )
        assert torch.equal(want_table, got_table), "block table differs"
        assert torch.equal(want_k, got_k), "seq_lens_k differs"
    return {"cases": cases, "new_variants_for_bs_and_lengths": _recompiles(mod, rng, device)}


def _recompiles(mod, rng, device):
    """Compiled variants added by launches that differ only in batch size,
    sequence lengths and offset (None under the interpreter, which compiles nothing)."""
    import torch

    kernel = mod.fill_cuda_graph_metadata_kernel
    if device != "cuda":
        return None

    def variants():
        return sum(len(c[0]) for c in kernel.device_caches.values())

    page, pool, _, _, _, _ = _case(rng, device)
    width = -(-pool.shape[1] // page) + 5  # a width no earlier case used
    before = variants()
    for bs in range(1, 17):
        rpi = torch.randint(0, pool.shape[0], (bs,), device=device)
        offset = rng.choice((0, 1, 3, 4, 16))
        lens = torch.randint(1, pool.shape[1] - 16, (bs,), device=device)
        table = torch.empty(bs, width, dtype=torch.int32, device=device)
        k = torch.empty(bs, dtype=torch.int32, device=device)
        kernel[(bs,)](
            pool,
            rpi,
            lens,
            offset,
            k,
            table,
            pool.stride(0),
            width,
            PAGED_SIZE=page,
            WRITE_SEQ_LENS_K=True,
        )
    return variants() - before


def check_guard(device: str) -> dict:
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    from . import standin
    from .batches import StaticInputs, verify_spec_info
    from .launches import count_launches
    from .visible import expected_block_prefix, kernel_view

    s = standin.Setup(page_size=64, context_len=4096, max_bs=6)
    b = standin.build_backends(s, device)
    b.target.init_cuda_graph_state(s.max_bs, s.max_bs * s.draft_tokens)
    static = StaticInputs(s.max_bs, 1, device)
    spec = verify_spec_info(s.draft_tokens)
    bs = 4
    rpi, lens = static.capture_inputs(bs)
    b.target.init_forward_metadata_capture_cuda_graph(
        bs, bs * s.draft_tokens, rpi, lens, None, ForwardMode.TARGET_VERIFY, spec
    )
    rng = random.Random(3)
    outcomes = {}

    def fresh():
        static.req_pool_indices[:bs] = torch.tensor(rng.sample(range(s.rows), bs))
        static.seq_lens[:bs] = torch.tensor([rng.randint(1, s.context_len - 8) for _ in range(bs)])

    cases = {
        "captured slices": lambda: (static.req_pool_indices[:bs], static.seq_lens[:bs]),
        "whole buffers": lambda: (static.req_pool_indices, static.seq_lens),
        "new tensors": lambda: (static.req_pool_indices[:bs].clone(), static.seq_lens[:bs].clone()),
        "int32 seq_lens": lambda: (
            static.req_pool_indices[:bs],
            static.seq_lens[:bs].to(torch.int32),
        ),
        "offset view": lambda: (static.req_pool_indices[1 : bs + 1], static.seq_lens[1 : bs + 1]),
    }
    for name, make in cases.items():
        fresh()
        rpi_in, lens_in = make()
        with count_launches() as counts:
            b.target.init_forward_metadata_replay_cuda_graph(
                bs, rpi_in, lens_in, 0, None, ForwardMode.TARGET_VERIFY, spec, seq_lens_cpu=None
            )
            torch.cuda.synchronize()
        meta = b.target.decode_cuda_graph_metadata[bs]
        kv = lens_in[:bs].long() + s.draft_tokens
        view = kernel_view(meta, meta.seq_lens_k, bs, s.page_size)
        want = expected_block_prefix(
            b.runner.req_to_token_pool.req_to_token, rpi_in[:bs], kv, s.page_size
        )
        correct = bool((view["seq_lens"] == kv.cpu().numpy()).all()) and all(
            (g == w).all() for g, w in zip(view["block_prefix"], want, strict=True)
        )
        outcomes[name] = {
            "graph_replays": counts.graphs,
            "direct_launches": sum(counts.triton.values()),
            "correct": correct,
        }
    return outcomes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args(argv)
    from . import replacements

    replacements.prepare_environment(args.device == "cuda")
    sys.path.insert(0, str(args.tree.resolve()))
    report = {"kernel": check_kernel(args.cases, args.device)}
    if args.device == "cuda":
        report["guard"] = check_guard(args.device)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
