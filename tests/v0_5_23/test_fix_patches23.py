"""patches/v0.5.23 0002-0004 (fixes) and 0005's guard, on both v0.5.23 trees.

``mla_harness.fix_check`` drives each tree's real backends (``rerun``,
``uneven_extend``, ``fp4_rows``, ``step_guard``) or its real unpad Triton
wrapper (``unpad_bound``) and reports what it saw; the rule each tree must
follow is here. Where v0.5.23 can reach the behaviour a fix changes, its half
is a strict xfail: it must fail.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from mla_harness import child

pytestmark = pytest.mark.base("v0.5.23")

SHARED = ("rerun", "uneven_extend", "unpad_bound", "step_guard")
BUG = "v0.5.23 has the bug this fix removes"


def _report(tree, device, checks) -> dict:
    args = [arg for name in checks for arg in ("--check", name)]
    stdout = child.run("mla_harness.fix_check", tree, device, *args, timeout=1800)
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fixes23(trees23, device):
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(_report, path, device, SHARED) for name, path in trees23.items()
        }
        return {name: future.result() for name, future in futures.items()}


def _on_base_fails():
    return [pytest.param("base", marks=pytest.mark.xfail(strict=True, reason=BUG)), "patched"]


@pytest.mark.parametrize("tree", _on_base_fails())
def test_0002_rerun_reads_the_replayed_size(fixes23, tree):
    """0002: after the replay call for a size smaller than the last one
    captured, an eager re-run of that size's graph (``--debug-cuda-graph``,
    breakable graphs) hands the kernel that size's table and lengths."""
    r = fixes23[tree]["rerun"]
    assert r["calls"] > 0
    assert r["stale"] == {"draft": 0, "decode": 0, "verify": 0, "extend_v2": 0}, r


@pytest.mark.parametrize("tree", _on_base_fails())
def test_0003_uneven_draft_extend_query_layout(fixes23, tree):
    """0003: eager draft extend with uneven extend lengths hands the kernel
    request b's tokens in row b, zeros after, with and without graph state
    (v0.5.23: (1, 3) is viewed as two rows of 2; with graph state the padded
    branch writes into a strided slice of padded_q_buffer)."""
    assert fixes23[tree]["uneven_extend"] == {"no_graph_state": 0, "graph_state": 0}


@pytest.mark.parametrize("tree", _on_base_fails())
def test_0004_unpad_writes_stay_in_the_output(fixes23, tree):
    """0004: a layout whose offsets run past the output (6 rows, offsets to
    8) writes nothing past it; the rows it covers are the requests' tokens."""
    r = fixes23[tree]["unpad_bound"]
    assert r["rows"] == 6 and r["live_ok"], r
    assert not r["written_past"], r


@pytest.mark.parametrize("tree", _on_base_fails())
def test_0004_fp4_ragged_verify_output_has_every_row(trees23, device, tree):
    """0004: with an FP4 KV cache, ragged verify's unpadded output has a row
    for every token (v0.5.23 slices it from a buffer of max_num_tokens // 2
    rows, and its kernel writes past the short output). v0.5.23 allocates
    that buffer only where CUDA is (``is_float4_e2m1fn_x2`` checks
    ``is_cuda()``, utils/common.py:248-251), so its half runs on a GPU; each
    tree in a process of its own."""
    if tree == "base" and device != "cuda":
        pytest.skip("v0.5.23's FP4 graph state exists only where CUDA is")
    r = _report(trees23[tree], device, ["fp4_rows"])["fp4_rows"]
    if "skipped" in r:
        pytest.skip(r["skipped"])
    assert r["rows"] == r["tokens"] and r["equal"], r


def test_0005_later_draft_steps_refuse_a_direct_capture(fixes23):
    """0005: the draft's later step backends have no graph state of their own
    (their graphs read the first step's); captured directly, one says so in
    one line instead of failing on ``None[:bs]``. v0.5.23 gave every step
    state of its own."""
    assert fixes23["base"]["step_guard"]["error"] is None
    error = fixes23["patched"]["step_guard"]["error"]
    assert error is not None and "no CUDA-graph state" in error, error
