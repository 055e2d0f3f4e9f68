"""Ragged target verify (DSpark's compact verify) on both v0.5.23 trees.

``mla_harness.ragged_verify_check`` drives each tree's real target backend
through ``forward_extend`` with a ``RaggedVerifyLayout``, eagerly (with and
without CUDA-graph state) and as the ragged-mode graph runner does (a graph
per token tier, the live layout staged into the captured one before each
replay; on CPU the graph is re-run eagerly), with a reference paged MLA decode
as the kernel. patches/v0.5.23 0006 moves this path's unpadded output from a
persistent buffer into the forward: every live row must equal the reference
on the padded query the layout defines with lengths and table from
``req_to_token`` alone, the rows the layout does not cover must be zero
(eagerly and after every replay), both trees must return the same outputs,
and no output may lie in a tensor the backend holds (v0.5.23's all lie in
``unpad_output_buffer`` wherever the backend has graph state: strict xfail,
and a check of the base tree that shows the probe sees them).

With an FP8 KV cache (``--kv-dtype float8_e4m3fn``: the forward quantizes
the query, pads it in FP8, and the kernel asserts FP8 query and KV) both
trees pass all of it: the unpadded output is sized by the call on both
(v0.5.23's ``unpad_output_buffer`` is FP8 then,
``trtllm_mla_backend.py:515-519``, and ``.to(bf16)`` of its rows copies,
``kernels/ops/attention/pad.py:298``: no output lies in a tensor the backend
holds, and the zeroed rows reach the copy), and both trees' outputs are
equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from jobs import Job, group

from mla_harness import child

pytestmark = pytest.mark.base("v0.5.23")

SETUPS = 2  # ragged_verify_check.SETUPS
EAGER_PATHS = 2  # without and with CUDA-graph state
# FP8 on CPU: one setup (page 32, 5 draft tokens, 3 tiers) at the fewest
# replays, as the Triton interpreter's pad and unpad dominate the cost.
FP8_CPU = ("--setup", "1")
FP8_CPU_REPLAYS = 4
# CPU seconds of one tree's run (2-core CPU, 2026-12-04, with replacement 26)
RAGGED_COST = 33
RAGGED_FP8_COST = 8


def _run(tree: Path, device: str, replays: int, *flags: str) -> tuple[list, list]:
    args = ("--replays", str(replays), *flags)
    return child.run_report("mla_harness.ragged_verify_check", tree, device, *args, timeout=1800)


def _replays(request, device: str) -> int:
    return request.config.getoption("--graph-replays") if device == "cuda" else 8


def _fp8(request, device: str) -> tuple[int, tuple, int]:
    """FP8's replays, flags and setups."""
    cpu = device == "cpu"
    replays = FP8_CPU_REPLAYS if cpu else request.config.getoption("--graph-replays")
    return replays, ("--kv-dtype", "float8_e4m3fn", *(FP8_CPU if cpu else ())), 1 if cpu else SETUPS


@group("ragged23")
def ragged_jobs(request) -> dict:
    device = request.getfixturevalue("device")
    replays = _replays(request, device)
    trees23 = request.getfixturevalue("trees_of")("v0.5.23")
    return {name: Job(_run, (path, device, replays), RAGGED_COST) for name, path in trees23.items()}


@pytest.fixture(scope="module")
def ragged23(jobs, device, request):
    return _replays(request, device), jobs.results("ragged23", request)


@group("ragged23_fp8")
def ragged_fp8_jobs(request) -> dict:
    device = request.getfixturevalue("device")
    replays, flags, _ = _fp8(request, device)
    trees23 = request.getfixturevalue("trees_of")("v0.5.23")
    return {
        name: Job(_run, (path, device, replays, *flags), RAGGED_FP8_COST)
        for name, path in trees23.items()
    }


@pytest.fixture(scope="module")
def ragged23_fp8(jobs, device, request):
    """The same with an FP8 KV cache, on both trees."""
    replays, _, setups = _fp8(request, device)
    return replays, jobs.results("ragged23_fp8", request), setups


def _equals_reference(report, replays: int, setups: int) -> None:
    assert len(report) == setups
    for r in report:
        assert r["eager"] == EAGER_PATHS * max(4, replays // 4)
        assert r["graph"] == replays
        assert r["max_rel_err"] < 1e-3, r  # bf16 output of a float64 reference
        assert r["bad_tails"] == 0, r
    # The zero check ran on both paths (layouts that leave rows uncovered).
    for path in ("eager", "graph"):
        assert sum(r["zero_rows"][path] for r in report) > 0, path


def _same_outputs(base, patched) -> None:
    compared = 0
    for setup_b, setup_p in zip(base, patched, strict=True):
        for call_b, call_p in zip(setup_b, setup_p, strict=True):
            for out_b, out_p in zip(call_b, call_p, strict=True):
                assert out_b.shape == out_p.shape
                assert np.array_equal(out_b, out_p)
                compared += 1
    assert compared


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_ragged_verify_equals_reference(ragged23, tree):
    replays, results = ragged23
    report, _ = results[tree]
    print(json.dumps(report))
    _equals_reference(report, replays, SETUPS)


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_fp8_ragged_verify_equals_reference(ragged23_fp8, tree):
    """FP8 KV: the live rows equal the reference on the FP8 KV and the padded
    query cast to FP8 (the kernel asserted it got FP8; bf16 output of a
    float64 reference, as above), uncovered rows zero, on both trees."""
    replays, results, setups = ragged23_fp8
    report, _ = results[tree]
    print(json.dumps(report))
    _equals_reference(report, replays, setups)


@pytest.mark.parametrize("tree", ["base", "patched"])
def test_fp8_ragged_verify_output_is_not_a_persistent_buffer(ragged23_fp8, tree):
    """FP8 KV: no output lies in a tensor the backend holds, on either tree
    (v0.5.23's FP8 ``unpad_output_buffer`` is copied by ``.to(bf16)``)."""
    _, results, _ = ragged23_fp8
    for r in results[tree][0]:
        assert all(r["outputs"].values()), r
        assert r["persistent"] == {"eager_no_graph_state": 0, "eager_graph_state": 0, "graph": 0}


def test_fp8_ragged_verify_outputs_match_base(ragged23_fp8):
    _, results, _ = ragged23_fp8
    _same_outputs(results["base"][1], results["patched"][1])


@pytest.mark.parametrize(
    "tree",
    [
        pytest.param(
            "base", marks=pytest.mark.xfail(strict=True, reason="v0.5.23 lacks this change")
        ),
        "patched",
    ],
)
def test_ragged_verify_output_is_not_a_persistent_buffer(ragged23, tree):
    """0006: no ragged verify output, eager or captured, lies in a tensor the
    backend holds."""
    _, results = ragged23
    for r in results[tree][0]:
        assert all(r["outputs"].values()), r
        assert r["persistent"] == {"eager_no_graph_state": 0, "eager_graph_state": 0, "graph": 0}


def test_base_outputs_lie_in_the_unpad_buffer(ragged23):
    """What the xfail above stands on: on v0.5.23 every output of a backend
    with graph state lies in ``unpad_output_buffer``, and none without."""
    _, results = ragged23
    for r in results["base"][0]:
        outputs, views = r["outputs"], r["unpad_views"]
        assert views["eager_no_graph_state"] == 0
        assert views["eager_graph_state"] == outputs["eager_graph_state"] > 0
        assert views["graph"] == outputs["graph"] > 0


def test_ragged_verify_outputs_match_base(ragged23):
    _, results = ragged23
    _same_outputs(results["base"][1], results["patched"][1])
