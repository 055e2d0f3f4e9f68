"""The series' fix patches, read where the attention kernel reads them.

``mla_harness.mode_checks`` runs hand-written cases on each tree in a process of
its own (on a GPU with real CUDA graphs and more replays). Every test asserts
what the kernel is given and what it computes from it against an independent
oracle (attention over the request's ``req_to_token`` row up to each token's
own position). Where v0.5.12 has the bug a fix patch removes, the base half is
a strict xfail; which cases those are follows from the case itself (the rules
below), not from either tree's output. Elsewhere the base must pass too.
"""

from __future__ import annotations

import json

import pytest
from jobs import Job, group

from mla_harness import child
from mla_harness.mode_checks import CAPTURE_MODES, CASES, COMPILE_MODES
from mla_harness.replacements import cuda_visible

BASE_BUG = pytest.mark.xfail(strict=True, reason="v0.5.12 has the bug this fix patch removes")


FIX_COST = 50  # CPU seconds of one tree's mode_checks (2-core CPU, 2026-12-03)


def _mode_checks(tree, device: str, args: list) -> dict:
    stdout = child.run("mla_harness.mode_checks", tree, device, *args)
    return json.loads(stdout.strip().splitlines()[-1])


@group("fix_results")
def fix_jobs(request) -> dict:
    device = request.getfixturevalue("device")
    replays = 40 if device == "cuda" else 6
    args = ["--replays", str(replays), *(["--compile"] if device == "cuda" else [])]
    trees = request.getfixturevalue("trees_of")("v0.5.12")
    return {name: Job(_mode_checks, (tree, device, args), FIX_COST) for name, tree in trees.items()}


@pytest.fixture(scope="module")
def fix_results(jobs, request):
    return jobs.results("fix_results", request)


def _misread_query_on_base(case, graph_state: bool) -> bool:
    """v0.5.12's eager draft extend gives the kernel another token's query when
    the lengths are uneven and either q's rows divide by the batch size (it
    views q as if uniform) or the CUDA-graph state exists (it pads into a
    strided slice of padded_q_buffer)."""
    uneven = len(set(case.extend_lens)) > 1
    divisible = case.tokens % len(case.extend_lens) == 0
    return uneven and (divisible or graph_state)


def _spills_on_base(case) -> bool:
    """v0.5.12's table is padded(max(seq_lens)) pages wide (a multiple of 4096
    tokens at page 32 or 64); a row spanning more writes into the next row."""
    block = 4096
    width_tokens = -(-max(case.seq_lens) // block) * block
    return max(case.kv_lens) > width_tokens


# On a GPU the entry a spilling row writes into the next row races with that
# row's own program, so v0.5.12's output is not deterministic there.
RACE = pytest.mark.skip(reason="v0.5.12's spilled table entry races with the next row's program")


def _params(base_fails, base_races=lambda case, graph_state: False):
    return list(_each_param(base_fails, base_races))


def _each_param(base_fails, base_races):
    for name, case in CASES.items():
        for graph_state in (False, True):
            for tree in ("base", "patched"):
                marks = []
                if tree == "base" and base_fails(case, graph_state):
                    marks = [BASE_BUG]
                elif tree == "base" and base_races(case, graph_state):
                    marks = [RACE]
                state = "graph-state" if graph_state else "no-graph-state"
                case_id = f"{tree}-{name}-{state}"
                yield pytest.param(tree, name, graph_state, marks=marks, id=case_id)


def _record(fix_results, tree, name, graph_state):
    (record,) = [
        r
        for r in fix_results[tree]["eager_draft_extend"]
        if r["case"] == name and r["graph_state"] == graph_state
    ]
    assert "error" not in record, record["error"]
    return record


@pytest.mark.parametrize("tree,name,graph_state", _params(_misread_query_on_base))
def test_eager_draft_extend_query(fix_results, tree, name, graph_state):
    """0003: each token reaches the kernel as its own request's query row, at its
    own position, for every eager batch."""
    record = _record(fix_results, tree, name, graph_state)
    case = CASES[name]
    assert record["query_shape"][:2] == [len(case.seq_lens), max(case.extend_lens)]
    assert record["wrong_query_tokens"] == []


@pytest.mark.parametrize(
    "tree,name,graph_state",
    _params(_misread_query_on_base, lambda case, graph_state: _spills_on_base(case)),
)
def test_eager_draft_extend_output(fix_results, tree, name, graph_state):
    """0003 and 0004: every token's attention output equals the oracle."""
    record = _record(fix_results, tree, name, graph_state)
    assert record["max_rel_err"] < 1e-9


@pytest.mark.parametrize(
    "tree,name,graph_state", _params(lambda case, graph_state: _spills_on_base(case))
)
def test_eager_draft_extend_table_covers_rows(fix_results, tree, name, graph_state):
    """0004: the kernel's block table holds every page each row's seq_lens_k
    spans, and its max_seq_len covers the largest seq_lens_k."""
    record = _record(fix_results, tree, name, graph_state)
    case = CASES[name]
    assert record["seq_lens_k"] == case.kv_lens
    assert max(record["pages_needed"]) <= record["table_width"]
    assert record["kernel_max_seq_len"] >= max(case.kv_lens)


@pytest.mark.parametrize(
    "tree,mode",
    [
        pytest.param(tree, mode, marks=[BASE_BUG] if tree == "base" and mode != "decode" else [])
        for mode in CAPTURE_MODES
        for tree in ("base", "patched")
    ],
)
def test_batch_size_captured_twice(fix_results, tree, mode):
    """0005: with a batch size captured twice on one backend (CudaGraphRunner's
    LoRA and no-LoRA graphs: decode or target verify), both graphs read every
    replay's lengths from memory the backend owns. Decode reads the batch's own
    seq_lens, so v0.5.12 passes there; verify reads seq_lens_k, which v0.5.12
    allocated per capture. Draft extend allocates it the same way (no v0.5.12
    runner captures it twice)."""
    (record,) = [r for r in fix_results[tree]["double_capture"] if r["mode"] == mode]
    assert record["compared"] >= record["replays"]
    assert record["foreign_buffers"] == []
    assert record["max_rel_err"] < 1e-9
    assert record["sentinels_clobbered"] == 0


@pytest.mark.skipif(not cuda_visible(), reason="torch.compile of Triton kernels needs CUDA")
@pytest.mark.parametrize("mode", COMPILE_MODES)
@pytest.mark.parametrize("tree", ["base", "patched"])
def test_torch_compiled_graphs(fix_results, tree, mode):
    """0007 under --enable-torch-compile: the forward compiled by SGLang's own
    patch_model, captured and replayed as CudaGraphRunner does with new
    batches, equals the oracle, with no graph break. Dynamo compiles one graph
    per compiled batch size on v0.5.12; with 0007 at most two (the first trace
    sets the rebuild's first-layer latch, which dynamo may guard on)."""
    (record,) = [r for r in fix_results[tree]["compiled_capture"] if r["mode"] == mode]
    print(json.dumps(record))
    assert record["compared"] >= record["replays"]
    assert record["max_rel_err"] < 1e-9
    assert record["graph_breaks"] == 0
    per_bs = {int(bs): n for bs, n in record["dynamo_graphs_per_bs"].items()}
    assert all(n == 0 for bs, n in per_bs.items() if bs > record["compile_max_bs"])
    compiled = [n for bs, n in per_bs.items() if bs <= record["compile_max_bs"]]
    assert compiled and all(1 <= n <= (1 if tree == "base" else 2) for n in compiled)
