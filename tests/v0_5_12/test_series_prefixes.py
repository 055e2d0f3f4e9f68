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

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from oracle import check_eager_oracle, check_graph_contract
from suite import eager_phases, graph_phases

from mla_harness import probe, scenarios

BASE = "v0.5.12"
GRAPH_PHASES = graph_phases(BASE)
EAGER_PHASES = eager_phases(BASE)

PREFIX_SCENARIOS = 6
# The patch from which the eager draft-extend table is sized by the padded lengths.
TABLE_FIX_SUBJECT = "size the eager draft-extend block table"


@pytest.fixture(scope="module")
def prefixes(request, trees_of, device, tmp_path_factory):
    """[(table fixed, label, probe result)] for base + the first k patches, k < n."""
    from dataclasses import replace

    from mla_bench import ladder
    from sglpatch.errors import UserError
    from sglpatch.layout import Layout

    layout = Layout.create(Path(request.config.getoption("--build")), base=BASE)
    if (layout.sglang / ".git").exists():
        # Written from the series' commits into a folder of this run's own, not
        # <build>/<base>/ladder, which another run or test may be writing.
        own = tmp_path_factory.mktemp("ladder-build")
        (own / "sglang").symlink_to(layout.sglang)
        layout = replace(layout, build=own)
    try:
        ladder.ensure(layout)
    except UserError as exc:  # a bundle's trees (a GPU host) without a ladder copied
        pytest.skip(str(exc))
    steps = ladder.trees(layout, trees_of(BASE)["base"])[:-1]
    seed = request.config.getoption("--scenario-seed")
    plan = scenarios.plan(PREFIX_SCENARIOS, seed=seed, cases=scenarios.TEST_CASES)
    fixed = [TABLE_FIX_SUBJECT in label for label, _ in steps]
    with ThreadPoolExecutor(max_workers=2) as pool:  # one tree per process, as conftest
        runs = [pool.submit(probe.run_probe, path, plan, device) for _, path in steps]
        out = [
            (any(fixed[: number + 1]), label, run.result())
            for number, ((label, _), run) in enumerate(zip(steps, runs, strict=True))
        ]
    return plan, out


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
