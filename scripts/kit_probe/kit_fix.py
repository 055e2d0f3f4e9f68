"""A corrected ``prepare_mla_runner_inputs`` for upstream's attention kit (test-side only).

The kit's (``attention_methods/mla_attention.py``, v0.5.23 wheel, line 1139)
re-writes the prefix KV with ``_populate_prefix_kv`` *without* a ``loc_fn``,
i.e. at the contiguous ``_token_loc`` slots, whatever layout the batch's
``req_to_token`` was built with. The speculative CUDA-graph runner calls it on
the fixture's own batch in its eager leg
(``runner_modes/speculative_cuda_graph_runner.py:181``), whose ``req_to_token``
and ``out_cache_loc`` use the fixture's default ``"shuffled_pages"`` layout.
The corrected one writes each prefix token where ``req_to_token`` says it
lives: the layout of the batch being prepared, for every leg. The series' kit
patch makes the same correction upstream, so only the base tree's kit needs
this (``run_kit_cases.py --fixed-kit``).
"""

from __future__ import annotations


def prepare_mla_runner_inputs(fixture, case, batch, inputs, *, max_context_len):
    from sglang.test.kits.attention_unittest.attention_methods import mla_attention as mla

    req_to_token = fixture.runner.req_to_token_pool.req_to_token
    rows = batch.req_pool_indices.tolist()

    def loc_fn(req_idx: int, pos: int) -> int:
        return int(req_to_token[rows[req_idx], pos])

    mla._populate_prefix_kv(
        fixture.actual_module,
        case,
        fixture.runner,
        fixture.backend,
        inputs["prefix_hidden"],
        max_context_len=max_context_len,
        loc_fn=loc_fn,
    )


def apply() -> None:
    """Install it where the runner modes look it up (imported by name)."""
    from sglang.test.kits.attention_unittest.attention_methods import mla_attention as mla
    from sglang.test.kits.attention_unittest.runner_modes import cuda_graph_decode_runner as cgd
    from sglang.test.kits.attention_unittest.runner_modes import (
        speculative_target_verify_runner as stv,
    )

    for module in (mla, cgd, stv):
        module.prepare_mla_runner_inputs = prepare_mla_runner_inputs
