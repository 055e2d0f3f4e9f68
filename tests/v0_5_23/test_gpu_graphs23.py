"""GPU only: real CUDA graphs of v0.5.23's runners, replayed with new batches.

Runs ``mla_harness.consumer`` on each v0.5.23 tree in its own process. Per
phase (draft, decode, verify, draft extend v2) and batch size, as v0.5.23's
runners do: ``init_forward_metadata_out_graph(fb, in_capture=True)``, then a
``torch.cuda.CUDAGraph`` recording ``init_forward_metadata_in_graph(fb)`` and
the backend's real forward with a reference paged MLA decode as the kernel
(``driver.graph_step``); each replay follows the out-of-graph call on the
runner's view with a new random, partly padded batch, and must equal the same
reference run on the lengths and table of ``req_to_token`` alone.
``--graph-replays`` sets the replays per phase.
"""

from __future__ import annotations

import json

import pytest
import torch

from mla_harness import child

pytestmark = [
    pytest.mark.base("v0.5.23"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_graph_replays_equal_oracle(trees23, tree, request):
    replays = str(request.config.getoption("--graph-replays"))
    out = child.run(
        "mla_harness.consumer", trees23[tree], "cuda", "--replays", replays, timeout=1200
    )
    report = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(report))
    assert {r["mode"] for r in report} == {"draft", "decode", "verify", "extend_v2"}
    for r in report:
        assert r["compared"] >= r["replays"]
        assert r["max_rel_err"] < 1e-9, r  # float64 consumer: only rounding
