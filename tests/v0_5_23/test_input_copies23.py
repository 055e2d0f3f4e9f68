"""The runner input copies' upstream test file, run on both v0.5.23 trees.

The queue's ``[perf] cuda graph runners`` patch adds ``test/registered/
model_executor/test_cuda_graph_input_copies.py`` to SGLang: the grouped copy
into the leading rows of fixed buffers (``RowsCopy``, one foreach per
(buffer, source) dtype pair) against ``Tensor.copy_`` over sources whose
addresses, strides, dtypes and rows change between calls, its groups and its
kept views; the buffer registry's fills
(decode, prefill and eager registries, every kind of fill) and ``copy_slots``;
the copies a registry keeps (one per set of slots) and the draft / draft-extend
runners' (one per set of optional fields); the decode runner's replay views kept
per captured size, and a runner's model context selecting its shared-expert
layout only where another is selected; and (0013) each runner's replay kept
per captured size against its general path on the same batches, and the
batches and modes that keep the general path. Each tree runs it in the child pytest
that runs the series' other upstream files (``test_registered23``: that tree
first on the path, the harness's replacements installed first; that module
also checks the child exits 0). The patched tree must pass every case that runs
on the device. On v0.5.23 as released the registry's fills must pass as well
(they are unchanged); the kept copies and views and the model context's
no-op are missing there (strict xfail). The
runners themselves, on both trees, with every output compared:
``test_real_runner23``.
"""

from __future__ import annotations

import pytest

from .test_registered23 import registered23  # noqa: F401 (the fixture)

pytestmark = pytest.mark.base("v0.5.23")

# class -> (its methods, whether it passes on v0.5.23 as released, CUDA only).
# The registry's fills must come out the same on both trees.
CASES = {
    "TestRowsCopy": (
        (
            "test_views_and_copies",
            "test_sources_change_between_calls",
            "test_groups",
            "test_kept_views",
        ),
        False,
        False,
    ),
    "TestRegistryFill": (
        (
            "test_fills",
            "test_token_axis_fills",
            "test_slot_registered_after_a_fill",
            "test_copy_slots",
        ),
        True,
        False,
    ),
    "TestKeptFillCopies": (
        (
            "test_one_per_slot_set",
            "test_one_foreach_per_dtype_pair",
            "test_slice_fn_takes_leading_rows",
        ),
        False,
        False,
    ),
    "TestRunnerInputCopies": (("test_draft", "test_draft_extend"), False, False),
    "TestReplayViews": (("test_kept_per_size",), False, False),
    "TestModelContext": (("test_selects_only_another_layout",), False, False),
    "TestKeptReplay": (
        (
            "test_draft",
            "test_draft_modes",
            "test_draft_extend",
            "test_draft_extend_modes",
            "test_verify",
            "test_verify_planned",
            "test_verify_gathered",
            "test_verify_modes",
            "test_decode",
        ),
        False,
        False,
    ),
    "TestBackendReplayer": (
        (
            "test_kept_until_cleanup",
            "test_pool_scope_while_borrowing",
            "test_none_for_a_subclass_replaying_otherwise",
        ),
        False,
        False,
    ),
}


@pytest.fixture(scope="module")
def copies23(registered23) -> dict:  # noqa: F811 (the fixture imported above)
    return {tree: runs["input_copies"] for tree, runs in registered23.items()}


def _check(run: dict, device: str, case: str) -> None:
    methods, _, cuda_only = CASES[case]
    if cuda_only and device != "cuda":
        pytest.skip("CUDA only (the upstream class skips without CUDA)")
    for method in methods:
        assert run["outcomes"].get(method) == {"PASSED"}, f"{method}:\n{run['log']}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_patched(copies23, device, case):
    _check(copies23["patched"], device, case)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            name,
            marks=()
            if on_base
            else pytest.mark.xfail(strict=True, reason="v0.5.23 keeps no copies, views or replays"),
        )
        for name, (_, on_base, _) in sorted(CASES.items())
    ],
)
def test_base(copies23, device, case):
    _check(copies23["base"], device, case)
