"""Shared pytest setup: ``scripts/`` on the path, options, the two SGLang trees.

The base tree and the patched tree are imported in separate processes
(``mla_harness.probe``), concurrently, with the same scenarios (generated and named); the
``results`` fixture probes both once per session.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from mla_harness.records import ProbeResult

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

TREES = ("base", "patched")
REPORT: list[str] = []
# make hands its variables to pytest as SGLPATCH_MK_* (PYTEST_ADDOPTS carries its
# arguments); the tools the tests start must not take them as their own make's.
for _key in [key for key in os.environ if key.startswith("SGLPATCH_MK_")]:
    del os.environ[_key]


def pytest_addoption(parser):
    group = parser.getgroup("sglpatch")
    group.addoption("--build", default=str(ROOT / "build"), help="build directory of `make apply`")
    group.addoption(
        "--scenarios",
        type=int,
        default=None,
        help="generated scenarios per differential run (default: 40)",
    )
    group.addoption("--scenario-seed", type=int, default=2026)
    group.addoption(
        "--graph-replays", type=int, default=2000, help="replays per mode in the GPU graph test"
    )


@pytest.fixture(scope="session")
def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="session")
def trees(request) -> dict[str, Path]:
    from sglpatch.trees import tree_paths

    paths = dict(zip(TREES, tree_paths(Path(request.config.getoption("--build"))), strict=True))
    for name, path in paths.items():
        if not (path / "sglang" / "__init__.py").is_file():
            pytest.fail(f"{name} tree missing at {path}: run `make apply` first")
    return paths


@pytest.fixture(scope="session")
def plan(request) -> dict:
    from mla_harness import scenarios

    count = request.config.getoption("--scenarios") or 40
    seed = request.config.getoption("--scenario-seed")
    return scenarios.plan(count, seed=seed, cases=scenarios.TEST_CASES)


@pytest.fixture(scope="session")
def results(trees, plan, device) -> dict[str, ProbeResult]:
    """Probe output per tree: {"base": ..., "patched": ...}."""
    from mla_harness import probe, scenarios

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(probe.run_probe, path, plan, device) for name, path in trees.items()
        }
        out = {name: f.result() for name, f in futures.items()}
    for name in TREES:
        assert Path(out[name].sglang_file).is_relative_to(trees[name]), (
            "probe imported the wrong tree"
        )
    named = len(scenarios.TEST_CASES)
    generated = len(plan["scenarios"]) - named
    REPORT.append(
        f"{generated} generated + {named} named scenarios x {len(probe.PHASES)} phases"
        f" on {device}, per tree"
    )
    return out


def xfail_summary(reports) -> str:
    """One line saying what the xfails are: the base-tree halves of strict xfail
    tests (the test holds on the patched tree; v0.5.12 lacks the change, or has
    the bug a fix patch removes), so they are expected, not problems."""
    if not reports:
        return ""
    reasons = Counter(getattr(report, "wasxfail", "") or "?" for report in reports)
    parts = "; ".join(f"{count}: {reason}" for reason, count in sorted(reasons.items()))
    return (
        f"{len(reports)} xfailed, as expected: each is the base-tree half of a strict-xfail"
        f" test that passes on the patched tree ({parts}); a base half that passed would"
        " fail the run"
    )


def pytest_terminal_summary(terminalreporter):
    for line in REPORT:
        terminalreporter.write_line(f"backend probes: {line}")
    line = xfail_summary(terminalreporter.stats.get("xfailed", []))
    if line:
        terminalreporter.write_line(line)
