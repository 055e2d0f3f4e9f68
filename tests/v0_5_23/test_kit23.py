"""Upstream's attention test kit, trtllm_mla cases, on both v0.5.23 trees.

The kit ships in the v0.5.23 wheel (``sglang/test/kits/attention_unittest``).
Its speculative CUDA-graph runner's eager leg
(``runner_modes/speculative_cuda_graph_runner.py:181``) calls
``prepare_mla_runner_inputs`` (``attention_methods/mla_attention.py:1139``) on
the fixture's own batch, whose ``req_to_token`` / ``out_cache_loc`` use the
fixture's default ``"shuffled_pages"`` layout (``build_mla_attention_fixture``,
``mla_attention.py:948-963``); ``prepare_mla_runner_inputs`` re-writes the
prefix KV at the *contiguous* ``_token_loc`` slots (it passes no ``loc_fn``),
over other tokens' slots of that request once the prefix passes one page.
The backend then reads the table ``req_to_token[:, ::page] // page`` says,
correctly, and finds the wrong K/V there. So the kit is wrong, not v0.5.23.
The series fixes the kit (its patch "[fix] attention test kit: write the
eager leg's prefix KV where req_to_token puts it"), so the patched tree's kit
is the corrected one and the base tree's the kit as shipped:

- ``test_kit_cases``: the cases over prefixes within one page, at the page
  edge and over several pages, both page shuffles the kit's case-name seed
  gives (upstream's registered names; a 43-character name, the
  ``[[3, 1, ...]]`` table): every case passes on both trees, the base tree
  with the kit's ``prepare_mla_runner_inputs`` replaced by one that writes
  each prefix token where ``req_to_token`` says (``scripts/kit_probe/
  kit_fix.py``), the patched tree with its own kit, unreplaced.
- ``test_kit_as_shipped_misplaces_prefix_kv``: the base tree's kit fails its
  eager verify for those prefixes.
- ``test_registered_prefix_past_page``: the kit patch's upstream file
  (``test/registered/attention/unittests/test_runner_prefix_past_page.py``,
  patched tree) skips without CUDA and calls the kit with its default
  ``device="cuda"``, so ``scripts/kit_probe/run_registered_cases.py`` calls
  the same kit entry points on its case tables (verify CUDA graphs: triton
  MLA and dense, trtllm_mla; split-op extend, piecewise and breakable: triton
  MLA and dense) with this run's device, after the file's premise check on
  each case's fixture (a contiguous re-write misplaces its prefix; holds on
  both trees): the patched tree's kit passes every case, the base tree's kit
  fails every one, at the verify eager leg's or the split-op forward's
  assert_close.
- ``test_registered_kept_replay_built_by_init`` (CPU; on CUDA the upstream
  file runs it): 0013's ``test_runner_kept_replay.py``, which skips without
  CUDA, run by ``scripts/kit_probe/run_kept_replay_cases.py`` with
  ``device="cpu"`` (graphs re-run eagerly, replacements 16, 27, 28; the
  backend's ``replayer`` is 16's, so this checks the runners' side, and
  ``TestBackendReplayer`` the real one): on the patched tree the kit's EAGLE
  draft and draft-extend runners, built by their ``__init__``, replay their
  captured size through the kept replay and a padded one through the general
  path, each output the kit's eager one's; v0.5.23's runners have no kept
  replay to count.

Kernel: ``_run_decode_kernel`` replaced by a float32 paged MLA decode
(``scripts/kit_probe/kit_env.paged_decode``; query token i sees keys up to
``seq_lens - q_len + i``), under TRITON_INTERPRET=1 on CPU; where CUDA is
visible, on the GPU with the kit's real CUDA graphs. The triton backends run
their own kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs import Job, group

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "scripts" / "kit_probe" / "run_kit_cases.py"
RUN_REGISTERED = ROOT / "scripts" / "kit_probe" / "run_registered_cases.py"
RUN_KEPT = ROOT / "scripts" / "kit_probe" / "run_kept_replay_cases.py"
UPSTREAM_PATH = "test/registered/attention/unittests/test_runner_prefix_past_page.py"
KEPT_PATH = "test/registered/attention/unittests/test_runner_kept_replay.py"
NAME43 = "v" * 43  # seed 3133: request 0's pages [3, 1, 4, 2]

pytestmark = pytest.mark.base("v0.5.23")

CASES = [
    "decode:61,62,63",
    "decode:1,64,65",
    "decode:127,128,129,130",
    "verify:4,7:3",  # upstream's registered case
    "verify:60,63,64:4",
    "verify:62:2",  # within one page, last draft at its end
    "verify:63:2",  # drafts straddle the edge
    "verify:65:2",  # the prefix passes one page
    "verify:100:1",
    "verify:100:3",
    "verify:100,100:2",
    "verify:130:2",  # three pages
    "verify:190,30:3",
]
# Prefixes past one page whose shuffle the contiguous re-write overlaps (NAME43).
SHIPPED_FAILS = ["verify:65:2", "verify:100:2", "verify:100,100:2", "verify:130:2"]


# The kit patch's upstream cases in run_registered_cases.py's order: (runner,
# breakable, backend); and where the kit as shipped fails each runner's.
REGISTERED = [
    ("verify", None, "triton"),
    ("verify", None, "trtllm_mla"),
    ("verify", None, "triton"),
    ("split_op", False, "triton"),  # MLA
    ("split_op", True, "triton"),
    ("split_op", False, "triton"),  # dense
    ("split_op", True, "triton"),
]
SHIPPED_AT = {
    "verify": "speculative_cuda_graph_runner.py:203:",  # the eager leg
    "split_op": "split_op_runner.py:358:",  # the split forward against the reference
}

# 0013's TestKeptReplayBuiltByInit: its cases' runners, and what each lacks on
# v0.5.23 (the kept replay the class counts).
KEPT = {
    "EAGLEDraftCudaGraphRunner": "_replay_kept_draft",
    "EAGLEDraftExtendCudaGraphRunner": "_replay_kept_extend",
}

KIT_COST = 35  # CPU seconds of one tree's run of CASES (2-core CPU, 2026-12-03)


def _rows(cmd: list[str], count: int, what: str, environ: dict) -> list[dict]:
    proc = subprocess.run(cmd, env=environ, capture_output=True, text=True, timeout=1200)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == count, f"{what}: {proc.returncode}\n{proc.stderr[-3000:]}"
    return rows


def run_cases(tree: Path, cases, environ: dict, *extra: str) -> list[dict]:
    cmd = [sys.executable, str(RUN), "--tree", str(tree), *extra]
    for case in cases:
        cmd += ["--case", case]
    return _rows(cmd, len(cases), str(tree), environ)


NAMES = {"registered-names": [], "name43": ["--name", NAME43]}


@group("kit23")
def kit_jobs(request) -> dict:
    """Every run of the kit's cases and of the kit patch's upstream cases, on
    each tree (the environment: before any test changed ``os.environ``)."""
    trees = request.getfixturevalue("trees_of")("v0.5.23")
    device = request.getfixturevalue("device")
    environ = dict(os.environ)
    jobs = {}
    for ident, names in NAMES.items():
        for tree, path in trees.items():
            # The patched tree carries the kit fix; the base tree's kit needs kit_fix.
            extra = [*names, *(["--fixed-kit"] if tree == "base" else [])]
            args = (path, CASES, environ, "--device", device, *extra)
            jobs["cases", ident, tree] = Job(run_cases, args, KIT_COST)
    args = (trees["base"], SHIPPED_FAILS, environ, "--device", device, "--name", NAME43)
    jobs["shipped"] = Job(run_cases, args, KIT_COST / 2)
    # The patched tree's copy (its python/ root's parent is the repository's root).
    upstream_file = trees["patched"].parent / UPSTREAM_PATH
    if upstream_file.is_file():  # else the test fails, naming it
        cmd = [sys.executable, str(RUN_REGISTERED), "--test-file", str(upstream_file)]
        cmd += ["--device", device]
        for tree, path in trees.items():
            args = ([*cmd, "--tree", str(path)], len(REGISTERED), tree, environ)
            jobs["registered", tree] = Job(_rows, args, KIT_COST / 2)
    # 0013's class of runners built by __init__: on CUDA the upstream file runs
    # it itself (test_registered23).
    kept_file = trees["patched"].parent / KEPT_PATH
    if device == "cpu" and kept_file.is_file():  # else the test fails, naming it
        cmd = [sys.executable, str(RUN_KEPT), "--test-file", str(kept_file)]
        for tree, path in trees.items():
            args = ([*cmd, "--tree", str(path)], len(KEPT), tree, environ)
            jobs["kept", tree] = Job(_rows, args, KIT_COST / 2)
    return jobs


@pytest.fixture(scope="module")
def kit23(jobs, request) -> dict:
    return jobs.results("kit23", request)


@pytest.mark.parametrize("ident", list(NAMES))
def test_kit_cases(kit23, ident):
    out = {tree: kit23["cases", ident, tree] for tree in ("base", "patched")}
    failed = {
        tree: [
            (r["kind"], r["prefix_lens"], r["draft_tokens"], r.get("error"))
            for r in rows
            if not r["ok"]
        ]
        for tree, rows in out.items()
    }
    assert failed == {tree: [] for tree in out}


def test_kit_as_shipped_misplaces_prefix_kv(kit23):
    """The base tree's kit as shipped fails these cases in its eager leg.
    Should it pass them, they no longer show what the kit patch fixes."""
    rows = kit23["shipped"]
    assert [r["ok"] for r in rows] == [False] * len(SHIPPED_FAILS), rows
    for r in rows:  # the eager leg's assertion, the first of the case
        assert r["calls"] == 1 and "not close" in r["error"], r


def test_registered_prefix_past_page(kit23, trees):
    # The patched tree's copy (its python/ root's parent is the repository's root).
    upstream_file = trees["patched"].parent / UPSTREAM_PATH
    if not upstream_file.is_file():
        pytest.fail(f"upstream test file missing: {upstream_file} (make apply BASE=v0.5.23)")
    out = {tree: kit23["registered", tree] for tree in ("base", "patched")}
    for name, rows in out.items():  # each case's layout lets the bug show
        assert all(r["premise"] for r in rows), (name, rows)
    assert [(r["runner"], r["breakable"], r["backend"]) for r in out["patched"]] == REGISTERED
    assert all(r["ok"] for r in out["patched"]), out["patched"]
    for r in out["base"]:  # the kit as shipped: where each runner compares first
        assert not r["ok"] and r["error"].startswith(SHIPPED_AT[r["runner"]]), r


def test_registered_kept_replay_built_by_init(kit23, trees, device):
    """0013's upstream class of runners built by ``__init__`` (CUDA only
    upstream), run on CPU by ``run_kept_replay_cases.py``: on the patched tree
    each runner replays its captured size through the kept replay and a padded
    one through the general path, each output the kit's eager one's; v0.5.23's
    runners have no kept replay to count."""
    if device != "cpu":
        pytest.skip("on CUDA the upstream file runs the class itself (test_registered23)")
    kept_file = trees["patched"].parent / KEPT_PATH
    if not kept_file.is_file():
        pytest.fail(f"upstream test file missing: {kept_file} (make apply BASE=v0.5.23)")
    patched, base = kit23["kept", "patched"], kit23["kept", "base"]
    assert [r["runner"] for r in patched] == list(KEPT), patched
    assert all(r["ok"] for r in patched), patched
    for r in base:
        assert not r["ok"] and r["error"].endswith(f"no attribute '{KEPT[r['runner']]}'"), r
