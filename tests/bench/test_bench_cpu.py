"""`make bench` in CPU mode: launch counts and memory are exact, so CI checks them.

Runs the benchmark's own entry point (both trees, separate processes, one run)
at small sizes and asserts that the patched tree never launches, allocates or
holds more than the base in any phase, and launches strictly less per EAGLE
iteration, per eager draft init and per plain decode replay. CPU timings
measure the Triton interpreter and are not checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

from mla_harness import subprocess_env


def test_bench_quick_patched_never_worse(trees, tmp_path, request):
    env = subprocess_env()
    cmd = [sys.executable, "-m", "mla_bench", "--build", request.config.getoption("--build")]
    cmd += ["--quick", "--device", "cpu", "--check", "--out-dir", str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    record = json.loads((tmp_path / "latest.json").read_text())
    assert (tmp_path / "eagle_metadata.png").stat().st_size > 10_000
    for row in record["result"]["rows"]:
        base, patched = row["base"], row["patched"]
        assert patched["iteration"]["launches"] < base["iteration"]["launches"]
        assert patched["draft_eager"]["launches"] < base["draft_eager"]["launches"]
        assert patched["decode_replay"]["launches"] < base["decode_replay"]["launches"]
    print(record["table"])
