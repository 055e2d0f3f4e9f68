"""GPU only: captured CUDA graphs read correct metadata after many replays.

Runs ``mla_harness.consumer`` on each tree in its own process: a reference
paged MLA decode, captured in a real ``torch.cuda.CUDAGraph`` around the
backend's graph metadata, replayed with new random batches (padded and not),
must equal the same consumer run eagerly on ``init_forward_metadata``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from mla_harness import subprocess_env

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_graph_replays_equal_eager(trees, tree, request):
    env = subprocess_env()
    cmd = [
        sys.executable,
        "-m",
        "mla_harness.consumer",
        "--tree",
        str(trees[tree]),
        "--replays",
        str(request.config.getoption("--graph-replays")),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(report))
    assert {r["mode"] for r in report} == {"draft", "decode", "verify", "extend_v1", "extend_v2"}
    for r in report:
        assert r["compared"] >= r["replays"]
        assert r["max_rel_err"] < 1e-9, r  # float64 consumer: only rounding
