"""What the series changes, measured by counting launches and allocations.

Each test states a property the patched tree must have; on the base tree the
same test is a strict xfail, so this file proves both that the series changes
the behaviour and that the base really lacked it. Expected values come from
the scenario's setup, not from either tree's output.
"""

from __future__ import annotations

import pytest

ON_BOTH = [
    pytest.param("base", marks=pytest.mark.xfail(strict=True, reason="the base tree lacks this change")),
    "patched",
]
INT32 = 4


def _replays(out, phase):
    return [r for r in out[phase] if "counts" in r and "views" in r]


def _each(results, plan, tree, phase):
    for scenario, out in zip(plan["scenarios"], results[tree]["scenarios"]):
        for call in _replays(out, phase):
            yield scenario["setup"], call


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_replay_skips_common_template(results, plan, tree):
    """0001: no generate_draft_decode_kv_indices; one block-table launch per step at most."""
    for setup, call in _each(results, plan, tree, "draft_graph"):
        counts = call["counts"]
        assert "generate_draft_decode_kv_indices" not in counts["triton"]
        assert counts["launches"] <= setup["steps"] - 1


@pytest.mark.parametrize("tree", ON_BOTH)
def test_draft_eager_allocates_no_kv_indices(results, plan, tree):
    """0001: no per-call (steps, bs * topk * max_context_len) int32 buffer."""
    for setup, call in _each(results, plan, tree, "draft_eager"):
        bs = len(call["views"][0]["seq_lens"])
        kv_indices_bytes = setup["steps"] * bs * 1 * setup["context_len"] * INT32
        counts = call["counts"]
        assert "generate_draft_decode_kv_indices" not in counts["triton"]
        assert counts["alloc_bytes"] < kv_indices_bytes
        assert "clone" not in counts["torch"]


@pytest.mark.parametrize("tree", ON_BOTH)
@pytest.mark.parametrize("phase", ["extend_v1_graph", "extend_v2_graph"])
def test_draft_extend_replay_is_two_launches(results, plan, tree, phase):
    """0002: seq_lens_k copy + block table; no cu_seqlens_q / seq_lens_q refill."""
    for _, call in _each(results, plan, tree, phase):
        counts = call["counts"]
        assert counts["launches"] <= 2
        assert counts["allocs"] == 0
        assert not {"arange", "fill_", "sub"} & set(counts["torch"])


@pytest.mark.parametrize("tree", ON_BOTH)
def test_target_verify_replay_has_no_cast(results, plan, tree):
    """0002: copy_ into the int32 seq_lens_k buffer casts; no separate .to(int32)."""
    for _, call in _each(results, plan, tree, "verify_graph"):
        counts = call["counts"]
        assert "_to_copy" not in counts["torch"]
        assert counts["launches"] <= 3
