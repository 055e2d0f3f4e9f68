"""DCP 2 and 4, every rank: what each rank's kernel receives after every replay.

``mla_harness.dcp_check`` sets the DCP group's size and rank in a process of
its own (replacement 17), builds that tree's real backends, captures every
batch size of every phase and replays new, partly padded batches (the
out-of-graph call, the in-graph step: a real CUDA graph on a GPU, then the
captured forward up to the kernel). v0.5.23 rebuilds a DCP graph's metadata
on the host before each replay; the series rebuilds it inside the graph. On
both trees every kernel call must equal a reference from ``req_to_token`` and
the DCP layout alone (rank-local lengths, the page table over the rank's
cyclic slice, ``max_seq_len``, and the global lengths where the forward hands
them on), a stale replay must be caught at every size, and the two trees must
hand the kernel the same tensors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import Job, group
from oracle import assert_same_kernel_calls

from mla_harness import child

pytestmark = pytest.mark.base("v0.5.23")

SIZES = (2, 4)
PHASES = ("draft", "decode", "verify", "extend_v2")
MAX_BS = 4  # dcp_check.SETUP
DCP_COST = 4  # CPU seconds of one run, per rank (2-core CPU, 2026-12-03)


def _run(tree: Path, device: str, size: int, replays: int):
    args = ("--dcp-size", str(size), "--replays", str(replays))
    return child.run_report("mla_harness.dcp_check", tree, device, *args, timeout=1800)


def _replays(request, device: str) -> int:
    return min(request.config.getoption("--graph-replays"), 40) if device == "cuda" else 4


@group("dcp23")
def dcp_jobs(request) -> dict:
    device = request.getfixturevalue("device")
    trees23 = request.getfixturevalue("trees_of")("v0.5.23")
    replays = _replays(request, device)
    return {
        (name, size): Job(_run, (trees23[name], device, size, replays), DCP_COST * size)
        for size in SIZES
        for name in trees23
    }


@pytest.fixture(scope="module")
def dcp23(jobs, device, request):
    return _replays(request, device), jobs.results("dcp23", request)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("tree", ["base", "patched"])
def test_each_rank_kernel_reads_its_dcp_layout(dcp23, tree, size):
    replays, results = dcp23
    report, _ = results[(tree, size)]
    print(json.dumps(report))
    assert sorted({(r["rank"], r["phase"]) for r in report}) == sorted(
        (rank, phase) for rank in range(size) for phase in PHASES
    )
    for r in report:
        steps = 2 if r["phase"] == "draft" else 1  # the draft's step backends (3 steps)
        assert r["calls"] == replays * steps, r
        assert r["mismatches"] == 0, r
        assert r["stale_caught"] == MAX_BS, r  # the comparison sees a stale replay


@pytest.mark.parametrize("size", SIZES)
def test_trees_hand_the_kernel_the_same_dcp_metadata(dcp23, size):
    _, results = dcp23
    base, patched = results[("base", size)][1], results[("patched", size)][1]
    assert_same_kernel_calls(base, patched)
