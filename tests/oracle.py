"""The oracle of the shared tests: from a scenario's inputs and its
``req_to_token`` alone, what the kernel must be given (never either tree's
output)."""

from __future__ import annotations

import numpy as np

from mla_harness.phases import BY_NAME
from mla_harness.standin import Setup
from mla_harness.visible import expected_block_prefix


def phase_row(name: str):
    return BY_NAME[name.rsplit("_", 1)[0]]


def kernel_lens(phase: str, seq_lens, setup) -> np.ndarray:
    """Verify's kernel attends over the draft tokens too; the rest over
    seq_lens (the graphs', and eager decode and draft)."""
    offset = setup["draft_tokens"] if phase.startswith("verify") else 0
    return np.asarray(seq_lens, dtype=np.int64) + offset


def eager_kernel_lens(phase: str, batch, setup) -> np.ndarray:
    """An eager call's kernel lengths: draft extend attends over
    ``seq_len - extend + max extend`` (NOTE(draft_extend seq_len handling);
    v2: every request extends by the draft tokens, so that is seq_len)."""
    seq_lens = np.asarray(batch["seq_lens"], dtype=np.int64)
    if not phase.startswith("extend"):
        return kernel_lens(phase, seq_lens, setup)
    fixed = [setup["draft_tokens"]] * len(seq_lens)
    ext = np.asarray(batch["extend_lens"] if phase == "extend_v1_eager" else fixed)
    return seq_lens - ext + ext.max()


def replay_oracle(scenario, req_to_token, phase: str, call):
    """The kernel lengths and per-row block-table prefixes of one replay, from
    the static inputs the replay copied in (padded rows: the fill length and
    whatever request row the buffer held)."""
    setup = scenario["setup"]
    lens = kernel_lens(phase, call.seq_lens, setup)
    want = expected_block_prefix(req_to_token, call.req_pool_indices, lens, setup["page_size"])
    return lens, want


def check_graph_view(view, lens, want, context_len: int, name: str) -> None:
    """A captured graph's kernel view: the oracle's lengths and table prefixes,
    and ``max_seq_len_k`` the context (graphs capture the full table width)."""
    assert np.array_equal(view.seq_lens, lens), f"{name}: kernel seq_lens"
    assert view.max_seq_len_k == context_len, f"{name}: max_seq_len_k"
    for row, (got, exp) in enumerate(zip(view.block_prefix, want, strict=True)):
        assert np.array_equal(got, exp), f"{name}: block table row {row}"


def check_replay(scenario, req_to_token, phase: str, call, captured_ptrs):
    """One replay of ``phase``: buffers where captured; each view the kernel
    got (per attention layer) is the oracle's (``check_graph_view``) and its
    query is the batch's tokens in order (slot (b, i): token b * q_len + i)."""
    setup = scenario["setup"]
    name = f"{scenario['name']} {phase} bs {call.bs}"
    assert call.ptrs == captured_ptrs[call.bs], f"{name}: buffer moved"
    lens, want = replay_oracle(scenario, req_to_token, phase, call)
    q_len = phase_row(phase).tokens(Setup(**setup))
    tokens = np.arange(1, call.bs * q_len + 1).reshape(call.bs, q_len)
    for view in call.views:
        check_graph_view(view, lens, want, setup["context_len"], name)
        assert np.array_equal(view.query_tokens, tokens), f"{name}: query slots"


def check_graph_contract(plan, result, phase: str) -> None:
    """Every replay of ``phase`` in ``result`` (one tree's probe of ``plan``):
    buffers where captured, values of the oracle (``check_replay``)."""
    replays = 0
    for scenario, out in zip(plan["scenarios"], result.scenarios, strict=True):
        record = out.phases[phase]
        for call in record.calls:
            check_replay(scenario, out.req_to_token, phase, call, record.graph.capture_ptrs)
            replays += 1
    assert replays == sum(len(s["batches"]) for s in plan["scenarios"])


def check_eager_oracle(plan, result, phase: str, table_sized_by_padded_lens=True) -> None:
    """Each eager ``init_forward_metadata`` of ``phase``: the metadata it leaves
    and, where the plan runs the forward (``eager_forward``), what the kernel
    receives at every attention layer of it (the query in token order) hold
    the oracle's lengths, table prefixes and ``max_seq_len_k`` (the longest
    length). Where the tree sizes the eager draft-extend (v1) table by
    max(seq_lens), not the padded lengths (v0.5.12 before its 0004), only the
    lengths are checked there."""
    row = phase_row(phase)
    lengths_only = phase == "extend_v1_eager" and not table_sized_by_padded_lens
    for scenario, out in zip(plan["scenarios"], result.scenarios, strict=True):
        setup = scenario["setup"]
        q_len = row.tokens(Setup(**setup))
        layers = len(row.layers) * (setup["steps"] - 1 if row.multi_step else 1)
        for batch, call in zip(scenario["batches"], out.phases[phase].calls, strict=True):
            lens = eager_kernel_lens(phase, batch, setup)
            want = expected_block_prefix(
                out.req_to_token, batch["req_pool_indices"], lens, setup["page_size"]
            )
            where = f"{scenario['name']} {phase}"
            assert len(call.forward_views) == (layers if plan.get("eager_forward") else 0), where
            for view in call.views + call.forward_views:
                assert np.array_equal(view.seq_lens, lens), where
                if lengths_only:
                    continue
                assert view.max_seq_len_k == lens.max(), where
                for got, exp in zip(view.block_prefix, want, strict=True):
                    assert np.array_equal(got, exp), where
            tokens = np.arange(1, len(lens) * q_len + 1).reshape(len(lens), q_len)
            for view in call.forward_views:
                assert np.array_equal(view.query_tokens, tokens), f"{where}: query slots"


def assert_same_kernel_calls(base, patched) -> None:
    """Two trees' per-rank records of what the kernel was handed (a DCP
    check's): the same calls in the same order, every field equal."""
    compared = 0
    for rank_b, rank_p in zip(base, patched, strict=True):
        for call_b, call_p in zip(rank_b, rank_p, strict=True):
            assert call_b.keys() == call_p.keys()
            for key, value in call_b.items():
                if isinstance(value, np.ndarray):
                    assert np.array_equal(value, call_p[key]), key
                else:
                    assert value == call_p[key], key
            compared += 1
    assert compared > 0
