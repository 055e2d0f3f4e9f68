"""0007: the fused block-table kernel, against the unfused paths it replaces.

``mla_harness.rebuild_check`` runs inside the patched tree (the base has no
such kernel): for CUDA-graph metadata (seq_lens_k + block table) the fused
kernel must be bit-identical to the unfused path on whole table buffers, and
must not recompile per batch size, sequence length or table width. Where the
rebuild runs (inside the captured forward) is tested by ``test_patch_effects``
and the GPU consumer.
"""

from __future__ import annotations

import json

from mla_harness import child


def _run(tree, device, cases):
    out = child.run("mla_harness.rebuild_check", tree, device, "--cases", str(cases), timeout=1800)
    return json.loads(out.strip().splitlines()[-1])


def test_fused_block_table_kernel(trees, device):
    report = _run(trees["patched"], device, 400 if device == "cuda" else 40)
    print(json.dumps(report))
    kernel = report["kernel"]
    assert kernel["cases"] >= 40
    if device == "cuda":
        # 16 launches with new batch sizes, lengths, offsets and widths: the
        # first may compile, none after it.
        assert kernel["new_variants"] <= 1
