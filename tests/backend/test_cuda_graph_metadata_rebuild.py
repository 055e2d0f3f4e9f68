"""0004: the fused metadata rebuild and its guarded CUDA-graph replay.

``mla_harness.rebuild_check`` runs inside the patched tree (the base has no
such kernel): the fused kernel must be bit-identical to the unfused path on
whole block tables, must not recompile per batch size or sequence length, and
(on CUDA) the captured rebuild must be replayed only for the tensors it was
captured with, falling back to a direct launch otherwise, with correct
metadata either way.
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


def test_fused_rebuild(trees, device):
    report = _run(trees["patched"], device, 400 if device == "cuda" else 40)
    print(json.dumps(report))
    kernel = report["kernel"]
    assert kernel["cases"] >= 40
    if device == "cuda":
        assert kernel["new_variants_for_bs_and_lengths"] == 1  # the first launch compiles; no more
        guard = report["guard"]
        assert all(o["correct"] for o in guard.values()), guard
        for name in ("captured slices", "whole buffers"):
            assert guard[name] == {"graph_replays": 1, "direct_launches": 0, "correct": True}, name
        for name in ("new tensors", "int32 seq_lens", "offset view"):
            assert guard[name] == {"graph_replays": 0, "direct_launches": 1, "correct": True}, name
