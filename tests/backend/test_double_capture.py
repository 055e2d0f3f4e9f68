"""The seq_lens_k fix patches (v0.5.12 0005, v0.5.23 0001): a batch size
captured twice reads every replay's lengths, on every base.

The decode runner captures a batch size twice on one backend (its LoRA and
no-LoRA graphs) and replays either. ``conftest.double`` captures every
batch size twice on decode, verify and draft extend v2, then replays new,
partly padded batches; after each replay (the out-of-graph call, then the
graph's in-graph step), the metadata each earlier capture's graph reads must
equal the oracle from ``req_to_token``, as the last capture's must.

Where a base has the bug (``PER_CAPTURE_SEQ_LENS_K`` and the rule below, from
the inputs alone), its base half is a strict xfail: those captures allocate
``seq_lens_k`` per capture and refresh only the last one, so the first graph
reads lengths no replay writes (v0.5.23: the capture-time fill value; v0.5.12:
a freed buffer, 0005's message). v0.5.23 shares one metadata per verify batch
size and v0.5.12's decode reads the batch's own ``seq_lens``: the base must
pass there.
"""

from __future__ import annotations

import pytest
from oracle import check_graph_view, check_replay, replay_oracle
from suite import DOUBLE_CAPTURE_PHASES, double_capture_cases, per_base

FILL = 1  # the backends' get_cuda_graph_seq_len_fill_value(): capture-time lengths
PER_CAPTURE_SEQ_LENS_K = {  # the phases whose base allocates seq_lens_k per capture
    "v0.5.12": ("verify_graph", "extend_v2_graph"),
    "v0.5.23": ("decode_graph", "extend_v2_graph"),
}


def _stale_on_base(base: str, phase: str, cases) -> bool:
    """v0.5.23 gives the first graph of a batch size capture-time lengths: wrong
    for a phase that allocates seq_lens_k per capture, once a replay's kernel
    length differs from the fill value (lengths the runner captured with)."""
    per_capture = phase in PER_CAPTURE_SEQ_LENS_K[base]
    return per_capture and any(
        length != FILL
        for case in cases
        for batch in case["batches"]
        for length in batch["seq_lens"]
    )


def _params(base: str):
    cases = double_capture_cases()
    for phase in DOUBLE_CAPTURE_PHASES:
        for tree in ("base", "patched"):
            marks = []
            if tree == "base" and _stale_on_base(base, phase, cases):
                reason = f"{base} has the bug its seq_lens_k fix patch fixes"
                marks = [pytest.mark.xfail(strict=True, reason=reason)]
            yield pytest.param(tree, phase, marks=marks, id=f"{tree}-{phase}")


@pytest.mark.parametrize("base,tree,phase", per_base(_params))
def test_every_capture_of_a_batch_size_reads_the_replay(double, double_plan, base, tree, phase):
    earlier = 0
    for scenario, out in zip(double_plan["scenarios"], double[tree].scenarios, strict=True):
        record = out.phases[phase]
        for call in record.calls:
            check_replay(scenario, out.req_to_token, phase, call, record.graph.capture_ptrs)
            lens, want = replay_oracle(scenario, out.req_to_token, phase, call)
            for k, views in enumerate(call.earlier_captures):
                for view in views:
                    name = f"{scenario['name']} {phase} bs {call.bs} capture {k}"
                    check_graph_view(view, lens, want, scenario["setup"]["context_len"], name)
                    earlier += 1
    assert earlier >= len(double_plan["scenarios"])
