"""v0.5.23 and the patched v0.5.23 give the attention kernel what the oracle says.

For the generated scenarios and the named cases (``conftest.results23``), on
every phase v0.5.23 has (draft, decode, verify and draft extend v2; no
DRAFT_EXTEND v1), on the eager path (``init_forward_metadata``) and on the
graph path (capture per batch size: ``init_forward_metadata_out_graph(fb,
in_capture=True)`` then the recorded ``init_forward_metadata_in_graph``;
replays: the out-of-graph call on the runner's view, then the graph's in-graph
step, then the captured forward up to the kernel; eagerly, the forward on the
same batch after the metadata call):

- the differential: what the kernel receives (query token in each slot, KV
  lengths, the block-table prefix each row reads, ``max_seq_len_k``) is the
  same on both trees;
- the contract: on each tree, after every replay, the captured buffers are
  where they were captured and hold the oracle's values, computed from the
  scenario's ``req_to_token`` alone (``visible.expected_block_prefix``), and
  each eager call's metadata does too.

Fewer generated scenarios than v0.5.12's 40 by default (``conftest``): the
whole directory must stay near 6 minutes on a 2-core CPU; ``--scenarios N``
runs more.
"""

from __future__ import annotations

import numpy as np
import pytest

from mla_harness.probe import phase_names
from mla_harness.standin import Setup
from mla_harness.visible import KernelView, expected_block_prefix

from .oracle23 import check_replay, kernel_lens, phase_row

pytestmark = pytest.mark.base("v0.5.23")

PHASES = phase_names("v0.5.23")
GRAPH_PHASES = tuple(p for p in PHASES if p.endswith("_graph"))
EAGER_PHASES = tuple(p for p in PHASES if p.endswith("_eager"))
TREES = ("base", "patched")


def _assert_same_view(base: KernelView, patched: KernelView, where: str):
    assert np.array_equal(base.seq_lens, patched.seq_lens), f"{where}: kernel seq_lens differ"
    assert base.max_seq_len_k == patched.max_seq_len_k, f"{where}: max_seq_len_k differs"
    for row, (b, p) in enumerate(zip(base.block_prefix, patched.block_prefix, strict=True)):
        assert np.array_equal(b, p), f"{where}: block table row {row} differs"
    assert (base.query_tokens is None) == (patched.query_tokens is None), where
    if base.query_tokens is not None:
        assert np.array_equal(base.query_tokens, patched.query_tokens), f"{where}: query differs"


@pytest.mark.parametrize("phase", PHASES)
def test_kernel_visible_metadata_identical(results23, plan23, phase):
    compared = 0
    for scenario, base, patched in zip(
        plan23["scenarios"],
        results23["base"].scenarios,
        results23["patched"].scenarios,
        strict=True,
    ):
        base_calls, patched_calls = base.phases[phase].calls, patched.phases[phase].calls
        assert len(base_calls) == len(patched_calls) == len(scenario["batches"])
        for call, (b, p) in enumerate(zip(base_calls, patched_calls, strict=True)):
            b_views = b.views + getattr(b, "forward_views", [])
            p_views = p.views + getattr(p, "forward_views", [])
            assert len(b_views) == len(p_views) >= 1
            for step, (bv, pv) in enumerate(zip(b_views, p_views, strict=True)):
                _assert_same_view(bv, pv, f"{scenario['name']} {phase} call {call} view {step}")
                compared += 1
    assert compared >= len(plan23["scenarios"])


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("phase", GRAPH_PHASES)
def test_replays_give_the_kernel_the_oracle(results23, plan23, tree, phase):
    replays = 0
    for scenario, out in zip(plan23["scenarios"], results23[tree].scenarios, strict=True):
        record = out.phases[phase]
        for call in record.calls:
            check_replay(scenario, out.req_to_token, phase, call, record.graph.capture_ptrs)
            replays += 1
    assert replays == sum(len(s["batches"]) for s in plan23["scenarios"])


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("phase", EAGER_PHASES)
def test_eager_metadata_matches_oracle(results23, plan23, tree, phase):
    """Each eager ``init_forward_metadata``: the metadata it leaves, and what the
    kernel then receives at every attention layer of the forward on the same
    batch (the query in token order), hold the oracle's lengths, table
    prefixes and ``max_seq_len_k`` (the longest length)."""
    row = phase_row(phase)
    for scenario, out in zip(plan23["scenarios"], results23[tree].scenarios, strict=True):
        setup = scenario["setup"]
        q_len = row.tokens(Setup(**setup))
        layers = len(row.layers) * (setup["steps"] - 1 if row.multi_step else 1)
        for batch, call in zip(scenario["batches"], out.phases[phase].calls, strict=True):
            lens = kernel_lens(phase, batch["seq_lens"], setup)
            want = expected_block_prefix(
                out.req_to_token, batch["req_pool_indices"], lens, setup["page_size"]
            )
            where = f"{scenario['name']} {phase}"
            assert len(call.forward_views) == layers, where
            for view in call.views + call.forward_views:
                assert np.array_equal(view.seq_lens, lens), where
                assert view.max_seq_len_k == lens.max(), where
                for got, exp in zip(view.block_prefix, want, strict=True):
                    assert np.array_equal(got, exp), where
            tokens = np.arange(1, len(lens) * q_len + 1).reshape(len(lens), q_len)
            for view in call.forward_views:
                assert np.array_equal(view.query_tokens, tokens), f"{where}: query slots"
