"""The v0.5.23 trees: fixtures beside ``tests/conftest.py``'s v0.5.12 ones.

``trees23``: the base (unpatched v0.5.23) and patched (v0.5.23 with
``patches/v0.5.23``) ``python/`` roots; ``results23``: both probed
concurrently, each in its own process, with the same plan (generated scenarios
and the named cases, the phases v0.5.23 has); ``double23``: the same with every
batch size captured twice on one backend (the decode runner's LoRA and
no-LoRA graphs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .plans23 import DOUBLE_CAPTURE_PHASES, double_capture_cases

BASE = "v0.5.23"
TREES = ("base", "patched")
# Generated scenarios per tree by default: v0.5.12's suite runs 40; these
# tests stay under ~6 minutes on a 2-core CPU with fewer (--scenarios N: more).
DEFAULT_SCENARIOS = 16
REPORT: list[str] = []


def pytest_configure(config):
    if not any(line.split(":")[0].split("(")[0] == "base" for line in config.getini("markers")):
        config.addinivalue_line("markers", "base(name): the SGLang base release a test drives")


@pytest.fixture(scope="session")
def trees23(request) -> dict[str, Path]:
    from sglpatch.trees import tree_paths

    build = Path(request.config.getoption("--build"))
    paths = dict(zip(TREES, tree_paths(build, BASE), strict=True))
    for name, path in paths.items():
        if not (path / "sglang" / "__init__.py").is_file():
            pytest.fail(f"{BASE} {name} tree missing at {path}: run `make apply BASE={BASE}`")
    return paths


def probe_both(trees: dict[str, Path], plan: dict, device: str) -> dict:
    """``plan`` on both trees, concurrently; checks each child drove v0.5.23's API."""
    from mla_harness import probe

    out = probe.run_on_trees(trees, plan, device)
    for name in TREES:
        assert out[name].base == BASE, f"{name}: probe drove the {out[name].base} API"
    return out


@pytest.fixture(scope="session")
def plan23(request) -> dict:
    from mla_harness import probe, scenarios

    count = request.config.getoption("--scenarios") or DEFAULT_SCENARIOS
    seed = request.config.getoption("--scenario-seed")
    return scenarios.plan(
        count,
        seed=seed,
        cases=scenarios.TEST_CASES,
        phases=probe.phase_names(BASE),
        eager_forward=True,
    )


@pytest.fixture(scope="session")
def results23(trees23, plan23, device) -> dict:
    """Probe output per tree: {"base": ProbeResult, "patched": ProbeResult}."""
    from mla_harness import scenarios

    out = probe_both(trees23, plan23, device)
    named = len(scenarios.TEST_CASES)
    REPORT.append(
        f"{BASE}: {len(plan23['scenarios']) - named} generated + {named} named scenarios"
        f" x {len(plan23['phases'])} phases on {device}, per tree"
    )
    return out


@pytest.fixture(scope="session")
def plan_double23() -> dict:
    """Named cases whose batch sizes are each captured twice before the replays."""
    from mla_harness import scenarios

    return scenarios.plan(0, cases=double_capture_cases(), phases=DOUBLE_CAPTURE_PHASES)


@pytest.fixture(scope="session")
def double23(trees23, plan_double23, device) -> dict:
    return probe_both(trees23, plan_double23, device)


def pytest_terminal_summary(terminalreporter):
    for line in REPORT:
        terminalreporter.write_line(f"backend probes: {line}")
