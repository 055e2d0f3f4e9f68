"""What the kernel is given equals the oracle, on each tree of every base.

A captured graph reads metadata through the addresses it saw at capture. So
every metadata tensor must keep its ``data_ptr`` across replays, and when the
captured forward's kernel reads it after a replay call (and, where the base
has one, the graph's in-graph step), hold the values for the new inputs: the
lengths, the block-table prefixes, ``max_seq_len_k`` the context (graphs
capture the table's full width) and the query in token order. Each eager
call's metadata, and what the kernel receives at every attention layer of the
forward where the base's plan runs it, must too. The expected values come
from an independent oracle (``oracle``: the first slot of each page of the
request's ``req_to_token`` row), not from either tree.
"""

from __future__ import annotations

import pytest
from oracle import check_eager_oracle, check_graph_contract
from suite import eager_phases, graph_phases, per_base

TREES = ("base", "patched")


def _per_tree(phases):
    return per_base(lambda base: [(tree, phase) for phase in phases(base) for tree in TREES])


@pytest.mark.parametrize(("base", "tree", "phase"), _per_tree(graph_phases))
def test_graph_buffers_stable_and_refreshed(results, plan, base, tree, phase):
    check_graph_contract(plan, results[tree], phase)


@pytest.mark.parametrize(("base", "tree", "phase"), _per_tree(eager_phases))
def test_eager_metadata_matches_oracle(results, plan, base, tree, phase):
    """v0.5.12's eager draft-extend table is sized by max(seq_lens) (fixed by
    its 0004, see v0_5_12/test_fix_patches): on its base tree only the
    lengths are checked there."""
    sized = not (base == "v0.5.12" and tree == "base")
    check_eager_oracle(plan, results[tree], phase, table_sized_by_padded_lens=sized)
