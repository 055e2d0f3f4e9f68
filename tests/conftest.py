"""Shared pytest setup: ``scripts/`` on the path, options, the bases, the SGLang trees.

The base tree and the patched tree are imported in separate processes
(``mla_harness.probe``), concurrently, with the same scenarios (generated and named); the
``results`` fixture probes both once per session.

Each base of ``patches/bases.toml`` names the test directories that test its
trees (``tests = [...]``); a test can also say it with ``@pytest.mark.base(NAME)``
(or ``pytestmark``). ``--base NAME`` (repeatable, or a comma list; default:
every base) selects bases; the tests of the others are deselected. Tests of no
base (tests/tooling) always run.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
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
    group.addoption(
        "--build", default=str(ROOT / "build"), help="build root of `make apply` (<build>/<base>)"
    )
    group.addoption(
        "--base",
        action="append",
        default=[],
        help="run the tests of this base of patches/bases.toml (repeatable or a comma"
        " list; default: every base)",
    )
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


def _bases():
    from sglpatch import bases
    from sglpatch.layout import PATCHES_ROOT

    return bases.load(PATCHES_ROOT)


def selected_bases(config) -> tuple[str, ...]:
    """The bases ``--base`` names (checked), or every base."""
    from sglpatch.errors import UserError

    table = _bases()
    named = [name.strip() for value in config.getoption("--base") for name in value.split(",")]
    try:
        return tuple(table.get(name).name for name in named if name) or table.names
    except UserError as exc:
        raise pytest.UsageError(str(exc)) from None


def base_of(item) -> str | None:
    """The base a test tests: its ``base`` marker, else its directory's (bases.toml)."""
    marker = item.get_closest_marker("base")
    if marker is not None:
        return marker.args[0]
    path = Path(item.path).resolve()
    for base in _bases().bases:
        if any(path.is_relative_to(ROOT / directory) for directory in base.tests):
            return base.name
    return None


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "base(name): the test tests that base's trees (patches/bases.toml)"
    )
    selected_bases(config)  # an unknown --base is a usage error before collection


def pytest_collection_modifyitems(config, items):
    """Deselect (not skip) the tests of the bases not selected."""
    selected = selected_bases(config)
    kept, dropped = [], []
    for item in items:
        base = base_of(item)
        (dropped if base is not None and base not in selected else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def base_trees(config, base: str | None = None) -> dict[str, Path]:
    """{"base": ..., "patched": ...}: the ``python/`` roots of ``base`` (None: the
    default base) under ``--build``; fails the test when ``make apply`` has not
    built them. A directory of another base overrides ``trees`` with this."""
    from sglpatch.trees import tree_paths

    build = Path(config.getoption("--build"))
    paths = dict(zip(TREES, tree_paths(build, base), strict=True))
    for name, path in paths.items():
        if not (path / "sglang" / "__init__.py").is_file():
            shown = f" BASE={base}" if base else ""
            pytest.fail(f"{name} tree missing at {path}: run `make apply{shown}` first")
    return paths


@pytest.fixture(scope="session")
def trees_of(request):
    """``trees_of(NAME)``: the trees of base NAME. A directory of another base
    overrides ``trees`` in its conftest: ``def trees(trees_of): return
    trees_of("v0.5.23")`` (session-scoped)."""
    return lambda base: base_trees(request.config, base)


@pytest.fixture(scope="session")
def trees(trees_of) -> dict[str, Path]:
    """The trees of the default base (tests/backend, tests/gpu, tests/harness)."""
    return trees_of(None)


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

    out = probe.run_on_trees(trees, plan, device)
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
