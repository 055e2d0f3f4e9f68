"""`make bench` in CPU mode: launch counts and memory are exact, so CI checks them.

Runs the benchmark's own entry point (both trees, separate processes, one run)
with the CPU defaults (the quick sizes) and asserts that the patched tree never
launches, allocates or holds more than the base in any phase, and launches
strictly less per EAGLE iteration, per eager draft init and per plain decode
replay. CPU timings measure the Triton interpreter and are not checked; what
the run prints is: only what means something on a CPU, the upstream warnings
hidden and said so, and every file it wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys

from mla_harness import subprocess_env


def test_bench_cpu_defaults_patched_never_worse(trees, tmp_path, request):
    env = subprocess_env()
    cmd = [sys.executable, "-m", "mla_bench", "--build", request.config.getoption("--build")]
    cmd += ["--device", "cpu", "--check", "--out-dir", str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    record = json.loads((tmp_path / "latest.json").read_text())
    assert record["config"]["contexts"] == [4096]  # the CPU default: the quick sizes
    stamp = record["date"]
    assert (tmp_path / f"bench-{stamp}.json").read_text() == (tmp_path / "latest.json").read_text()
    assert (tmp_path / f"bench-{stamp}.png").stat().st_size > 10_000
    assert (tmp_path / "eagle_metadata.png").read_bytes() == (
        tmp_path / f"bench-{stamp}.png"
    ).read_bytes()
    assert record["command"].startswith("PYTHONPATH=scripts python -m mla_bench --build ")
    for row in record["result"]["rows"]:
        base, patched = row["base"], row["patched"]
        assert patched["iteration"]["launches"] < base["iteration"]["launches"]
        assert patched["draft_eager"]["launches"] < base["draft_eager"]["launches"]
        assert patched["decode_replay"]["launches"] < base["decode_replay"]["launches"]
    err = proc.stderr
    assert "[bench] quick sizes, 2 trees x 2 points, 2 repeats on CPU (the CPU default):" in err
    assert 'BENCH_ARGS="--full" for the full sizes (about 32 min)' in err
    assert "UserWarning:" not in err and "warnings.warn" not in err
    assert "[bench] hid 6 UserWarnings of SGLang's imports over 2 trees" in err
    assert f"/: bench-{stamp}.json, bench-{stamp}.png (this run), latest.json," in err
    assert "context 4096 bs 4 done (2/2 points, " in err
    table = proc.stdout
    assert "Left out on CPU: GPU µs" in table and "TPOT effect" not in table
    assert " 0.0 " not in table and " - |" not in table
    print(table)
