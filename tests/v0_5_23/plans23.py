"""Plans of the v0.5.23 tests that more than one module reads."""

from __future__ import annotations

DOUBLE_CAPTURE_PHASES = ("decode_graph", "verify_graph", "extend_v2_graph")
# Named cases (scenarios.TEST_CASES) replayed after double captures: page
# edges at both page sizes, and a runner's sparse capture list (padded replays).
DOUBLE_CAPTURE_CASES = ("page-edges-64", "page-edges-32", "sparse-capture")


def double_capture_cases() -> list[dict]:
    from mla_harness import scenarios

    return [
        {**case, "captures_per_bs": 2}
        for case in scenarios.TEST_CASES
        if case["name"] in DOUBLE_CAPTURE_CASES
    ]
