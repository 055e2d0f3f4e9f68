"""``runner_check``'s timers: whole ``execute`` calls without the section timers.

``RunnerCheck.time_execute`` times every other call of a path whole, with
nothing wrapped inside it, and the others by section (``sections`` wraps the
methods of ``SECTIONS`` on the runner's objects). Driven here on a runner
object of the test's own (this checks the harness's bookkeeping, not SGLang),
two paths alternating as the verify runner's do: each call sees the wrappers
installed or not, and the rows count and combine what each kind of call
measured. ``--host-only`` is refused off a CPU measurement, in one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

from mla_harness import runner_check, subprocess_env


class _Backend:
    def init_forward_metadata_out_graph(self, forward_batch):
        pass


class _Graphs:
    def replay(self, key, forward_batch):
        pass


class _Runner:
    """An object with what ``time_execute`` and ``sections`` reach: its
    ``execute`` notes whether the metadata call and the replay are wrapped."""

    capture_bs = (1, 2)

    def __init__(self):
        self.attn_backend, self.backend = _Backend(), _Graphs()
        self.seen = []  # per execute: (path, metadata call wrapped, replay wrapped)
        self.path = None

    def execute(self, forward_batch):
        wrapped = (
            "init_forward_metadata_out_graph" in vars(self.attn_backend),
            "replay" in vars(self.backend),
        )
        self.seen.append((self.path, *wrapped))
        self.attn_backend.init_forward_metadata_out_graph(forward_batch)
        self.backend.replay(None, forward_batch)


class _Check:
    """``runner_check``'s per-runner object: two paths in turn, as verify."""

    name, label = "Fake", ""

    def __init__(self):
        self.runner = _Runner()
        self.path = "execute"

    def replay(self, bs):
        self.path = "load_batch, execute" if self.path == "execute" else "execute"
        self.runner.path = self.path
        return None, self.runner.execute(None)


def test_whole_calls_carry_no_section_timers():
    check = _Check()
    env = SimpleNamespace(runners=[check], device="cpu", clock=time.perf_counter)
    rows = runner_check.RunnerCheck.time_execute(env, repeats=6, warmup=1)
    # Per size: 1 warm-up, 2 * 6 timed calls, one counted call per path.
    timed = check.runner.seen
    assert len(timed) == 2 * (1 + 12 + 2)
    for path in ("execute", "load_batch, execute"):
        # Per size, the path's calls alternate whole / sectioned (the counted
        # call is neither: not timed, nothing wrapped).
        first = [(m, r) for p, m, r in timed[:15] if p == path]
        assert first[:6] == [(False, False), (True, True)] * 3
        assert (False, False) in first[6:]
    assert [(r["bs"], r["path"]) for r in rows] == [
        (1, "execute"),
        (1, "load_batch, execute"),
        (2, "execute"),
        (2, "load_batch, execute"),
    ]
    for r in rows:
        assert r["samples"] == r["sectioned_samples"] == 3
        parts = sum(r[f"{k}_us"] for k in runner_check.SECTION_NAMES)
        assert abs(r["rest_us"] - (r["execute_us"] - parts)) < 1e-9
        assert r["buffers_us"] == 0.0  # no buffer registry on this runner
        assert r["metadata_us"] > 0 and r["graph_us"] > 0
    # Nothing is left wrapped.
    assert "replay" not in vars(check.runner.backend)
    assert "init_forward_metadata_out_graph" not in vars(check.runner.attn_backend)


def test_host_only_refused_off_a_cpu_time_measurement(trees_of):
    tree = trees_of("v0.5.23")["patched"]
    for device, args in (("cuda", ["--time", "2"]), ("cpu", [])):
        cmd = [sys.executable, "-m", "mla_harness.runner_check", "--tree", str(tree)]
        cmd += ["--device", device, "--host-only", *args]
        proc = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True)
        assert proc.returncode != 0
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines == [
            "mla_harness.runner_check: error: --host-only: a CPU measurement, with --time"
        ], proc.stderr
