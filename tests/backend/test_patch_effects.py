"""What the series changes, measured by counting launches and allocations.

Each test states a property the patched tree must have; on the base tree the
same test is a strict xfail, so this file proves both that the series changes
the behaviour and that the base really lacked it. Expected values come from
the scenario's setup, not from either tree's output.
"""

from __future__ import annotations

import pytest

from mla_harness.probe import PHASES
from mla_harness.records import Replay

ON_BOTH = [
    pytest.param(
        "base", marks=pytest.mark.xfail(strict=True, reason="the base tree lacks this change")
    ),
    "patched",
]
INT32 = 4


def _launches(call: Replay):
    """Launches of one graph replay: the replay call, plus the captured
    forward's attention layers (which run inside the graph)."""
    return call.counts.launches + sum(c.launches for c in call.forward_counts)


def _each(results, plan, tree, phase):
    for scenario, out in zip(plan["scenarios"], results[tree].scenarios, strict=True):
        for call in out.phases[phase].calls:
            yield scenario["setup"], call


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_replay_skips_common_template(results, plan, tree):
    """0001: no generate_draft_decode_kv_indices; one block-table launch per step at most."""
    for setup, call in _each(results, plan, tree, "draft_graph"):
        assert "generate_draft_decode_kv_indices" not in call.counts.triton
        assert _launches(call) <= setup["steps"] - 1


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_eager_allocates_no_kv_indices(results, plan, tree):
    """0001: no per-call (steps, bs * topk * max_context_len) int32 buffer."""
    for setup, call in _each(results, plan, tree, "draft_eager"):
        bs = len(call.views[0].seq_lens)
        kv_indices_bytes = setup["steps"] * bs * 1 * setup["context_len"] * INT32
        counts = call.counts
        assert "generate_draft_decode_kv_indices" not in counts.triton
        assert counts.alloc_bytes < kv_indices_bytes
        assert "clone" not in counts.torch


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", ["extend_v1_graph", "extend_v2_graph"])
def test_draft_extend_replay_is_two_launches(results, plan, tree, phase):
    """0002: seq_lens_k copy + block table; no cu_seqlens_q / seq_lens_q refill."""
    for _, call in _each(results, plan, tree, phase):
        assert _launches(call) <= 2
        assert call.counts.allocs == 0
        assert not {"arange", "fill_", "sub"} & set(call.counts.torch)


def _block_table_bytes(setup):
    """(max_bs, padded pages) int32: TRT-LLM wants pages % (128 / page) == 0 and
    the Triton kernel whole 4096-token blocks, so pages round up to their lcm."""
    import math

    page = setup["page_size"]
    pages = -(-setup["context_len"] // page)
    multiple = math.lcm(128 // page, 4096 // page)
    return setup["max_bs"] * (-(-pages // multiple) * multiple) * INT32


def _states(results, plan, tree, phase):
    for scenario, out in zip(plan["scenarios"], results[tree].scenarios, strict=True):
        yield scenario["setup"], out.phases[phase].graph


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize(
    "phase", ["draft_graph", "verify_graph", "extend_v1_graph", "decode_graph"]
)
def test_graph_state_is_one_block_table(results, plan, tree, phase):
    """0006: init_cuda_graph_state allocates the block table and the (max_bs,)
    int32 seq_lens_k buffer (0005) per backend, nothing else; the multi-step
    draft's steps (steps - 1 backends) share one block table."""
    for setup, graph in _states(results, plan, tree, phase):
        backends = setup["steps"] - 1 if phase == "draft_graph" else 1
        seq_lens_k_bytes = backends * setup["max_bs"] * INT32
        assert graph.state.alloc_bytes == _block_table_bytes(setup) + seq_lens_k_bytes


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_steps_share_one_block_table(results, plan, tree):
    """0006: every step's captured graph reads the same block table."""
    for _, graph in _states(results, plan, tree, "draft_graph"):
        for per_step in graph.capture_ptrs.values():
            assert len({p["block_kv_indices"] for p in per_step}) == 1


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_metadata_is_one_launch_per_iteration(results, plan, tree):
    """0006: the shared table is refreshed once per draft iteration (graph
    replay), and built once (fill + kernel) on the eager path."""
    for _, call in _each(results, plan, tree, "draft_graph"):
        assert _launches(call) == 1
    for _, call in _each(results, plan, tree, "draft_eager"):
        assert call.counts.launches <= 2


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", ["extend_v1_eager", "extend_v2_eager"])
def test_eager_draft_extend_skips_unread_cu_seqlens_q(results, plan, tree, phase):
    """0006: forward_extend pads with its own cumsum; metadata.cu_seqlens_q is unread."""
    for _, call in _each(results, plan, tree, phase):
        assert not {"cumsum", "constant_pad_nd"} & set(call.counts.torch)


GRAPH_PHASES = [p for p in PHASES if p.endswith("_graph")]


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", GRAPH_PHASES)
def test_replay_launches_nothing(results, plan, tree, phase):
    """0007: init_forward_metadata_replay_cuda_graph leaves the host idle."""
    for _, call in _each(results, plan, tree, phase):
        assert call.counts.launches == 0
        assert call.counts.allocs == 0
        assert call.counts.syncs == 0


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", GRAPH_PHASES)
def test_captured_forward_rebuilds_once(results, plan, tree, phase):
    """0007: the captured forward rebuilds seq_lens_k and the block table in
    one fused launch at its first attention layer (the first draft step's, for
    the shared draft table), and no later layer or step launches anything."""
    for _, call in _each(results, plan, tree, phase):
        first, *rest = call.forward_counts
        assert first.launches == 1
        assert first.triton == {"fill_block_kv_indices_kernel": 1}
        assert all(c.launches == 0 for c in rest)
