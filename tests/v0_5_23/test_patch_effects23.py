"""What patches/v0.5.23 changes, counted: launches, allocations, shared buffers.

Each test states a property of the patched tree; on the base tree (unpatched
v0.5.23) the same test is a strict xfail, which proves the base lacked it.
Expected values come from the scenario's setup (shapes, dtypes), never from
either tree's output.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.base("v0.5.23")

ON_BOTH = [
    pytest.param("base", marks=pytest.mark.xfail(strict=True, reason="v0.5.23 lacks this change")),
    "patched",
]
REPLAYED = ["draft_graph", "decode_graph", "verify_graph", "extend_v2_graph"]
INT32, BOOL = 4, 1


def _replays(results, plan, tree, phase):
    for scenario, out in zip(plan["scenarios"], results[tree].scenarios, strict=True):
        for call in out.phases[phase].calls:
            yield scenario["setup"], call


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", REPLAYED)
def test_replay_call_launches_nothing(results23, plan23, tree, phase):
    """0006: ``init_forward_metadata_out_graph`` on a replay view leaves the
    host idle (v0.5.23: 2-4 launches); the graph rebuilds the metadata."""
    for _, call in _replays(results23, plan23, tree, phase):
        assert call.counts.launches == 0
        assert call.counts.allocs == 0
        assert call.counts.syncs == 0


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", REPLAYED)
def test_graph_rebuilds_metadata_in_one_launch(results23, plan23, tree, phase):
    """0006: the in-graph step every runner records ahead of its forward is one
    launch of v0.5.23's own table kernel (lengths fused in), allocating
    nothing; for the draft, once for all steps. The captured forward's
    attention layers launch nothing before the kernel."""
    for _, call in _replays(results23, plan23, tree, phase):
        step = call.in_graph_counts
        assert step.triton == {"create_flashmla_kv_indices_triton": 1}
        assert step.launches == 1 and step.allocs == 0 and step.syncs == 0
        assert all(c.launches == 0 for c in call.forward_counts)


def _block_table_bytes(setup) -> int:
    """(max_bs, padded pages) int32: TRT-LLM wants pages % (128 / page) == 0 and
    the Triton kernel whole 4096-token blocks, so pages round up to their lcm."""
    page = setup["page_size"]
    pages = -(-setup["context_len"] // page)
    multiple = math.lcm(128 // page, 4096 // page)
    return setup["max_bs"] * (-(-pages // multiple) * multiple) * INT32


def _expected_state_bytes(phase: str, setup) -> int:
    """0001 + 0004 + 0005 + 0006: one block table and the (max_bs,) int32
    seq_lens_k buffer per backend (the draft: its first step only; a
    global_seq_lens_k buffer only under DCP, which these scenarios do not
    set); the target backend (decode, verify) keeps its tree-mask buffer
    (QLEN_ONLY: draft_tokens^2 bools per request), which the EAGLE worker
    writes. No unpad buffer (0004: ragged verify allocates its output)."""
    max_bs, draft_tokens = setup["max_bs"], setup["draft_tokens"]
    total = _block_table_bytes(setup) + max_bs * INT32
    if phase in ("decode_graph", "verify_graph"):
        total += max_bs * draft_tokens * draft_tokens * BOOL
    return total


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", REPLAYED)
def test_graph_state_is_what_captured_graphs_read(results23, plan23, tree, phase):
    for scenario, out in zip(plan23["scenarios"], results23[tree].scenarios, strict=True):
        setup = scenario["setup"]
        state = out.phases[phase].graph.state
        assert state.alloc_bytes == _expected_state_bytes(phase, setup), scenario["name"]


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_steps_share_one_metadata(results23, plan23, tree):
    """0005: every draft step's captured graph reads the same block table and
    seq_lens_k (one refresh per iteration)."""
    for out in results23[tree].scenarios:
        for per_step in out.phases["draft_graph"].graph.capture_ptrs.values():
            assert all(ptrs == per_step[0] for ptrs in per_step)


@pytest.mark.parametrize("tree", ON_BOTH)
def test_eager_draft_builds_one_steps_metadata(results23, plan23, tree):
    """0005: the eager multi-step draft init launches what one DECODE backend's
    init launches for the same batch (v0.5.23: one build per step). Only
    scenarios with more than one step backend (steps > 2) can tell."""
    told = 0
    for scenario, out in zip(plan23["scenarios"], results23[tree].scenarios, strict=True):
        if scenario["setup"]["steps"] <= 2:
            continue
        draft, decode = out.phases["draft_eager"].calls, out.phases["decode_eager"].calls
        for d, single in zip(draft, decode, strict=True):
            assert d.counts.launches == single.counts.launches
            told += 1
    assert told
