"""Every prefix of the series on its own: base + 0001, base + 0001..0002, ...

The differential and contract tests run v0.5.12 against the whole series, so
a property of a middle patch is otherwise only seen through the patches after
it. Here each intermediate tree of ``make bench --ladder`` (``build/ladder``,
written from the series' commits) is probed with a smaller plan and must meet
the same oracle contract as the whole series: captured buffers stay where they
were, and what the kernel is given after each replay, and eagerly, is the
oracle's from ``req_to_token``. The last prefix is the patched tree, tested
in full elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs import Job, group
from oracle import check_eager_oracle, check_graph_contract
from suite import eager_phases, graph_phases

from mla_harness import probe, scenarios

BASE = "v0.5.12"
GRAPH_PHASES = graph_phases(BASE)
EAGER_PHASES = eager_phases(BASE)

PREFIX_SCENARIOS = 6
PREFIX_COST = 27  # CPU seconds of one prefix's probe (2-core CPU, 2026-12-03)
# The patch from which the eager draft-extend table is sized by the padded lengths.
TABLE_FIX_SUBJECT = "size the eager draft-extend block table"


@group("prefixes")
def prefix_jobs(request) -> dict:
    """A job per prefix, (number, label, table fixed) -> its probe result:
    base + the first k patches, k < n."""
    from dataclasses import replace

    from mla_bench import ladder
    from sglpatch.errors import UserError
    from sglpatch.layout import Layout

    config, device = request.config, request.getfixturevalue("device")
    layout = Layout.create(Path(config.getoption("--build")), base=BASE)
    if (layout.sglang / ".git").exists():
        # Written from the series' commits into a folder of this run's own, not
        # <build>/<base>/ladder, which another run or test may be writing.
        own = request.getfixturevalue("tmp_path_factory").mktemp("ladder-build")
        (own / "sglang").symlink_to(layout.sglang)
        layout = replace(layout, build=own)
    try:
        ladder.ensure(layout)
    except UserError as exc:  # a bundle's trees (a GPU host) without a ladder copied
        pytest.skip(str(exc))
    steps = ladder.trees(layout, request.getfixturevalue("trees_of")(BASE)["base"])[:-1]
    plan = prefix_plan(config)
    fixed = [TABLE_FIX_SUBJECT in label for label, _ in steps]
    return {
        (number, label, any(fixed[: number + 1])): Job(
            probe.run_probe, (path, plan, device), PREFIX_COST
        )
        for number, (label, path) in enumerate(steps)
    }


def prefix_plan(config) -> dict:
    seed = config.getoption("--scenario-seed")
    return scenarios.plan(PREFIX_SCENARIOS, seed=seed, cases=scenarios.TEST_CASES)


@pytest.fixture(scope="module")
def prefixes(jobs, request):
    """The plan, and [(table fixed, label, probe result)] per prefix in order."""
    results = jobs.results("prefixes", request)
    return prefix_plan(request.config), [
        (fixed, label, result) for (_, label, fixed), result in sorted(results.items())
    ]


@pytest.mark.parametrize("phase", GRAPH_PHASES)
def test_each_prefix_keeps_the_graph_contract(prefixes, phase):
    plan, results = prefixes
    assert results, "the series has more than one patch"
    for _, label, result in results:
        try:
            check_graph_contract(plan, result, phase)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from exc


@pytest.mark.parametrize("phase", EAGER_PHASES)
def test_each_prefix_matches_the_eager_oracle(prefixes, phase):
    plan, results = prefixes
    for table_fixed, label, result in results:
        try:
            check_eager_oracle(plan, result, phase, table_sized_by_padded_lens=table_fixed)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from exc
