"""Base and patched trees give the attention kernel identical metadata.

For every generated scenario and every path an EAGLE iteration drives (eager
``init_forward_metadata``; CUDA-graph capture then replays with new inputs,
each followed by the captured forward's attention layers up to the kernel)
the kernel-visible metadata of the patched tree equals the base tree's: the
block-table prefix the kernel reads (pages covering its ``seq_lens``), those
``seq_lens`` themselves (``seq_lens_k`` in verify / draft extend) and
``max_seq_len_k``, except what a fix patch changes on purpose (``FIXED``).
Nothing else is compared: see ``mla_harness.visible``.
"""

from __future__ import annotations

import numpy as np
import pytest

from mla_harness.probe import PHASES
from mla_harness.visible import KernelView

# What a fix patch changes on purpose, per phase: not compared here, but
# checked on both trees against the oracle (test_graph_contract) and on named
# cases, base as a strict xfail (test_fix_patches).
FIXED = {
    # 0004: the eager draft-extend table and max_seq_len_k cover seq_lens_k;
    # v0.5.12 truncates rows that span more pages than max(seq_lens) needs.
    "extend_v1_eager": ("max_seq_len_k", "block_prefix"),
}


def _assert_same_view(base: KernelView, patched: KernelView, where, fixed=()):
    assert np.array_equal(base.seq_lens, patched.seq_lens), f"{where}: kernel seq_lens differ"
    if "max_seq_len_k" not in fixed:
        assert base.max_seq_len_k == patched.max_seq_len_k, f"{where}: max_seq_len_k differs"
    if "block_prefix" in fixed:
        return
    for row, (b, p) in enumerate(zip(base.block_prefix, patched.block_prefix, strict=True)):
        assert np.array_equal(b, p), f"{where}: block table row {row} differs"


@pytest.mark.parametrize("phase", PHASES)
def test_kernel_visible_metadata_identical(results, plan, phase):
    compared = 0
    for scenario, base, patched in zip(
        plan["scenarios"],
        results["base"].scenarios,
        results["patched"].scenarios,
        strict=True,
    ):
        base_calls, patched_calls = base.phases[phase].calls, patched.phases[phase].calls
        assert len(base_calls) == len(patched_calls) == len(scenario["batches"])
        for call, (b, p) in enumerate(zip(base_calls, patched_calls, strict=True)):
            assert len(b.views) == len(p.views) >= 1
            for step, (bv, pv) in enumerate(zip(b.views, p.views, strict=True)):
                where = f"{scenario['name']} {phase} call {call} backend {step}"
                _assert_same_view(bv, pv, where, FIXED.get(phase, ()))
                compared += 1
    assert compared >= len(plan["scenarios"])
