"""The oracle of the v0.5.23 tests: from a scenario's inputs and its
``req_to_token`` alone, what the kernel must be given."""

from __future__ import annotations

import numpy as np

from mla_harness.phases import BY_NAME
from mla_harness.standin import Setup
from mla_harness.visible import expected_block_prefix


def phase_row(name: str):
    return BY_NAME[name.rsplit("_", 1)[0]]


def kernel_lens(phase: str, seq_lens, setup) -> np.ndarray:
    """Verify's kernel attends over the draft tokens too; the rest over seq_lens
    (draft extend v2: every request extends by the draft tokens, so
    seq_len - extend + max extend is seq_len)."""
    offset = setup["draft_tokens"] if phase.startswith("verify") else 0
    return np.asarray(seq_lens, dtype=np.int64) + offset


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
    """One replay of ``phase``: buffers where captured; each view the kernel got
    (per attention layer) is the oracle's (``check_graph_view``) and its query
    is the batch's tokens in order (slot (b, i): token b * q_len + i)."""
    setup = scenario["setup"]
    name = f"{scenario['name']} {phase} bs {call.bs}"
    assert call.ptrs == captured_ptrs[call.bs], f"{name}: buffer moved"
    lens, want = replay_oracle(scenario, req_to_token, phase, call)
    q_len = phase_row(phase).tokens(Setup(**setup))
    tokens = np.arange(1, call.bs * q_len + 1).reshape(call.bs, q_len)
    for view in call.views:
        check_graph_view(view, lens, want, setup["context_len"], name)
        assert np.array_equal(view.query_tokens, tokens), f"{name}: query slots"
