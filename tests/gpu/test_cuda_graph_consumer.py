"""GPU only: captured CUDA graphs read correct metadata after many replays.

Runs ``mla_harness.consumer`` on each tree in its own process: a reference
paged MLA decode, captured in a real ``torch.cuda.CUDAGraph`` around the
backend's graph metadata, replayed with new random batches (padded and not),
must equal the same consumer run eagerly on ``init_forward_metadata``.
"""

from __future__ import annotations

import json

import pytest
import torch

from mla_harness import child

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_graph_replays_equal_eager(trees, tree, request):
    replays = str(request.config.getoption("--graph-replays"))
    out = child.run("mla_harness.consumer", trees[tree], "cuda", "--replays", replays, timeout=1200)
    report = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(report))
    assert {r["mode"] for r in report} == {"draft", "decode", "verify", "extend_v1", "extend_v2"}
    for r in report:
        assert r["compared"] >= r["replays"]
        assert r["max_rel_err"] < 1e-9, r  # float64 consumer: only rounding
