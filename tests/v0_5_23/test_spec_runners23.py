"""v0.5.23's other speculative draft runners over trtllm_mla: multi-layer EAGLE and Frozen-KV MTP.

``mla_harness.runner_check`` builds their real classes on each tree's
backends, as it builds the EAGLE runners of ``test_real_runner23`` (``runner_check.VARIANTS``
"multi_layer" and "frozen_kv"; the workers are the real classes, not
constructed, holding what the runners read: replacements 13, 15 and 22):

- ``MultiLayerEagleMultiStepDraftExtendCudaGraphRunner`` (``--enable-multi-
  layer-eagle``), 3 MTP layers, each with its own ``TRTLLMMLABackend`` and
  per-step graphs (``MultiLayerEagleDraftExtendCudaGraphRunner``) over one
  shared buffer set: ``prepare`` once per batch, then every step's ``replay``
  (its out-of-graph metadata call, then its graph), the input ids rotated
  between steps, as ``multi_layer_eagle_worker_v2.py:897-948`` does. The
  worker builds these per-step graphs for trtllm_mla (its one-graph runner
  needs a backend that rebuilds or stages its draft-extend metadata;
  trtllm_mla does neither, ``multi_layer_eagle_worker_v2.py:431-452``).
- ``FrozenKVMTPCudaGraphRunner``: the draft loop (seed and each step but the
  last: 3 forwards) over the target's frozen KV in plain DECODE metadata, on
  the draft model runner's own backend, through the worker's own metadata
  methods (``_init_frozen_kv_metadata_capture_cuda_graph`` / ``_replay_``,
  under ``_frozen_kv_target_view``). v0.5.23 never selects it with
  trtllm_mla: FROZEN_KV_MTP is reached for a Gemma4 assistant draft
  (``arg_groups/speculative_hook.py:87-116``), the one draft model with the
  frozen-KV context hooks (``models/gemma4_mtp.py``; without them the
  target view refuses to run, ``speculative/frozen_kv_mtp_utils.py:44-48``),
  and trtllm_mla serves MLA models only (``layers/attention/
  attention_registry.py:94-97``). The runner calls only the attention
  backend API, so trtllm_mla can be driven by it, and is, here.

After every replay, the metadata the replayed graphs' kernels read (each
step backend's ``seq_lens_k`` and block-table rows at the replayed size) must
equal the oracle from ``req_to_token``, and every attention call's output a
float64 reference; at every captured size a graph replayed without its
metadata call must differ (the control). CPU: each graph re-run with its
capture's metadata objects (``frozen``; a plain re-run reads the last
captured size's metadata on v0.5.23, ``test_real_runner23``'s strict xfail,
the same for these runners) and the capture's storages; GPU: real CUDA graphs.
"""

from __future__ import annotations

import json

import pytest
from jobs import Job, group

from mla_harness import child

pytestmark = pytest.mark.base("v0.5.23")

DRAFTS = {  # runner_check --variant -> the draft runner and its attention calls per replay
    "multi_layer": ("MultiLayerEagleMultiStepDraftExtendCudaGraphRunner", 3),  # one per MTP layer
    "frozen_kv": ("FrozenKVMTPCudaGraphRunner", 3),  # the seed and 2 steps
}
CPU_REPLAYS = 4
SPEC_COST = 10  # CPU seconds of one runner_check run (2-core CPU, 2026-12-03)


def _run(tree, device: str, replays: int, variant: str):
    flags = ["--variant", variant, "--replays", str(replays)]
    if device == "cpu":
        flags.append("--freeze-metadata")
    return child.run_json("mla_harness.runner_check", tree, device, *flags, timeout=1800)


def _replays(request, device: str) -> int:
    return request.config.getoption("--graph-replays") if device == "cuda" else CPU_REPLAYS


@group("spec23")
def spec_jobs(request) -> dict:
    device = request.getfixturevalue("device")
    trees23 = request.getfixturevalue("trees_of")("v0.5.23")
    replays = _replays(request, device)
    return {
        (variant, name): Job(_run, (path, device, replays, variant), SPEC_COST)
        for variant in DRAFTS
        for name, path in trees23.items()
    }


@pytest.fixture(scope="module")
def spec23(jobs, device, request):
    return _replays(request, device), jobs.results("spec23", request)


@pytest.mark.parametrize("variant", list(DRAFTS))
@pytest.mark.parametrize("tree", ["base", "patched"])
def test_draft_runner_equals_reference(spec23, tree, variant, device):
    replays, results = spec23
    report, error = results[variant, tree]
    assert error is None, error
    print(json.dumps(report))
    name, calls = DRAFTS[variant]
    assert [r["runner"] for r in report] == [name]
    for r in report:
        assert r["replays"] == replays and r["layers"] == calls, r
        assert r["compared"] == replays * calls, r  # every attention call of every replay
        assert r["tables"] > 0 and r["table_mismatches"] == 0, r  # seq_lens_k and pages
        assert r["max_rel_err"] < 1e-9, r  # float64 reference: only rounding
        assert r["stale_rel_err"] > 0.1, r  # the control: stale metadata shows
        assert r["padded"] > 0, r
        # CPU: every re-run (replays and controls, per step graph) used the
        # capture's storages. GPU: real graphs.
        graphs = calls if variant == "multi_layer" else 1  # graphs replayed per replay
        reruns = (replays + len(r["capture_bs"])) * graphs if device == "cpu" else 0
        assert r["addresses_checked"] == reruns, r
