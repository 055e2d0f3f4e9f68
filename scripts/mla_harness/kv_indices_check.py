"""The v0.5.23 series' extended block-table kernel, against the release's own.

``python -m mla_harness.kv_indices_check --tree PATCHED --reference BASE
--cases N`` loads ``create_flashmla_kv_indices_triton`` from both trees'
``kernels/ops/attention/kv_indices.py`` (by path: nothing else of SGLang is
imported) and runs both on the same random cases: page 32 or 64, tables 1 to
40 page-blocks wide prefilled with garbage, int32 or int64 lengths on and off
page and block edges, ``kv_start_idx`` on and off. For each case:

- ``defaults``: called as every existing caller calls it (no new argument),
  the patched kernel writes exactly the table the reference writes, every
  entry included (those it must leave alone too);
- ``fused``: with ``kv_lens_out_ptr`` and ``KV_LENS_OFFSET`` it writes the
  table the reference writes for ``lengths + offset``, and stores those
  lengths (int32), computed here in torch, not by either kernel.

Prints a JSON summary: cases and mismatches of each kind.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

from . import child

KERNEL_FILE = Path("sglang/kernels/ops/attention/kv_indices.py")


def load(tree: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, tree / KERNEL_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_case(rng: random.Random, torch, blocks_per_table):
    """One case's inputs: ``(page, req_to_token, rpi, lens, kv_start, width, garbage, offset)``."""
    page = rng.choice((32, 64))
    rows, context = 6, rng.choice((4096, 8192, 12000))
    req_to_token = torch.randint(0, 1 << 20, (rows, context), dtype=torch.int32)
    bs = rng.randint(1, 5)
    per_block = blocks_per_table(page)
    width = per_block * rng.randint(1, min(40, max(1, (context // page) // per_block)))
    rpi = torch.tensor(rng.sample(range(rows), bs), dtype=torch.int64)
    offset = rng.choice((0, 0, 3, 4))
    top = min(context - offset - 1, width * page - offset)
    edges = (1, page - 1, page, page + 1, per_block * page, per_block * page + 1)
    lens = torch.tensor(
        [rng.choice((*edges, rng.randint(1, top))) for _ in range(bs)],
        dtype=rng.choice((torch.int32, torch.int64)),
    ).clamp(max=top)
    start = None
    if rng.random() < 0.25:
        start = torch.randint(0, 2, (bs,), dtype=torch.int32) * page
    garbage = torch.randint(-5, 5, (bs, width), dtype=torch.int32)
    return page, req_to_token, rpi, lens, start, width, garbage, offset


def run(patched, reference, cases: int, device: str = "cpu", seed: int = 7) -> dict:
    import torch

    torch.set_default_device(device)  # every tensor of the cases: the kernels read them there
    rng = random.Random(seed)
    out = {"cases": 0, "default_mismatches": 0, "fused_mismatches": 0, "lens_mismatches": 0}
    for _ in range(cases):
        page, r2t, rpi, lens, start, width, garbage, offset = random_case(
            rng, torch, reference.get_num_page_per_block_flashmla
        )
        grid = (len(rpi), reference.get_num_kv_index_blocks_flashmla(width, page))
        ctx = r2t.shape[1]
        want, got = garbage.clone(), garbage.clone()
        reference.create_flashmla_kv_indices_triton[grid](
            r2t, rpi, lens, start, want, ctx, width, PAGED_SIZE=page
        )
        patched.create_flashmla_kv_indices_triton[grid](
            r2t, rpi, lens, start, got, ctx, width, PAGED_SIZE=page
        )
        out["default_mismatches"] += int(not torch.equal(want, got))
        want, got = garbage.clone(), garbage.clone()
        lens_out = torch.full((len(rpi),), -7, dtype=torch.int32)
        reference.create_flashmla_kv_indices_triton[grid](
            r2t, rpi, lens + offset, start, want, ctx, width, PAGED_SIZE=page
        )
        patched.create_flashmla_kv_indices_triton[grid](
            r2t,
            rpi,
            lens,
            start,
            got,
            ctx,
            width,
            PAGED_SIZE=page,
            kv_lens_out_ptr=lens_out,
            KV_LENS_OFFSET=offset,
        )
        out["fused_mismatches"] += int(not torch.equal(want, got))
        out["lens_mismatches"] += int(not torch.equal(lens_out, (lens + offset).to(torch.int32)))
        out["cases"] += 1
    return out


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--reference", required=True, type=Path, help="the base tree")
    parser.add_argument("--cases", type=int, default=60)
    args = parser.parse_args(argv)
    child.enter(args)
    patched = load(args.tree, "kv_indices_patched")
    reference = load(args.reference, "kv_indices_reference")
    print(json.dumps(run(patched, reference, args.cases, args.device)))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.kv_indices_check", main))
