"""0007: the fused block-table kernel, against the unfused paths it replaces.

``mla_harness.rebuild_check`` runs inside the patched tree (the base has no
such kernel): for CUDA-graph metadata (seq_lens_k + block table) and for the
eager table (-1 past the valid pages), the fused kernel must be bit-identical
to the unfused path on whole block tables, and must not recompile per batch
size, sequence length or table width. Where the rebuild runs (inside the
captured forward) is tested by ``test_patch_effects`` and the GPU consumer.
"""

from __future__ import annotations

import json
import subprocess
import sys

from mla_harness import subprocess_env


def _run(tree, device, cases):
    env = subprocess_env()
    cmd = [sys.executable, "-m", "mla_harness.rebuild_check", "--tree", str(tree)]
    cmd += ["--device", device, "--cases", str(cases)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fused_block_table_kernel(trees, device):
    report = _run(trees["patched"], device, 400 if device == "cuda" else 40)
    print(json.dumps(report))
    kernel = report["kernel"]
    assert kernel["cases"] >= 40
    if device == "cuda":
        # 16 launches with new batch sizes, lengths, offsets and widths: the
        # first may compile, none after it.
        for mode, added in kernel["new_variants"].items():
            assert added <= 1, mode
