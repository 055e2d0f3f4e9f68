"""`make bench` refuses bad flags with one line and a non-zero exit, before any work."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mla_harness import subprocess_env


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps", "0"], "--steps must be >= 1"),
        (["--batch-sizes", "1,x"], "expected comma-separated integers"),
        (["--batch-sizes", "128"], "--batch-sizes must not exceed --cuda-graph-max-bs"),
        (["--page-size", "16"], "invalid choice"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_bad_flags(flags, message, tmp_path):
    cmd = [sys.executable, "-m", "mla_bench", "--build", str(tmp_path), "--device", "cpu", *flags]
    proc = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not (tmp_path / "bench").exists()


def test_missing_trees_named(tmp_path):
    env = subprocess_env()
    env.pop("SGLPATCH_BASE_TREE", None)
    env.pop("SGLPATCH_PATCHED_TREE", None)
    cmd = [sys.executable, "-m", "mla_bench", "--build", str(tmp_path), "--device", "cpu"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "tree missing" in proc.stderr and "make apply" in proc.stderr
