"""Shared pytest setup: ``scripts/`` on the path, options, the bases, the SGLang trees.

One suite over every base of ``patches/bases.toml``. A base's ``tests`` entry
names the directories whose tests test its trees; a directory several bases
name (``tests/backend``) is shared: each of its tests that reads the trees
(the ``base`` fixture, directly or through ``trees`` / ``plan`` / ``results``
/ ``double``) runs once per base, as ``test[v0.5.12]``, ``test[v0.5.23]``,
each marked ``base(NAME)``. A test of one base only says it with
``@pytest.mark.base(NAME)`` (or ``pytestmark``); one whose parameters differ
per base parametrizes ``base`` itself (``suite.per_base``). ``--base NAME``
(repeatable, or a comma list; default: every base) selects bases; the tests of
the others are deselected, not skipped. Tests of no base (tests/tooling)
always run.

The base tree and the patched tree are imported in separate processes
(``mla_harness.probe``), with the same scenarios (generated and named);
``results`` probes both once per base and session. That and every other
fixture's child processes are jobs (``jobs.py``), queued before the first
test and run on both cores beside the tests that read none (``run_order``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
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
# make hands its variables to pytest as SGLPATCH_MK_* and its pytest arguments
# (-n 2 ..., PYTEST_ARGS) as PYTEST_ADDOPTS, read by now: the tools and child
# pytest runs the tests start must not take them as their own.
for _key in [key for key in os.environ if key.startswith("SGLPATCH_MK_")]:
    del os.environ[_key]
os.environ.pop("PYTEST_ADDOPTS", None)
# One OpenMP thread per process (torch's CPU ops; unless the caller set it): the
# suite runs a process per core itself (jobs.SLOTS), and the idle OpenMP threads
# of processes sharing the cores spin on them. Set before anything loads torch,
# so this process, the forkservers and every child start with it. One
# runner_check run (--variant default, patched v0.5.23 tree, 2026-12-03, the
# 2-core host loaded): 38.4 CPU s with the default, 26.4 with one thread.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The children's bytecode (the trees' SGLang, scripts/) in a folder of the
# session, outside every tree: a child compiles what no child before it
# imported, and where PYTHONDONTWRITEBYTECODE is set each child compiled
# everything (a fresh child's import of the v0.5.23 backend: 13.8 s with no
# bytecode, 10.6 s with it; 2-core CPU, 2026-12-04).
if "PYTHONPYCACHEPREFIX" not in os.environ:
    _PYCACHE = tempfile.mkdtemp(prefix="sglpatch-pycache-")
    atexit.register(shutil.rmtree, _PYCACHE, ignore_errors=True)
    os.environ["PYTHONPYCACHEPREFIX"] = _PYCACHE
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


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
        help="generated scenarios per differential run (default per base: suite.PLAN)",
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


def bases_of(item) -> tuple[str, ...]:
    """The bases a test tests: its ``base`` marker's, else every base whose
    ``tests`` (bases.toml) hold its file; () for none."""
    marker = item.get_closest_marker("base")
    if marker is not None:
        return (marker.args[0],)
    path = Path(item.path).resolve()
    return tuple(
        base.name
        for base in _bases().bases
        if any(path.is_relative_to(ROOT / directory) for directory in base.tests)
    )


def base_of(item) -> str | None:
    """The base a test tests (of a shared directory's: the first that names it)."""
    return next(iter(bases_of(item)), None)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "base(name): the test tests that base's trees (patches/bases.toml)"
    )
    selected_bases(config)  # an unknown --base is a usage error before collection


def pytest_generate_tests(metafunc):
    """A test that reads the trees, in a directory several bases share and of
    no base by marker, runs once per such base (a ``base`` parameter, marked)."""
    if "base" not in metafunc.fixturenames:
        return
    if any("base" in _argnames(m) for m in metafunc.definition.iter_markers("parametrize")):
        return  # parametrizes base itself (suite.per_base)
    names = bases_of(metafunc.definition)
    if metafunc.definition.get_closest_marker("base") is None and len(names) > 1:
        params = [pytest.param(name, id=name, marks=pytest.mark.base(name)) for name in names]
        metafunc.parametrize("base", params)


def _argnames(marker) -> tuple[str, ...]:
    names = marker.args[0] if marker.args else marker.kwargs.get("argnames", ())
    if isinstance(names, str):
        names = names.split(",")
    return tuple(name.strip() for name in names)


def pytest_collection_modifyitems(config, items):
    """Deselect (not skip) the tests of the bases not selected; give each kept
    test its pytest-xdist group (``xdist_group``)."""
    selected = selected_bases(config)
    kept, dropped = [], []
    for item in items:
        names = bases_of(item)
        (dropped if names and not set(names) & set(selected) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    for item in kept:
        group = xdist_group(item)
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=run_order)


def run_order(item) -> int:
    """The tests that read no job first, ``tests/tooling``'s last of them (its
    fixtures change ``os.environ`` for the rest of the session), so that they
    run while the jobs do; then the tests that wait for jobs (``jobs``)."""
    if groups_of(item):
        return 2
    return int(Path(item.path).resolve().is_relative_to(ROOT / "tests" / "tooling"))


# The fixtures that probe both trees of a base, once a session and process.
PROBED = ("results", "double")


def xdist_group(item) -> str | None:
    """Which tests pytest-xdist (``-n 2 --dist loadgroup``) keeps on one worker,
    so that what they share is computed once: the tests that read a base's
    probes (``PROBED``), one group per base; the tests of a module that use a
    module- or session-scoped fixture of that module (a child run, a built
    tree), one group per module. The rest spread over the workers; a test
    module marked ``xdist_group`` itself keeps its mark."""
    if set(PROBED) & set(item.fixturenames):
        return f"probes-{base_of(item) or _bases().default}"
    module = getattr(item.module, "__name__", None)
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        fixture = definitions[-1]
        if fixture.scope in ("module", "session") and fixture.func.__module__ == module:
            return f"module-{item.nodeid.split('::')[0]}"
    return None


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
    """``trees_of(NAME)``: the trees of base NAME (None: the default base)."""
    return lambda base: base_trees(request.config, base)


@pytest.fixture
def base(request) -> str:
    """The base under test: the ``base`` parameter (shared directories), else
    the test's own (its marker, its directory), else the default base."""
    return base_of(request.node) or _bases().default


@pytest.fixture
def trees(probes, base) -> dict[str, Path]:
    """{"base": ..., "patched": ...}: the ``python/`` roots of ``base``'s trees."""
    return probes.trees(base)


@pytest.fixture
def plan(probes, base) -> dict:
    """The differential plan of ``base``: generated scenarios and the named cases."""
    return probes.plan(base)


@pytest.fixture
def results(request, probes, base) -> dict[str, ProbeResult]:
    """Probe output per tree of ``base``: {"base": ..., "patched": ...}."""
    return probes.results(base, request)


@pytest.fixture
def double_plan(probes) -> dict:
    """Named cases whose batch sizes are each captured twice before the replays."""
    return probes.double_plan()


@pytest.fixture
def double(request, probes, base) -> dict[str, ProbeResult]:
    """Probe output per tree of ``base`` with every batch size captured twice
    on one backend (the decode runner's LoRA and no-LoRA graphs)."""
    return probes.double(base, request)


@pytest.fixture(scope="session")
def probes(request, trees_of, device, jobs) -> Probes:
    return Probes(request.config, trees_of, device, jobs)


class Probes:
    """Per base, once a session: its trees, its plan (``suite.differential_plan``),
    both trees probed with it, and with the double-capture plan (jobs
    ``results-BASE``, ``double-BASE``)."""

    def __init__(self, config, trees_of, device: str, jobs):
        self.config, self.trees_of, self.device, self.jobs = config, trees_of, device, jobs
        self.cache: dict[tuple[str, str], object] = {}

    def _once(self, key: tuple[str, str], make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def trees(self, base: str) -> dict[str, Path]:
        return self._once(("trees", base), lambda: self.trees_of(base))

    def plan(self, base: str) -> dict:
        from suite import differential_plan

        count = self.config.getoption("--scenarios")
        seed = self.config.getoption("--scenario-seed")
        return self._once(("plan", base), lambda: differential_plan(base, count, seed))

    def double_plan(self) -> dict:
        from suite import double_capture_plan

        return self._once(("plan", "double"), double_capture_plan)

    def results(self, base: str, request) -> dict[str, ProbeResult]:
        """``request``: the fixture's (``jobs.Jobs.results``)."""
        return self._once(("results", base), lambda: self._results(base, request))

    def _results(self, base: str, request) -> dict[str, ProbeResult]:
        from mla_harness import scenarios

        plan = self.plan(base)
        out = self.checked(base, self.jobs.results(f"results-{base}", request))
        named = len(scenarios.TEST_CASES)
        REPORT.append(
            f"{base}: {len(plan['scenarios']) - named} generated + {named} named scenarios"
            f" x {len(plan['phases'])} phases on {self.device}, per tree"
        )
        return out

    def double(self, base: str, request) -> dict[str, ProbeResult]:
        return self._once(
            ("double", base),
            lambda: self.checked(base, self.jobs.results(f"double-{base}", request)),
        )

    def probe_jobs(self, base: str, plan: dict, cost: float) -> dict:
        """A job per tree of ``base``: ``plan`` probed on it, concurrently
        (``probe.run_on_tree``: each tree imported in a process of its own)."""
        from jobs import Job

        from mla_harness import probe

        trees = self.trees(base)
        return {
            name: Job(probe.run_on_tree, (path, plan, self.device), cost)
            for name, path in trees.items()
        }

    @staticmethod
    def checked(base: str, out: dict[str, ProbeResult]) -> dict[str, ProbeResult]:
        """Each tree's result, checked to have driven ``base``'s API generation."""
        for name in TREES:
            assert out[name].base == base, f"{name}: probe drove the {out[name].base} API"
        return out


# CPU seconds of one tree's probe (2-core CPU, 2026-12-03): the differential
# plan of each base (a base not listed: the dearest), the double-capture plan.
PROBE_COST = {"v0.5.12": 90, "v0.5.23": 60}
DOUBLE_COST = 10


def _probe_groups() -> None:
    """Jobs ``results-BASE`` and ``double-BASE`` of every base."""
    from jobs import group

    for base in _bases().names:
        cost = PROBE_COST.get(base, max(PROBE_COST.values()))

        def results(request, base=base, cost=cost):
            probes = request.getfixturevalue("probes")
            return probes.probe_jobs(base, probes.plan(base), cost)

        def double(request, base=base):
            probes = request.getfixturevalue("probes")
            return probes.probe_jobs(base, probes.double_plan(), DOUBLE_COST)

        group(f"results-{base}")(results)
        group(f"double-{base}")(double)


_probe_groups()


def groups_of(item) -> list[str]:
    """The job groups (``jobs.GROUPS``) a test reads: those of its fixtures;
    ``results`` and ``double`` stand for their base's."""
    from jobs import GROUPS

    names = []
    for name in item.fixturenames:
        if name in PROBED:
            name = f"{name}-{base_of(item) or _bases().default}"
        if name in GROUPS:
            names.append(name)
    return names


@pytest.fixture(scope="session")
def jobs(request, tmp_path_factory):
    """The session's ``jobs.Jobs``. The children of ``forkserver.SERVED`` on the
    trees of the bases selected fork from a server per tree."""
    from jobs import Jobs

    from mla_harness import child
    from sglpatch.trees import tree_paths

    build = Path(request.config.getoption("--build"))
    trees = [tree for base in selected_bases(request.config) for tree in tree_paths(build, base)]
    child.use_forkservers(trees, tmp_path_factory.mktemp("forkservers"))
    yield Jobs()
    child.use_forkservers()


@pytest.fixture(scope="session", autouse=True)
def _start_jobs(request, jobs):
    """Before the first test: every job group a selected test reads."""
    if not hasattr(request.config, "workerinput"):  # an xdist worker runs a share only
        names = dict.fromkeys(n for item in request.session.items for n in groups_of(item))
        jobs.start(names, request)


# How long the whole suite (tests/, tooling included) takes on a 2-core CPU,
# per selection of bases: every base 8 to 12 min of pytest (467-691 s from
# fresh clones of b7856be and 34526d0, 2026-12-04); one base: not measured
# since the jobs.
RUN_MINUTES = {
    ("v0.5.12", "v0.5.23"): "8 to 12",
    ("v0.5.23",): "under 15",
    ("v0.5.12",): "under 15",
}


def pytest_report_header(config):
    selected = selected_bases(config)
    minutes = RUN_MINUTES.get(tuple(sorted(selected)), "under 15")
    shown = ", ".join(selected)
    return (
        f"sglpatch: bases {shown}; the whole suite takes {minutes} min on a 2-core CPU"
        " (--base NAME: one base)"
    )


def xfail_summary(reports) -> str:
    """One line saying what the xfails are: the base-tree halves of strict xfail
    tests (the test holds on the patched tree; the base release lacks the change,
    or has the bug a fix patch removes), so they are expected, not problems."""
    if not reports:
        return ""
    reasons = Counter(getattr(report, "wasxfail", "") or "?" for report in reports)
    parts = "; ".join(f"{count}: {reason}" for reason, count in sorted(reasons.items()))
    return (
        f"{len(reports)} xfailed, as expected: each is the base-tree half of a strict-xfail"
        f" test that passes on the patched tree ({parts}); a base half that passed would"
        " fail the run"
    )


def skip_summary(reports) -> list[str]:
    """The skips, one line per reason, most first."""
    reasons = Counter(_skip_reason(report) for report in reports)
    return [f"SKIPPED {count}: {reason}" for reason, count in reasons.most_common()]


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands its probe lines to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["probe_report"] = list(REPORT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller collects each worker's probe lines (``pytest_sessionfinish``)."""
    REPORT.extend(getattr(node, "workeroutput", {}).get("probe_report", []))


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    """Before pytest's counts line: the probes run and the skips, grouped
    (pyproject's ``-rfE`` lists only failures and errors one by one); the xfail
    line comes after the counts line (``pytest_unconfigure``)."""
    for line in REPORT:
        terminalreporter.write_line(f"backend probes: {line}")
    for line in skip_summary(terminalreporter.stats.get("skipped", [])):
        terminalreporter.write_line(line)


def pytest_unconfigure(config):
    """The xfail explanation, as the run's last line."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    line = xfail_summary(reporter.stats.get("xfailed", []))
    if line:
        reporter.write_line(line)
