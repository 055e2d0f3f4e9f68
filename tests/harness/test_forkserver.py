"""``child.run`` through a tree's ``forkserver`` gives what a fresh interpreter gives.

The suite starts the CPU children of ``forkserver.SERVED`` on the selected
bases' trees as forks of a server that has imported the tree (conftest's
``jobs``). A fork must return what ``python -m`` returns: the module's
output, the tree's ``sglang``, and on failure its exit status and error; a run
past its timeout is killed and the server serves the next one.
"""

from __future__ import annotations

import subprocess

import pytest

from mla_harness import child, probe
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
