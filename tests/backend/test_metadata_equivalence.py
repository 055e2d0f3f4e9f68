"""Base and patched trees give the attention kernel identical metadata, on every base.

For every generated scenario and named case (``conftest.results``) and every
phase the base has (draft, decode, verify, draft extend v2, and v0.5.12's
draft extend v1), on the eager path (``init_forward_metadata``; where the
base's plan runs it, the forward on the same batch after it) and on the graph
path (capture per batch size, then replays with new inputs, each followed by
the graph's in-graph step where the base has one and the captured forward's
attention layers up to the kernel), what the kernel receives on the patched
tree equals the base tree's: the block-table prefix it reads (pages covering
its ``seq_lens``), those ``seq_lens`` (``seq_lens_k`` in verify / draft
extend), ``max_seq_len_k`` and, where a forward ran, the query token in each
slot, except what a fix patch changes on purpose (``FIXED``). Nothing else is
compared: see ``mla_harness.visible``.
"""

from __future__ import annotations

import numpy as np
import pytest
from suite import per_base

from mla_harness.probe import phase_names
from mla_harness.visible import KernelView

# What a fix patch changes on purpose, per base and phase: not compared here,
# but checked on both trees against the oracle (test_graph_contract) and on
# named cases, base as a strict xfail (v0_5_12/test_fix_patches).
FIXED = {
    # 0004: the eager draft-extend table and max_seq_len_k cover seq_lens_k;
    # v0.5.12 truncates rows that span more pages than max(seq_lens) needs.
    ("v0.5.12", "extend_v1_eager"): ("max_seq_len_k", "block_prefix"),
}


def _assert_same_view(base: KernelView, patched: KernelView, where, fixed=()):
    assert np.array_equal(base.seq_lens, patched.seq_lens), f"{where}: kernel seq_lens differ"
    if "max_seq_len_k" not in fixed:
        assert base.max_seq_len_k == patched.max_seq_len_k, f"{where}: max_seq_len_k differs"
    if "block_prefix" not in fixed:
        for row, (b, p) in enumerate(zip(base.block_prefix, patched.block_prefix, strict=True)):
            assert np.array_equal(b, p), f"{where}: block table row {row} differs"
    assert (base.query_tokens is None) == (patched.query_tokens is None), where
    if base.query_tokens is not None:
        assert np.array_equal(base.query_tokens, patched.query_tokens), f"{where}: query differs"


@pytest.mark.parametrize(("base", "phase"), per_base(phase_names))
def test_kernel_visible_metadata_identical(results, plan, base, phase):
    compared = 0
    for scenario, b_out, p_out in zip(
        plan["scenarios"],
        results["base"].scenarios,
        results["patched"].scenarios,
        strict=True,
    ):
        base_calls, patched_calls = b_out.phases[phase].calls, p_out.phases[phase].calls
        assert len(base_calls) == len(patched_calls) == len(scenario["batches"])
        for call, (b, p) in enumerate(zip(base_calls, patched_calls, strict=True)):
            b_views = b.views + getattr(b, "forward_views", [])
            p_views = p.views + getattr(p, "forward_views", [])
            assert len(b_views) == len(p_views) >= 1
            for step, (bv, pv) in enumerate(zip(b_views, p_views, strict=True)):
                where = f"{scenario['name']} {phase} call {call} view {step}"
                _assert_same_view(bv, pv, where, FIXED.get((base, phase), ()))
                compared += 1
    assert compared >= len(plan["scenarios"])
