"""``child.run`` through a tree's ``forkserver`` gives what a fresh interpreter gives.

The suite starts the CPU children of ``forkserver.SERVED`` on the selected
bases' trees as forks of a server that has imported the tree (conftest's
``jobs``). A fork must return what ``python -m`` returns: the module's
output, the tree's ``sglang``, what a probe records (every phase of a named
case, the eager forward too where the suite's plan runs it: each launch
count, kernel view and query, the pointers up to their names), and on failure
its exit status and error; a run past its timeout is killed and the server
serves the next one.
"""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest

from mla_harness import child, probe, scenarios
from sglpatch.errors import UserError

EMPTY = {"scenarios": []}


@pytest.fixture
def tree(trees):
    tree = trees["patched"]
    if child._forkservers is None or not child._forkservers.serves(
        "mla_harness.probe", tree, "cpu"
    ):
        pytest.skip("no forkserver for this tree (a GPU host, or its base not selected)")
    return tree


def _fresh(monkeypatch, run):
    with monkeypatch.context() as m:
        m.setattr(child, "_forkservers", None)
        return run()


def test_fork_returns_what_python_m_returns(tree, monkeypatch):
    forked = probe.run_probe(tree, EMPTY)
    fresh = _fresh(monkeypatch, lambda: probe.run_probe(tree, EMPTY))
    assert (forked.base, forked.sglang_file, forked.scenarios) == (
        fresh.base,
        fresh.sglang_file,
        fresh.scenarios,
    )
    assert forked.sglang_file.startswith(str(tree))


POINTERS = ("ptrs", "capture_ptrs")  # data_ptr values: each process has its own


def _plain(value):
    """``value`` as plain data, the pointers under ``POINTERS`` renamed in order
    of first appearance within each snapshot of them (which live fields share
    an address is kept; an address a dead tensor had may come back in one
    process and not in another, so none is compared across snapshots)."""
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _snapshots(v) if k in POINTERS else _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.shape, value.tolist())
    return value


def _snapshots(value):
    """A call's ``ptrs`` (every step's backend) is one snapshot; each captured
    size's ``capture_ptrs`` one."""
    if isinstance(value, dict):
        return {k: _named(v, {}) for k, v in value.items()}
    return _named(value, {})


def _named(value, names: dict):
    if isinstance(value, dict):
        return {k: _named(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_named(v, names) for v in value]
    return names.setdefault(value, len(names)) if isinstance(value, int) else value


def test_fork_probes_what_python_m_probes(tree, base, monkeypatch):
    from suite import differential_plan

    plan = differential_plan(base, 1, 2026)  # the suite's plan: its eager forward too
    plan["scenarios"] = [scenarios.TEST_CASES[0]]
    forked = probe.run_probe(tree, plan)
    fresh = _fresh(monkeypatch, lambda: probe.run_probe(tree, plan))
    assert forked.scenarios[0].phases.keys() == set(probe.phase_names(base))
    a, b = _plain(forked), _plain(fresh)
    assert a == b, _first_difference(a, b)


def _first_difference(a, b, path="") -> str:
    """Where two plain values first differ, for the assertion's message."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for k in a:
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}/{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {str(a)[:300]} != {str(b)[:300]}"


def test_fork_fails_as_python_m_fails(tree, monkeypatch, tmp_path):
    args = ("--plan", str(tmp_path / "missing.json"), "--out", str(tmp_path / "out"))

    def error():
        with pytest.raises(UserError) as exc:
            child.run("mla_harness.probe", tree, "cpu", *args)
        head, _, stderr = str(exc.value).partition(":\n")
        return head, stderr.strip().splitlines()[-1]

    forked = error()
    assert forked == _fresh(monkeypatch, error)
    assert forked[0].endswith("(exit 1)") and "missing.json" in forked[1], forked


def test_fork_past_its_timeout_is_killed(tree, base):
    from suite import differential_plan

    plan = differential_plan(base, 1, 2026)
    with pytest.raises(subprocess.TimeoutExpired):
        child.exchange("mla_harness.probe", tree, "cpu", "--plan", plan, timeout=0.5)
    assert probe.run_probe(tree, EMPTY).scenarios == []  # the server serves on
