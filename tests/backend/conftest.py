"""Fixtures for the backend tests: both trees probed once per session.

The base tree and the patched tree are imported in separate processes
(``mla_harness.probe``), concurrently, with the same generated scenarios.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from mla_harness import probe, scenarios

TREES = ("base", "patched")
REPORT: list[str] = []


def _tree_paths(build: Path) -> dict[str, Path]:
    from sglpatch.trees import tree_paths

    return dict(zip(TREES, tree_paths(build)))


@pytest.fixture(scope="session")
def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="session")
def trees(request) -> dict[str, Path]:
    paths = _tree_paths(Path(request.config.getoption("--build")))
    for name, path in paths.items():
        if not (path / "sglang" / "__init__.py").is_file():
            pytest.fail(f"{name} tree missing at {path}: run `make apply` first")
    return paths


@pytest.fixture(scope="session")
def plan(request, device) -> dict:
    count = request.config.getoption("--scenarios") or (300 if device == "cuda" else 40)
    return scenarios.plan(count, seed=request.config.getoption("--scenario-seed"))


@pytest.fixture(scope="session")
def results(trees, plan, device) -> dict[str, dict]:
    """Probe output per tree: {"base": ..., "patched": ...}."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(probe.run_probe, path, plan, device) for name, path in trees.items()}
        out = {name: f.result() for name, f in futures.items()}
    for name in TREES:
        assert Path(out[name]["sglang_file"]).is_relative_to(trees[name]), "probe imported the wrong tree"
    REPORT.append(f"{len(plan['scenarios'])} generated scenarios x {len(probe.PHASES)} phases on {device}, per tree")
    return out


def pytest_terminal_summary(terminalreporter):
    for line in REPORT:
        terminalreporter.write_line(f"backend probes: {line}")
