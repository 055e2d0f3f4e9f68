"""Checks of 0007's fused CUDA-graph metadata rebuild, run inside one tree.

``python -m mla_harness.rebuild_check --tree DIR [--cases N]`` prints JSON:

- ``kernel``: ``fill_block_kv_indices_kernel``, through the backend's own
  launcher ``_fill_cuda_graph_metadata``, against the work it replaces
  (``seq_lens + offset`` cast into ``seq_lens_k``, then v0.5.12's
  ``create_flashmla_kv_indices_triton``) on copies of one table buffer
  pre-filled with random garbage: every entry of the buffer (so pages past
  the valid range, and columns past the table's width where the table is a
  view of a wider buffer) and ``seq_lens_k`` must be bit-identical. Page sizes
  32 and 64, random table widths and batch sizes, int32 lengths (the graph
  runners' buffers) and int64 ones (batches), lengths around page and
  4096-token block boundaries. On CUDA also the number of compiled variants
  that launches with new batch sizes, lengths, offsets and widths add.
"""

from __future__ import annotations

import json
import random
import sys

from . import child


def _case(rng, device):
    import torch

    page = rng.choice((32, 64))
    ctx = rng.choice((1024, 4096, 8192 + 64))
    rows, bs = rng.randint(2, 9), rng.randint(1, 8)
    blocks = -(-ctx // page)
    width = blocks + rng.choice((0, 1, 7, 64))  # any block-table width
    stride = width + rng.choice((0, 0, 3, 64))  # a view of a wider buffer half the time
    pool = (
        torch.randperm(rows * ctx, dtype=torch.int64)[: rows * ctx].view(rows, ctx).to(torch.int32)
    )
    rpi = torch.tensor([rng.randrange(rows) for _ in range(bs)], dtype=torch.int64)
    offset = rng.choice((0, rng.randint(1, 8)))
    marks = [1, page - 1, page, page + 1, 4095, 4096, 4097, ctx - offset - 1, ctx - offset]
    lens = torch.tensor(
        [rng.choice([m for m in marks if 1 <= m <= ctx - offset]) for _ in range(bs)],
        dtype=rng.choice((torch.int32, torch.int64)),
    )
    garbage = torch.randint(-(2**31), 2**31 - 1, (bs, stride), dtype=torch.int32)
    to = lambda t: t.to(device)  # noqa: E731
    return page, to(pool), to(rpi), to(lens), offset, to(garbage), width


def check_kernel(cases: int, device: str) -> dict:
    import torch
    from sglang.srt.layers.attention import trtllm_mla_backend as mod
    from sglang.srt.layers.attention.utils import create_flashmla_kv_indices_triton

    rng = random.Random(7)
    for _ in range(cases):
        page, pool, rpi, lens, offset, garbage, width = _case(rng, device)
        bs, stride = garbage.shape
        want, got = garbage.clone(), garbage.clone()
        want_k = torch.full((bs,), -7, dtype=torch.int32, device=device)
        got_k = want_k.clone()
        kv_lens = lens + offset
        want_k.copy_(kv_lens)
        create_flashmla_kv_indices_triton[(bs,)](
            pool, rpi, kv_lens, None, want, pool.stride(0), stride, PAGED_SIZE=page
        )
        mod._fill_cuda_graph_metadata(pool, page, rpi, lens, offset, got_k, got[:, :width])
        assert torch.equal(want, got), "block table differs"
        assert torch.equal(want_k, got_k), "seq_lens_k differs"
    return {"cases": cases, "new_variants": _recompiles(mod, rng, device)}


def _recompiles(mod, rng, device):
    """Compiled variants added by 16 launches that differ in batch size, sequence
    lengths, offset and table width (None under the interpreter, which compiles
    nothing). The first may compile; none after it may."""
    import torch

    kernel = mod.fill_block_kv_indices_kernel
    if device != "cuda":
        return None

    def variants():
        return sum(len(c[0]) for c in kernel.device_caches.values())

    page, pool = _case(rng, device)[:2]
    before = variants()
    for bs in range(1, 17):
        rpi = torch.randint(0, pool.shape[0], (bs,), device=device)
        offset = rng.choice((0, 1, 3, 4, 16))
        lens = torch.randint(1, pool.shape[1] - 16, (bs,), dtype=torch.int32, device=device)
        width = -(-pool.shape[1] // page) + rng.randint(0, 70)
        table = torch.empty(bs, width, dtype=torch.int32, device=device)
        k = torch.empty(bs, dtype=torch.int32, device=device)
        mod._fill_cuda_graph_metadata(pool, page, rpi, lens, offset, k, table)
    return variants() - before


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--cases", type=int, default=40)
    args = parser.parse_args(argv)
    child.enter(args)
    report = {"kernel": check_kernel(args.cases, args.device)}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.rebuild_check", main))
