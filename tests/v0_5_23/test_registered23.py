"""The series' upstream test files, run on both v0.5.23 trees.

The series adds six upstream test files to SGLang (``FILES``); ``make apply``
puts them in the patched tree (``build/v0.5.23/sglang``). Each tree runs them
in two child pytests with that tree first on the path and the harness's
replacements installed first (``registered_env23``, a ``-p`` plugin;
``CHILDREN``: the attention test kit's import enters a parallel override for
the whole process (``mla_attention.py:29-30``) that the DP padding file's
topology check refuses, so the two files that use the kit run apart, as
upstream's CI runs each file in a process of its own; the other four share
one child, as each would spend most of its time importing the tree); the case
groups below are then read off the children's reports, each named after the
patch whose case it is (the input copies file's, PR 7's and PR 8's, are
``test_input_copies23``'s). The patched tree must pass every group; 0009's
file (the kit's fix) and 0013's kit file skip without CUDA, so their groups
are GPU-only and on CPU their child need only exit clean (``test_kit23`` runs
their case tables on CPU). On v0.5.23 as
released the groups that check what the series changes must fail (strict
xfail: a group passing on base fails this test); what the series must not
change passes on both: the default-argument kernel parity and the FP4 KV
cache configurations 0005 still accepts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jobs import Job, group

TREES = ("base", "patched")

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = Path(__file__).resolve().parent  # registered_env23.py
SCRIPTS = ROOT / "scripts"
TIMEOUT_S = 900

# key -> the upstream file, relative to the patched tree's repository root
FILES = {
    "metadata": "test/registered/attention/test_trtllm_mla_cuda_graph_metadata.py",
    "dp_padding": "test/registered/unit/model_executor/test_spec_dp_padding.py",
    "server_args": "test/registered/unit/server_args/test_trtllm_mla_fp4_kv_cache_args.py",
    "input_copies": "test/registered/model_executor/test_cuda_graph_input_copies.py",
    "prefix_past_page": "test/registered/attention/unittests/test_runner_prefix_past_page.py",
    "kept_replay": "test/registered/attention/unittests/test_runner_kept_replay.py",
}
# the files each child runs, and its CPU seconds on one tree (2-core CPU, 2026-12-04)
CHILDREN = (
    (("metadata", "dp_padding", "server_args", "input_copies"), 30),
    (("prefix_past_page", "kept_replay"), 15),  # the kit's files
)
# group -> (file key, its test methods, whether it passes on base, GPU only)
GROUPS = {
    "0001_double_capture": (
        "metadata",
        ("test_batch_size_captured_twice_reads_the_replay",),
        False,
        False,
    ),
    "0002_replayed_size": (
        "metadata",
        ("test_replay_call_selects_replayed_size_metadata",),
        False,
        False,
    ),
    "0003_dp_padding": ("dp_padding", ("test_padding_adds_whole_requests",), False, False),
    "0003_idle_rank": (
        "dp_padding",
        ("test_idle_rank_pads_the_counts_as_a_busy_rank",),
        False,
        False,
    ),
    "0003_tbo_children": (
        "dp_padding",
        ("test_two_batch_overlap_children_pad_whole_requests",),
        False,
        False,
    ),
    "0003_coordinated_step": (
        "dp_padding",
        ("test_coordinated_step_pads_whole_requests",),
        False,
        False,
    ),
    "0004_verify_state": (
        "dp_padding",
        ("test_verify_state_covers_the_dummy_requests",),
        False,
        False,
    ),
    "0004_mask_layout": ("dp_padding", ("test_verify_mask_grows_by_its_layout",), False, False),
    "0004_hybrid_idle": (
        "dp_padding",
        ("test_idle_hybrid_ssm_rank_verifies_dummy_requests",),
        False,
        False,
    ),
    "0005_fp4_spec_refusal": (
        "server_args",
        ("test_fp4_cache_refused_where_trtllm_mla_runs_verify_or_the_draft",),
        False,
        False,
    ),
    "0005_fp4_still_accepted": (
        "server_args",
        ("test_fp4_cache_accepted_where_trtllm_mla_runs_neither",),
        True,
        False,
    ),
    "0006_own_output": ("metadata", ("test_ragged_verify_output_is_its_own_tensor",), False, False),
    "0007_shared_metadata": ("metadata", ("test_draft_steps_share_one_metadata",), False, False),
    "0007_no_parent_state": (
        "metadata",
        ("test_init_cuda_graph_state_allocates_no_parent_state",),
        False,
        False,
    ),
    "0007_step_guard": ("metadata", ("test_later_draft_step_has_no_graph_state",), False, False),
    "0008_kernel_default_arguments": ("metadata", ("test_default_arguments",), True, False),
    "0008_kernel_kv_lens_out": ("metadata", ("test_kv_lens_out_and_offset",), False, False),
    "0008_kernel_large_default_arguments": (
        "metadata",
        ("test_large_default_arguments",),
        True,
        True,
    ),
    "0008_kernel_large_kv_lens_out": (
        "metadata",
        ("test_large_kv_lens_out_and_offset",),
        False,
        True,
    ),
    "0008_graph_metadata": ("metadata", ("test_graph_metadata",), False, False),
    # trtllm_mla's verify case skips without SM100 (a subtest of the MLA method)
    "0009_verify_prefix_past_page": (
        "prefix_past_page",
        ("test_mla_eagle_verify_cuda_graph_cases", "test_dense_eagle_verify_cuda_graph_cases"),
        False,
        True,
    ),
    "0009_split_op_prefix_past_page": (
        "prefix_past_page",
        ("test_mla_split_op_extend_cases", "test_dense_split_op_extend_cases"),
        False,
        True,
    ),
    # on CPU: test_kit23's test_registered_kept_replay_built_by_init
    "0013_kept_replay_built_by_init": (
        "kept_replay",
        ("test_kept_at_a_captured_size",),
        False,
        True,
    ),
}
# "-rA" summary lines: PASSED / FAILED / ERROR / SUBPASSED(...) / SUBFAILED(...) ::Class::method
_LINE = re.compile(r"^(SUB)?(PASSED|FAILED|ERROR)(\([^)]*\))? \S*::(\w+)::(\w+)")


def _run_child(tree: Path, files: dict, device: str, tmp: Path, environ: dict) -> dict:
    """The upstream ``files`` ({key: path}) on ``tree``, in one child pytest
    (``environ``: the environment it starts from, taken before any test changed
    ``os.environ``); returns {key: {"rc", "log", "seconds", "flashinfer",
    "outcomes": {method: set of "PASSED" / "FAILED" / "ERROR"}}}, the child's
    exit status, log, time and FlashInfer the same for every key."""
    tmp.mkdir(parents=True, exist_ok=True)
    ini = tmp / "pytest.ini"
    ini.write_text("[pytest]\n")  # not this project's pytest config
    paths = [str(tree), str(SCRIPTS), str(PLUGIN_DIR)]
    paths += filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))
    env = dict(environ, PYTHONPATH=os.pathsep.join(paths), REGTEST_DEVICE=device)
    cmd = [sys.executable, "-m", "pytest", "-c", str(ini), "-p", "registered_env23"]
    cmd += ["-p", "no:cacheprovider", "-q", "-rA", *map(str, files.values())]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    # The report names no path (each file is outside the child's rootdir): a
    # case's file is the one defining its class.
    key_of = {
        name: key
        for key, path in files.items()
        for name in re.findall(r"^class (\w+)", Path(path).read_text(), re.M)
    }
    outcomes: dict[str, dict[str, set[str]]] = {key: {} for key in files}
    flashinfer = "not reported"
    for line in proc.stdout.splitlines():
        if line.startswith("flashinfer: "):  # registered_env23's summary line
            flashinfer = line.removeprefix("flashinfer: ")
        m = _LINE.match(line)
        if m:
            outcomes[key_of[m.group(4)]].setdefault(m.group(5), set()).add(m.group(2))
    run = {
        "rc": proc.returncode,
        "log": proc.stdout[-16000:] + proc.stderr[-3000:],  # five files: room for a failure
        "seconds": time.monotonic() - start,
        "flashinfer": flashinfer,
    }
    return {key: dict(run, outcomes=outcomes[key]) for key in files}


@group("registered23")
def registered_jobs(request) -> dict:
    """Each tree's child run: tree -> {file key: its part of the run}."""
    trees23 = request.getfixturevalue("trees_of")("v0.5.23")
    device = request.getfixturevalue("device")
    # The patched tree's copies (its python/ root's parent is the repository's root).
    files = {key: trees23["patched"].parent / path for key, path in FILES.items()}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        pytest.fail(f"upstream test file missing: {', '.join(missing)} (make apply BASE=v0.5.23)")
    base = request.getfixturevalue("tmp_path_factory").mktemp("registered23")
    environ = dict(os.environ)
    return {
        (tree, i): Job(
            _run_child,
            (trees23[tree], {k: files[k] for k in keys}, device, base / f"{tree}{i}", environ),
            cost,
        )
        for tree in TREES
        for i, (keys, cost) in enumerate(CHILDREN)
    }


@pytest.fixture(scope="session")
def registered23(jobs, request) -> dict:
    """{tree: {file key: run}}."""
    runs: dict = {tree: {} for tree in TREES}
    for (tree, _), child in jobs.results("registered23", request).items():
        runs[tree].update(child)
    return runs


def _group_passed(runs: dict, group: str) -> tuple[bool, str]:
    key, methods, _, _ = GROUPS[group]
    run = runs[key]
    seen = [run["outcomes"].get(m) for m in methods]
    if any(s is None for s in seen):
        return False, f"no outcome reported for {methods}:\n{run['log']}"
    bad = [m for m, s in zip(methods, seen, strict=True) if s - {"PASSED"}]
    return not bad, f"{bad} failed:\n{run['log']}"


def _skip_gpu_only(group: str, device: str) -> None:
    if GROUPS[group][3] and device != "cuda":
        pytest.skip("GPU-only group (the upstream file skips it without CUDA)")


@pytest.mark.parametrize("key", sorted(FILES))
def test_patched_runs_clean(registered23, device, key):
    """The patched tree's child exits 0 (every case of every file, collection
    included) and reports each file's cases (on CPU, a file whose every group
    is GPU-only reports none: its classes skip)."""
    run = registered23["patched"][key]
    assert run["rc"] == 0, run["log"]
    gpu_only = all(g[3] for g in GROUPS.values() if g[0] == key)
    if device == "cuda" or not gpu_only:
        assert run["outcomes"], f"no case of {FILES[key]} reported:\n{run['log']}"


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_patched_group(registered23, device, group):
    _skip_gpu_only(group, device)
    ok, why = _group_passed(registered23["patched"], group)
    assert ok, why


@pytest.mark.parametrize(
    "group",
    [
        pytest.param(
            name,
            marks=()
            if on_base
            else pytest.mark.xfail(strict=True, reason="behaviour the series adds"),
        )
        for name, (_, _, on_base, _) in sorted(GROUPS.items())
    ],
)
def test_base_group(registered23, device, group):
    _skip_gpu_only(group, device)
    ok, why = _group_passed(registered23["base"], group)
    assert ok, why


def test_report(registered23, device):
    """One line per tree in the output (-rA shows it): the child's time and
    the FlashInfer it used (``REGTEST_FLASHINFER``: registered_env23)."""
    for name in TREES:
        for key, run in sorted(registered23[name].items()):
            print(
                f"{name} {key}: rc {run['rc']}, {run['seconds']:.0f} s on {device},"
                f" flashinfer {run['flashinfer']}"
            )
