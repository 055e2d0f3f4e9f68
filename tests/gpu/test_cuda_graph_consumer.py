"""GPU only: real CUDA graphs of each base's runners, replayed with new batches.

Runs ``mla_harness.consumer`` on each tree in its own process. Per phase the
base has (draft, decode, verify, draft extend v2, and v0.5.12's draft extend
v1) and batch size, as the base's runners do: the capture call (v0.5.23:
``init_forward_metadata_out_graph(fb, in_capture=True)``), then a
``torch.cuda.CUDAGraph`` recording the in-graph step where the base has one
(``init_forward_metadata_in_graph(fb)``) and the backend's real forward with a
reference paged MLA decode as the kernel (``driver.graph_step``); each replay
follows the replay call with a new random, partly padded batch, and must
equal the same reference run on the lengths and table of ``req_to_token``
alone. ``python -m mla_harness.consumer --device cpu`` runs the same checks
with eager re-runs in place of the graphs. ``--graph-replays`` sets the
replays per phase.
"""

from __future__ import annotations

import json

import pytest
import torch

from mla_harness import child
from mla_harness.phases import on_base

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# The phases each base's consumer must have run (v0.5.13+ has no DRAFT_EXTEND
# v1); a base not listed: the phase table's.
MODES = {
    "v0.5.12": {"draft", "decode", "verify", "extend_v1", "extend_v2"},
    "v0.5.23": {"draft", "decode", "verify", "extend_v2"},
}


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_graph_replays_equal_oracle(trees, base, tree, request):
    replays = str(request.config.getoption("--graph-replays"))
    out = child.run("mla_harness.consumer", trees[tree], "cuda", "--replays", replays, timeout=1200)
    report = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(report))
    expected = MODES.get(base) or {phase.name for phase in on_base(base)}
    assert {r["mode"] for r in report} == expected
    for r in report:
        assert r["compared"] >= r["replays"]
        assert r["max_rel_err"] < 1e-9, r  # float64 consumer: only rounding
