"""Each series' block-table kernel against the code it replaces, bit for bit.

The harness check runs inside the patched tree on random cases with
garbage-prefilled tables (entries the kernel must not touch included):

- v0.5.12 0007 (``mla_harness.rebuild_check``; the base has no such kernel):
  for CUDA-graph metadata (seq_lens_k + block table) the fused kernel is
  bit-identical to the unfused path on whole table buffers, and on GPU does
  not recompile per batch size, sequence length or table width.
- v0.5.23 0008 (``mla_harness.kv_indices_check``): the extended
  ``create_flashmla_kv_indices_triton``, loaded from the patched tree and
  from v0.5.23, run on the same cases: called as every existing caller calls
  it, it writes exactly v0.5.23's table; with the new ``kv_lens_out_ptr`` /
  ``KV_LENS_OFFSET`` it writes v0.5.23's table for ``lengths + offset`` and
  stores those lengths, computed in torch.

Where the rebuild runs (inside the captured graph) is tested by
``test_patch_effects`` and the GPU consumer.
"""

from __future__ import annotations

import json

import pytest

from mla_harness import child


@pytest.mark.base("v0.5.12")
def test_fused_block_table_kernel(trees, device):
    cases = 400 if device == "cuda" else 40
    out = child.run(
        "mla_harness.rebuild_check", trees["patched"], device, "--cases", str(cases), timeout=1800
    )
    report = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(report))
    kernel = report["kernel"]
    assert kernel["cases"] >= 40
    if device == "cuda":
        # 16 launches with new batch sizes, lengths, offsets and widths: the
        # first may compile, none after it.
        assert kernel["new_variants"] <= 1


@pytest.mark.base("v0.5.23")
def test_extended_kernel_keeps_defaults_and_fuses_lengths(trees, device):
    cases = 300 if device == "cuda" else 40
    out = child.run(
        "mla_harness.kv_indices_check",
        trees["patched"],
        device,
        "--reference",
        str(trees["base"]),
        "--cases",
        str(cases),
    )
    report = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(report))
    assert report["cases"] == cases
    assert report["default_mismatches"] == 0
    assert report["fused_mismatches"] == 0
    assert report["lens_mismatches"] == 0
