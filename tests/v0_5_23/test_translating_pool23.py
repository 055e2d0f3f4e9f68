"""A translating KV pool: SGLang's unified memory pool under trtllm_mla, on both trees.

The pool is built as a server builds it for ``--enable-unified-memory`` on an
MLA hybrid-Mamba model, with SGLang's own classes (``mla_harness.
unified_pool``: ``init_unified_mamba_pools``, its
``UnifiedMambaTokenToKVPoolAllocator``, and the real ``KVIndexTranslator`` the
model runner builds over them, which translates): ``req_to_token`` holds
virtual ids, which the allocator hands out and maps to physical pages out of
order. The target model's backends read it: plain decode, and verify (an
EAGLE server on this pool needs a draft whose KV fuses into the target's
pages, an MHA draft on its own backend: ``mem_cache/kv_cache_configurator.py:
1111-1117, 1385-1405``). No server runs trtllm_mla's draft or draft-extend
backends on it (an MLA draft does not fuse, and EAGLE refuses one that does
not), so those are not driven here.

- Without DCP (``runner_check --variant unified``): v0.5.23's real
  ``DecodeCudaGraphRunner`` in target verify and in plain decode, each batch
  bound to its plan as ``ForwardBatch.init_new`` binds it. Both trees refresh
  a translating pool's graph metadata on the host before each replay from the
  plan (v0.5.23 ``_apply_cuda_graph_metadata``; the series'
  ``_copy_plan_graph_metadata``, kept out of the graph because the plan's
  table is built or shared on the host). After every replay the metadata the
  graph's kernel reads (``seq_lens_k``, the block-table rows) must equal the
  allocator's physical pages of the requests' ``req_to_token`` pages, and
  every layer's output a float64 reference over them. CPU: each graph re-run
  with its capture's metadata objects (``frozen``, as in
  ``test_real_runner23``); GPU: real CUDA graphs.
- DCP 2, every rank (``dcp_check --unified-pool``; under speculative
  decoding a DCP server's decode backend is cutedsl_mla, a ``TRTLLMMLABackend``
  that replaces only the kernel, ``attention_registry.py:99-106``,
  ``cutedsl_mla_backend.py:59-80``): the rank's page table over
  its cyclic slice, translated through the allocator's v2p table, which
  v0.5.23 rebuilds on the host and the series inside the graph (the table
  kernel reads ``full_v2p_table``, taken by the translator once, at its
  construction, ``kv_index_translator.py:152``). After the captures the
  allocator moves live pages (frees between them: compaction), rebinding the
  table's entries in place; the replays must read the new pages, and the table
  must be the one the captures saw, at the same address.

A table re-assigned after capture: SGLang has no check for it, and states
the rule instead: the live v2p table keeps a stable address
(``layers/attention/linear/inkling_sconv_backend.py:32``; a capacity change
keeps its storage, ``mem_cache/allocator/unified_sub_pool.py:2069-2080``).
No code re-assigns it (``virtual_to_physical`` is set in
``MultiEndedAllocator.__init__`` only, ``unified_sub_pool.py:367``;
``full_v2p_table`` is a property without a setter); the DCP test checks the
rule holds across the allocator's moves.
"""

from __future__ import annotations

import json

import pytest
from jobs import Job, group
from oracle import assert_same_kernel_calls

from mla_harness import child

pytestmark = pytest.mark.base("v0.5.23")

RUNNERS = ("DecodeCudaGraphRunner (target verify)", "DecodeCudaGraphRunner (decode)")
TARGET_PHASES = ("decode", "verify")  # the phases of the target's backend
MAX_BS = 4  # dcp_check.SETUP
CPU_REPLAYS = 6
UNIFIED_COST = 10  # CPU seconds of one run (2-core CPU, 2026-12-03)


def _runners(tree, device: str, replays: int):
    flags = ["--variant", "unified", "--replays", str(replays)]
    if device == "cpu":
        flags.append("--freeze-metadata")
    return child.run_json("mla_harness.runner_check", tree, device, *flags, timeout=1800)


def _dcp(tree, device: str, replays: int):
    args = ("--dcp-size", "2", "--unified-pool", "--replays", str(replays))
    return child.run_report(
        "mla_harness.dcp_check", tree, device, *args, "--phases", *TARGET_PHASES, timeout=1800
    )


def _replays(request, device: str) -> tuple[int, int]:
    """Replays of the runners, of DCP."""
    cuda = device == "cuda"
    replays = request.config.getoption("--graph-replays") if cuda else CPU_REPLAYS
    return replays, min(replays, 40) if cuda else 3


@group("unified23")
def unified_jobs(request) -> dict:
    device = request.getfixturevalue("device")
    trees23 = request.getfixturevalue("trees_of")("v0.5.23")
    replays, dcp_replays = _replays(request, device)
    jobs = {}
    for name, path in trees23.items():
        jobs["runners", name] = Job(_runners, (path, device, replays), UNIFIED_COST)
        jobs["dcp", name] = Job(_dcp, (path, device, dcp_replays), UNIFIED_COST)
    return jobs


@pytest.fixture(scope="module")
def unified23(jobs, device, request):
    replays, dcp_replays = _replays(request, device)
    results = jobs.results("unified23", request)
    out = {"replays": replays, "dcp_replays": dcp_replays, "runners": {}, "dcp": {}}
    for (kind, name), result in results.items():
        out[kind][name] = result
    return out


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_runners_read_the_translated_pages(unified23, tree, device):
    report, error = unified23["runners"][tree]
    assert error is None, error
    print(json.dumps(report))
    replays = unified23["replays"]
    assert sorted(r["runner"] for r in report) == sorted(RUNNERS)
    for r in report:
        assert r["replays"] == replays and r["compared"] == replays, r
        assert r["tables"] > 0 and r["table_mismatches"] == 0, r  # seq_lens_k and pages
        assert r["max_rel_err"] < 1e-9, r  # float64 reference: only rounding
        assert r["stale_rel_err"] > 0.1, r  # the control: stale metadata shows
        assert r["padded"] > 0, r
        if r["runner"] == RUNNERS[0]:
            assert set(r["paths"]) == {"execute", "load_batch, execute"}, r
        reruns = replays + len(r["capture_bs"]) if device == "cpu" else 0
        assert r["addresses_checked"] == reruns, r  # CPU: the capture's storages


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_dcp_ranks_read_the_translated_pages(unified23, tree):
    report, _ = unified23["dcp"][tree]
    print(json.dumps(report))
    replays = unified23["dcp_replays"]
    assert sorted((r["rank"], r["phase"]) for r in report) == sorted(
        (rank, phase) for rank in range(2) for phase in TARGET_PHASES
    )
    for r in report:
        assert r["calls"] == replays and r["mismatches"] == 0, r
        assert r["stale_caught"] == MAX_BS, r  # the comparison sees a stale replay
        # The allocator moved live pages after the captures, some replays read
        # them, and the table is still the one (and the storage) captured.
        assert r["moved_pages"] > 0 and r["moved_reads"] > 0, r
        assert r["v2p_stable"], r


def test_trees_hand_the_kernel_the_same_translated_dcp_metadata(unified23):
    base, patched = unified23["dcp"]["base"][1], unified23["dcp"]["patched"][1]
    assert_same_kernel_calls(base, patched)
