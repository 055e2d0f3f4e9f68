"""CUDA-graph buffer contract and metadata values, on each tree.

A captured graph reads metadata through the addresses it saw at capture. So
every metadata tensor must keep its ``data_ptr`` across replays, and when the
captured forward's kernel reads it after a replay call, hold the values for
the new inputs. The expected values come from an
independent oracle (``expected_block_prefix``: the first slot of each page of
the request's ``req_to_token`` row), not from either tree.
"""

from __future__ import annotations

import numpy as np
import pytest

from mla_harness.probe import PHASES
from mla_harness.visible import expected_block_prefix

GRAPH_PHASES = tuple(p for p in PHASES if p.endswith("_graph"))
EAGER_PHASES = tuple(p for p in PHASES if p.endswith("_eager"))


def _expected_kernel_lens(phase, seq_lens, setup):
    if phase.startswith("verify"):
        return np.asarray(seq_lens) + setup["draft_tokens"]
    return np.asarray(seq_lens)


def check_graph_contract(plan, result, phase):
    """Every replay of ``phase``: buffers where captured, values of the oracle."""
    for scenario, out in zip(plan["scenarios"], result.scenarios, strict=True):
        setup, page = scenario["setup"], scenario["setup"]["page_size"]
        record = out.phases[phase]
        captured = record.graph.capture_ptrs
        for call in record.calls:
            assert call.ptrs == captured[call.bs], f"{scenario['name']}: buffer moved"
            lens = _expected_kernel_lens(phase, call.seq_lens, setup)
            want = expected_block_prefix(out.req_to_token, call.req_pool_indices, lens, page)
            for view in call.views:
                assert np.array_equal(view.seq_lens, lens), f"{scenario['name']}: seq_lens_k"
                for row, (got, exp) in enumerate(zip(view.block_prefix, want, strict=True)):
                    assert np.array_equal(got, exp), f"{scenario['name']} {phase}: row {row}"


def check_eager_oracle(plan, result, phase, table_sized_by_padded_lens=True):
    """Every eager call of ``phase``: the kernel's lengths and block-table
    prefixes of the oracle, and (where the tree sizes draft extend's table by
    the padded lengths, 0004) max_seq_len_k the largest length."""
    for scenario, out in zip(plan["scenarios"], result.scenarios, strict=True):
        setup, page = scenario["setup"], scenario["setup"]["page_size"]
        for batch, call in zip(scenario["batches"], out.phases[phase].calls, strict=True):
            seq_lens = np.asarray(batch["seq_lens"])
            if phase.startswith("extend"):
                ext = np.asarray(
                    batch["extend_lens"]
                    if phase == "extend_v1_eager"
                    else [setup["draft_tokens"]] * len(seq_lens)
                )
                lens = seq_lens - ext + ext.max()  # NOTE(draft_extend seq_len handling)
            else:
                lens = _expected_kernel_lens(phase, seq_lens, setup)
            want = expected_block_prefix(out.req_to_token, batch["req_pool_indices"], lens, page)
            for view in call.views:
                assert np.array_equal(view.seq_lens, lens)
                if phase == "extend_v1_eager" and not table_sized_by_padded_lens:
                    continue  # v0.5.12 sizes this table by max(seq_lens): see test_fix_patches
                assert view.max_seq_len_k == lens.max(), f"{scenario['name']} {phase}"
                for got, exp in zip(view.block_prefix, want, strict=True):
                    assert np.array_equal(got, exp), f"{scenario['name']} {phase}"


@pytest.mark.parametrize("tree", ["base", "patched"])
@pytest.mark.parametrize("phase", GRAPH_PHASES)
def test_graph_buffers_stable_and_refreshed(results, plan, tree, phase):
    check_graph_contract(plan, results[tree], phase)


@pytest.mark.parametrize("tree", ["base", "patched"])
@pytest.mark.parametrize("phase", EAGER_PHASES)
def test_eager_metadata_matches_oracle(results, plan, tree, phase):
    check_eager_oracle(plan, results[tree], phase, table_sized_by_padded_lens=tree != "base")
