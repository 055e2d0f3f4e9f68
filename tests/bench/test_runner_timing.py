"""``runner_check``'s timers: whole ``execute`` calls without the section timers.

``RunnerCheck.time_execute`` times every other call of a path whole, with
nothing wrapped inside it, and the others by section (``sections`` wraps the
methods of ``SECTIONS`` on the runner's objects). Driven here on a runner
object of the test's own (this checks the harness's bookkeeping, not SGLang),
two paths alternating as the verify runner's do: each call sees the wrappers
installed or not, and the rows count and combine what each kind of call
measured. ``RunnerCheck.pairs`` alternates each runner's kept replay on and
off within one process and restores it. ``--host-only`` is refused off a CPU
measurement, and ``--pairs`` beside ``--time``, in one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
from types import MethodType, SimpleNamespace

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
        self.path, self.sizes = "execute", set()

    def replay(self, bs):
        self.path = "load_batch, execute" if self.path == "execute" else "execute"
        self.runner.path = self.path
        # A batch planned ahead: its load_batch's µs, 1000 on a size's first
        # call (the warm-up), 10 after.
        first = bs not in self.sizes
        self.sizes.add(bs)
        planned = self.path == "load_batch, execute"
        self.plan_us = (1000.0 if first else 10.0) if planned else None
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
        # Planned ahead: its load_batch's median over the timed calls only.
        assert r.get("load_batch_us") == (10.0 if r["path"] == "load_batch, execute" else None)
        parts = sum(r[f"{k}_us"] for k in runner_check.SECTION_NAMES)
        assert abs(r["rest_us"] - (r["execute_us"] - parts)) < 1e-9
        assert r["buffers_us"] == 0.0  # no buffer registry on this runner
        assert r["metadata_us"] > 0 and r["graph_us"] > 0
    # Nothing is left wrapped.
    assert "replay" not in vars(check.runner.backend)
    assert "init_forward_metadata_out_graph" not in vars(check.runner.attn_backend)


class _KeptRunner:
    """A runner with 0013's switch: ``execute`` keeps a replay per size while
    ``_keeps_replays`` is on, and takes 300 µs more without one (on
    ``_CLOCK``, which only its calls advance: no timing noise). ``turns_off``:
    its backend keeps no replay, so its first kept call turns them off for
    good; ``fails_at``: its call of that number raises; ``cold``: each of the
    first 3 calls after ``_keeps_replays`` is set takes that many seconds more."""

    capture_bs = (1, 2)

    def __init__(self, sizes=(1, 2), turns_off=False, fails_at=None, cold=0.0):
        self.__dict__.update(_keeps_replays=True, _since_set=3)
        self._kept_replays, self.sizes = {}, sizes
        self.turns_off, self.fails_at, self.cold = turns_off, fails_at, cold
        self.seen = []  # per execute: (bs, kept replay on, execute wrapped)

    def __setattr__(self, name, value):
        if name == "_keeps_replays":
            self.__dict__["_since_set"] = 0
        super().__setattr__(name, value)

    def execute(self, bs):
        self.seen.append((bs, self._keeps_replays, "execute" in vars(self)))
        if len(self.seen) == self.fails_at:
            raise RuntimeError("a failing replay")
        _CLOCK.now += 100e-6
        if self.__dict__["_since_set"] < 3:
            self.__dict__["_since_set"] += 1
            _CLOCK.now += self.cold
        if self._keeps_replays and self.turns_off:
            self._keeps_replays = False
        if self._keeps_replays and bs in self.sizes:
            self._kept_replays[bs] = True
        else:
            _CLOCK.now += 300e-6


class _KeptCheck:
    """``runner_check``'s per-runner object; its ``path`` alternates at each
    call, as verify's pre-planned batches do, or stays pre-planned while
    ``plan_always`` is set."""

    name, label = "Fake", ""

    def __init__(self, runner):
        self.runner, self.path, self.paths = runner, "execute", []

    def ready(self, bs):
        def run():
            planned = self.path == "execute" or getattr(self, "plan_always", False)
            self.path = "load_batch, execute" if planned else "execute"
            self.paths.append(self.path)
            return self.runner.execute(bs)

        return None, run


_CLOCK = SimpleNamespace(now=0.0)


def _pairs(*runners, **kwargs):
    env = SimpleNamespace(
        runners=[_KeptCheck(r) for r in runners], device="cpu", clock=lambda: _CLOCK.now
    )
    env.back_to_back = MethodType(runner_check.RunnerCheck.back_to_back, env)
    return runner_check.RunnerCheck.pairs(env, **kwargs), env.runners


def test_pairs_alternate_the_kept_replay_in_one_process():
    a, b = _KeptRunner(), _KeptRunner()
    rows, checks = _pairs(a, b, iterations=8, warmup=1, blocks=2, block_iterations=4)
    pre, plain = "load_batch, execute", "execute"
    assert [(r["bs"], r["pairs"], r["verify"], r["count"]) for r in rows] == [
        (bs, *row)
        for bs in (1, 2)
        for row in (("single", plain, 4), ("single", pre, 4), ("loop", "load_batch, execute", 2))
    ]
    for r in rows:
        # Each pair's general half took the 300 µs more, per runner.
        assert r["kept_lower"] == r["count"]
        assert abs(r["general_us"] - r["kept_us"] - 2 * 300) < 1e-3
    for runner in (a, b):
        per_size = [[s[1:] for s in runner.seen if s[0] == bs] for bs in (1, 2)]
        # Per size: a warm-up call per mode and 8 single pairs (execute
        # wrapped), then 2 pairs of blocks of 1 + 4 calls (not wrapped); the
        # kept half first in two pairs of four.
        for calls in per_size:
            assert len(calls) == 1 + 1 + 16 + 2 * 2 * 5
            assert calls[:2] == [(True, True), (False, True)]
            assert calls[2:18] == [(on, True) for on in [True, False] * 2 + [False, True] * 2] * 2
            assert calls[18:] == [(on, False) for on in [True] * 5 + [False] * 5] * 2
        assert runner._keeps_replays and "execute" not in vars(runner)
    for check in checks:
        for size in (check.paths[:38], check.paths[38:]):
            single, blocks = size[2:18], size[18:]
            # Both halves of a pair take the same path; pairs alternate it.
            assert all(single[i] == single[i + 1] != single[i + 2] for i in range(0, 14, 2))
            # Back to back, every verify planned ahead, as the EAGLE worker does.
            assert set(blocks) == {"load_batch, execute"}
        assert not check.plan_always


def test_pairs_leave_the_warm_up_out_of_a_block():
    # The first 3 calls after each switch take 20 ms more: a block of 3
    # warm-up and 2 timed iterations is timed on the 2 (100 and 400 µs).
    rows, _ = _pairs(_KeptRunner(cold=0.02), iterations=1, warmup=3, blocks=2, block_iterations=2)
    loops = [r for r in rows if r["pairs"] == "loop"]
    assert len(loops) == 2
    for r in loops:
        assert abs(r["kept_us"] - 100) < 1e-3 and abs(r["general_us"] - 400) < 1e-3


def test_pairs_only_where_every_runner_keeps_its_replay():
    class Before:  # a tree without kept replays
        capture_bs = (1, 2)

        def execute(self, bs):
            raise AssertionError("not run")

    assert _pairs(_KeptRunner(), Before(), iterations=2)[0] == []
    off = _KeptRunner()
    off._keeps_replays = False  # its modes rule kept replays out
    assert _pairs(_KeptRunner(), off, iterations=2)[0] == [] and not off._keeps_replays
    assert off.seen == []
    # A backend without a replayer turns them off at the first kept call:
    # nothing is measured, and they stay off.
    other, without = _KeptRunner(), _KeptRunner(turns_off=True)
    assert _pairs(other, without, iterations=2, warmup=1)[0] == []
    assert not without._keeps_replays and other._keeps_replays and len(without.seen) == 1
    # One runner keeps no replay at bs 2: that size is left out.
    rows, _ = _pairs(_KeptRunner(), _KeptRunner(sizes=(1,)), iterations=2, warmup=1, blocks=2)
    assert {r["bs"] for r in rows} == {1}


def test_pairs_restore_the_runners_when_a_replay_fails():
    for fails_at in (5, 25):  # in a single pair; in a block
        runner = _KeptRunner(fails_at=fails_at)
        try:
            _pairs(runner, iterations=4, warmup=1, blocks=2, block_iterations=4)
        except RuntimeError:
            pass
        else:
            raise AssertionError("the failure was not raised")
        assert runner._keeps_replays and "execute" not in vars(runner)


def test_refused_in_one_line(trees_of):
    tree = trees_of("v0.5.23")["patched"]
    host_only = "--host-only: a CPU measurement, with --time or --pairs"
    pairs = "--pairs: a measurement of its own, without --time and --loop"
    for device, args, error in (
        ("cuda", ["--host-only", "--time", "2"], host_only),
        ("cpu", ["--host-only"], host_only),
        ("cpu", ["--pairs", "2", "--time", "2"], pairs),
    ):
        cmd = [sys.executable, "-m", "mla_harness.runner_check", "--tree", str(tree)]
        cmd += ["--device", device, *args]
        proc = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True)
        assert proc.returncode != 0
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines == [f"mla_harness.runner_check: error: {error}"], proc.stderr
