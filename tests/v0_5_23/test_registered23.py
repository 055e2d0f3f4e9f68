"""The series' upstream test file, run on both v0.5.23 trees.

patches/v0.5.23 0007 adds ``test/registered/attention/unittests/mla/
test_trtllm_mla_cuda_graph_metadata.py`` to SGLang; ``make apply`` puts it in
the patched tree (``build/v0.5.23/sglang``). Each tree runs it once, in a
child pytest with that tree first on the path and the harness's replacements
installed first (``registered_env23``, a ``-p`` plugin); the case groups below
are then read off the child's report. The patched tree must pass every group.
On v0.5.23 as released the groups that check what the series changes must
fail (strict xfail: a group passing on base fails this test); the
default-argument kernel parity, which the series must not change, passes on
both.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

TREES = ("base", "patched")

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_PATH = "test/registered/attention/unittests/mla/test_trtllm_mla_cuda_graph_metadata.py"
PLUGIN_DIR = Path(__file__).resolve().parent  # registered_env23.py
SCRIPTS = ROOT / "scripts"
TIMEOUT_S = 900

# group -> (the upstream test methods in it, whether it passes on base, GPU only)
GROUPS = {
    "kernel_default_arguments": (("test_default_arguments",), True, False),
    "kernel_kv_lens_out": (("test_kv_lens_out_and_offset",), False, False),
    "kernel_large_default_arguments": (("test_large_default_arguments",), True, True),
    "kernel_large_kv_lens_out": (("test_large_kv_lens_out_and_offset",), False, True),
    "graph_metadata": (("test_graph_metadata",), False, False),
    "fix_0001_double_capture": (("test_batch_size_captured_twice_reads_the_replay",), False, False),
    "fix_0002_replayed_size": (("test_replay_call_selects_replayed_size_metadata",), False, False),
    "fix_0003_dp_padded_extend": (("test_dp_padded_draft_extend_query_layout",), False, False),
    "fix_0004_fp4_rows": (("test_fp4_ragged_verify_output_has_every_row",), False, True),
    "fix_0003_uneven_extend": (("test_uneven_draft_extend_query_layout",), False, False),
    "fix_0004_unpad_bound": (("test_unpad_output_bounded_by_output_rows",), False, False),
    "fix_0005_step_guard": (("test_later_draft_step_has_no_graph_state",), False, False),
}
# "-rA" summary lines: PASSED / FAILED / ERROR / SUBPASSED(...) / SUBFAILED(...) ::Class::method
_LINE = re.compile(r"^(SUB)?(PASSED|FAILED|ERROR)(\([^)]*\))? \S*::(\w+)::(\w+)")


def _run_child(tree: Path, upstream_file: Path, device: str, tmp: Path) -> dict:
    """The upstream file on ``tree``; returns {"rc", "log", "seconds", "outcomes":
    {method: set of "PASSED" / "FAILED" / "ERROR"}}."""
    tmp.mkdir(parents=True, exist_ok=True)
    ini = tmp / "pytest.ini"
    ini.write_text("[pytest]\n")  # not this project's pytest config
    paths = [str(tree), str(SCRIPTS), str(PLUGIN_DIR)]
    paths += filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), REGTEST_DEVICE=device)
    cmd = [sys.executable, "-m", "pytest", "-c", str(ini), "-p", "registered_env23"]
    cmd += ["-p", "no:cacheprovider", "-q", "-rA", str(upstream_file)]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    outcomes: dict[str, set[str]] = {}
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m:
            outcomes.setdefault(m.group(5), set()).add(m.group(2))
    return {
        "rc": proc.returncode,
        "log": proc.stdout[-8000:] + proc.stderr[-3000:],
        "seconds": time.monotonic() - start,
        "outcomes": outcomes,
    }


@pytest.fixture(scope="session")
def registered23(trees_of, device, tmp_path_factory) -> dict:
    """Both trees' child runs, concurrently."""
    trees23 = trees_of("v0.5.23")
    # The patched tree's copy (its python/ root's parent is the repository's root).
    upstream_file = trees23["patched"].parent / UPSTREAM_PATH
    if not upstream_file.is_file():
        pytest.fail(f"upstream test file missing: {upstream_file} (make apply BASE=v0.5.23)")
    base = tmp_path_factory.mktemp("registered23")
    with ThreadPoolExecutor(len(TREES)) as pool:
        futures = {
            name: pool.submit(_run_child, trees23[name], upstream_file, device, base / name)
            for name in TREES
        }
        return {name: f.result() for name, f in futures.items()}


def _group_passed(run: dict, methods) -> tuple[bool, str]:
    seen = [run["outcomes"].get(m) for m in methods]
    if any(s is None for s in seen):
        return False, f"no outcome reported for {methods}:\n{run['log']}"
    bad = [m for m, s in zip(methods, seen, strict=True) if s - {"PASSED"}]
    return not bad, f"{bad} failed:\n{run['log']}"


def _skip_gpu_only(group: str, device: str) -> None:
    if GROUPS[group][2] and device != "cuda":
        pytest.skip("GPU-only group (the upstream file skips it without CUDA)")


def test_patched_runs_clean(registered23):
    """The child run on the patched tree exits 0 (every case, incl. collection)."""
    run = registered23["patched"]
    assert run["rc"] == 0, run["log"]


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_patched_group(registered23, device, group):
    _skip_gpu_only(group, device)
    ok, why = _group_passed(registered23["patched"], GROUPS[group][0])
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
        for name, (_, on_base, _) in sorted(GROUPS.items())
    ],
)
def test_base_group(registered23, device, group):
    _skip_gpu_only(group, device)
    ok, why = _group_passed(registered23["base"], GROUPS[group][0])
    assert ok, why


def test_report(registered23, device):
    """One line per tree in the output (-rA shows it): the child's time."""
    for name in TREES:
        run = registered23[name]
        print(f"{name}: rc {run['rc']}, {run['seconds']:.0f} s on {device}")
