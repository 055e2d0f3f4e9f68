"""What each base's series changes, measured by counting launches and allocations.

Each test states a property the patched tree must have; on the base tree the
same test is a strict xfail, so this file proves both that the series changes
the behaviour and that the base really lacked it. Expected values come from
the scenario's setup (shapes, dtypes), never from either tree's output. The
first tests hold on every base (the patch that brings them differs per
series: named in each docstring); the rest test one series' patch.
"""

from __future__ import annotations

import math

import pytest
from suite import graph_phases, per_base

from mla_harness.records import Replay

INT32, BOOL = 4, 1


def on_both(base: str) -> list:
    """The base tree (strict xfail) and the patched tree, for ``base``."""
    reason = f"{base} lacks this change"
    return [pytest.param("base", marks=pytest.mark.xfail(strict=True, reason=reason)), "patched"]


def _per_tree(phases=None):
    """(base, tree[, phase]) for every base; ``phases(base)``: the phases there."""
    if phases is None:
        return per_base(on_both)
    return per_base(
        lambda base: [
            pytest.param(p.values[0], phase, marks=p.marks, id=f"{p.values[0]}-{phase}")
            if isinstance(p, type(pytest.param(None)))
            else (p, phase)
            for phase in phases(base)
            for p in on_both(base)
        ]
    )


def _each(results, plan, tree, phase):
    for scenario, out in zip(plan["scenarios"], results[tree].scenarios, strict=True):
        for call in out.phases[phase].calls:
            yield scenario["setup"], call


def _states(results, plan, tree, phase):
    for scenario, out in zip(plan["scenarios"], results[tree].scenarios, strict=True):
        yield scenario["setup"], out.phases[phase].graph


def _launches(call: Replay):
    """Launches of one graph replay: the replay call, plus the captured
    forward's attention layers (which run inside the graph)."""
    return call.counts.launches + sum(c.launches for c in call.forward_counts)


def _block_table_bytes(setup) -> int:
    """(max_bs, padded pages) int32: TRT-LLM wants pages % (128 / page) == 0 and
    the Triton kernel whole 4096-token blocks, so pages round up to their lcm."""
    page = setup["page_size"]
    pages = -(-setup["context_len"] // page)
    multiple = math.lcm(128 // page, 4096 // page)
    return setup["max_bs"] * (-(-pages // multiple) * multiple) * INT32


# --- every base ---------------------------------------------------------------


@pytest.mark.parametrize(("base", "tree", "phase"), _per_tree(graph_phases))
def test_replay_call_launches_nothing(results, plan, base, tree, phase):
    """v0.5.12 0007 (``init_forward_metadata_replay_cuda_graph``), v0.5.23 0008
    (``init_forward_metadata_out_graph`` on a replay view; v0.5.23: 2-4
    launches): the replay call leaves the host idle; the graph rebuilds the
    metadata."""
    for _, call in _each(results, plan, tree, phase):
        assert call.counts.launches == 0
        assert call.counts.allocs == 0
        assert call.counts.syncs == 0


# Where each series makes the graph rebuild its metadata, and with which
# kernel: v0.5.12 0007, in the captured forward's first attention layer (the
# first draft step's, for the shared draft table), its fused kernel; v0.5.23
# 0008, in the in-graph step every runner records ahead of its forward,
# v0.5.23's own table kernel with the lengths fused in (the draft: once for
# all steps), allocating nothing.
REBUILD = {
    "v0.5.12": ("forward", "fill_block_kv_indices_kernel"),
    "v0.5.23": ("in_graph", "create_flashmla_kv_indices_triton"),
}


@pytest.mark.parametrize(("base", "tree", "phase"), _per_tree(graph_phases))
def test_graph_rebuilds_metadata_in_one_launch(results, plan, base, tree, phase):
    """One launch rebuilds seq_lens_k and the block table (``REBUILD``); no
    later layer or step of the captured forward launches anything."""
    where, kernel = REBUILD[base]
    for _, call in _each(results, plan, tree, phase):
        if where == "in_graph":
            step, later = call.in_graph_counts, call.forward_counts
            assert step.allocs == 0 and step.syncs == 0
        else:
            step, later = call.forward_counts[0], call.forward_counts[1:]
        assert step.launches == 1
        assert step.triton == {kernel: 1}
        assert all(c.launches == 0 for c in later)


def _expected_state_bytes(base: str, phase: str, setup) -> int:
    """``init_cuda_graph_state``: one block table and the (max_bs,) int32
    seq_lens_k buffer per backend. v0.5.12 (0005 + 0006): the multi-step
    draft's steps (steps - 1 backends) share one block table, each its own
    seq_lens_k. v0.5.23 (0001 + 0006 + 0007 + 0008): the draft, its first
    step's only; a global_seq_lens_k buffer only under DCP, which these
    scenarios do not set; the target backend (decode, verify) keeps its
    tree-mask buffer (QLEN_ONLY: draft_tokens^2 bools per request), which the
    EAGLE worker writes; no unpad buffer (0006: ragged verify allocates its
    output)."""
    max_bs, draft_tokens = setup["max_bs"], setup["draft_tokens"]
    if base == "v0.5.12":
        backends = setup["steps"] - 1 if phase == "draft_graph" else 1
        return _block_table_bytes(setup) + backends * max_bs * INT32
    total = _block_table_bytes(setup) + max_bs * INT32
    if phase in ("decode_graph", "verify_graph"):
        total += max_bs * draft_tokens * draft_tokens * BOOL
    return total


# The graph phases whose state each series sets (v0.5.12's draft extend v2
# shares its runner's state with v1, tested there).
STATE_PHASES = {
    "v0.5.12": ("draft_graph", "verify_graph", "extend_v1_graph", "decode_graph"),
    "v0.5.23": ("draft_graph", "decode_graph", "verify_graph", "extend_v2_graph"),
}


@pytest.mark.parametrize(("base", "tree", "phase"), _per_tree(lambda b: STATE_PHASES[b]))
def test_graph_state_is_what_captured_graphs_read(results, plan, base, tree, phase):
    for setup, graph in _states(results, plan, tree, phase):
        assert graph.state.alloc_bytes == _expected_state_bytes(base, phase, setup)


# What every draft step's captured graph shares (one refresh per iteration):
# v0.5.12 0006, the block table; v0.5.23 0007, all its metadata (block table
# and seq_lens_k).
SHARED_BY_DRAFT_STEPS = {"v0.5.12": ("block_kv_indices",), "v0.5.23": None}


@pytest.mark.parametrize(("base", "tree"), _per_tree())
def test_draft_steps_share_one_metadata(results, plan, base, tree):
    fields = SHARED_BY_DRAFT_STEPS[base]
    for _, graph in _states(results, plan, tree, "draft_graph"):
        for per_step in graph.capture_ptrs.values():
            if fields is None:
                assert all(ptrs == per_step[0] for ptrs in per_step)
            for name in fields or ():
                assert len({p[name] for p in per_step}) == 1


# --- v0.5.12's series ---------------------------------------------------------

V0512 = pytest.mark.base("v0.5.12")
ON_BOTH_12 = on_both("v0.5.12")


@V0512
@pytest.mark.parametrize("tree", ON_BOTH_12)
def test_draft_replay_skips_common_template(results, plan, tree):
    """0001: no generate_draft_decode_kv_indices; one block-table launch per step at most."""
    for setup, call in _each(results, plan, tree, "draft_graph"):
        assert "generate_draft_decode_kv_indices" not in call.counts.triton
        assert _launches(call) <= setup["steps"] - 1


@V0512
@pytest.mark.parametrize("tree", ON_BOTH_12)
def test_draft_eager_allocates_no_kv_indices(results, plan, tree):
    """0001: no per-call (steps, bs * topk * max_context_len) int32 buffer."""
    for setup, call in _each(results, plan, tree, "draft_eager"):
        bs = len(call.views[0].seq_lens)
        kv_indices_bytes = setup["steps"] * bs * 1 * setup["context_len"] * INT32
        counts = call.counts
        assert "generate_draft_decode_kv_indices" not in counts.triton
        assert counts.alloc_bytes < kv_indices_bytes
        assert "clone" not in counts.torch


@V0512
@pytest.mark.parametrize("tree", ON_BOTH_12)
@pytest.mark.parametrize("phase", ["extend_v1_graph", "extend_v2_graph"])
def test_draft_extend_replay_is_two_launches(results, plan, tree, phase):
    """0002: seq_lens_k copy + block table; no cu_seqlens_q / seq_lens_q refill."""
    for _, call in _each(results, plan, tree, phase):
        assert _launches(call) <= 2
        assert call.counts.allocs == 0
        assert not {"arange", "fill_", "sub"} & set(call.counts.torch)


@V0512
@pytest.mark.parametrize("tree", ON_BOTH_12)
def test_draft_metadata_is_one_launch_per_iteration(results, plan, tree):
    """0006: the shared table is refreshed once per draft iteration (graph
    replay), and built once (fill + kernel) on the eager path."""
    for _, call in _each(results, plan, tree, "draft_graph"):
        assert _launches(call) == 1
    for _, call in _each(results, plan, tree, "draft_eager"):
        assert call.counts.launches <= 2


@V0512
@pytest.mark.parametrize("tree", ON_BOTH_12)
@pytest.mark.parametrize("phase", ["extend_v1_eager", "extend_v2_eager"])
def test_eager_draft_extend_skips_unread_cu_seqlens_q(results, plan, tree, phase):
    """0006: forward_extend pads with its own cumsum; metadata.cu_seqlens_q is unread."""
    for _, call in _each(results, plan, tree, phase):
        assert not {"cumsum", "constant_pad_nd"} & set(call.counts.torch)


# --- v0.5.23's series ---------------------------------------------------------


@pytest.mark.base("v0.5.23")
@pytest.mark.parametrize("tree", on_both("v0.5.23"))
def test_eager_draft_builds_one_steps_metadata(results, plan, tree):
    """0007: the eager multi-step draft init launches what one DECODE backend's
    init launches for the same batch (v0.5.23: one build per step). Only
    scenarios with more than one step backend (steps > 2) can tell."""
    told = 0
    for scenario, out in zip(plan["scenarios"], results[tree].scenarios, strict=True):
        if scenario["setup"]["steps"] <= 2:
            continue
        draft, decode = out.phases["draft_eager"].calls, out.phases["decode_eager"].calls
        for d, single in zip(draft, decode, strict=True):
            assert d.counts.launches == single.counts.launches
            told += 1
    assert told
