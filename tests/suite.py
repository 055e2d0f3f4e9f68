"""What the shared tests need to run once per base (``conftest.py`` says how).

``BASES``: every base of ``patches/bases.toml``, in order. ``per_base(each)``:
parameters ``(base, ...)`` for a test whose other parameters differ per base
(``each(base)``: its values there, e.g. ``probe.phase_names(base)``), each
marked ``base(NAME)`` so that ``--base`` deselects it, with ids such as
``v0.5.12-draft_graph``; ``on_bases(marks)``: ``base`` alone, with marks
per base. ``PLAN``: each base's differential plan defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from sglpatch import bases as _bases
from sglpatch.layout import PATCHES_ROOT

BASES = _bases.load(PATCHES_ROOT).names

# Per base: generated scenarios per differential run (--scenarios overrides)
# and whether the probe also runs the eager forward after each eager call
# (records.EagerCall.forward_views). v0.5.23's eager forward makes each
# scenario dearer; 16 keep `--base v0.5.23` near v0.5.12's time. A base not
# listed gets NEW_BASE_PLAN.
PLAN = {
    "v0.5.12": {"scenarios": 40, "eager_forward": False},
    "v0.5.23": {"scenarios": 16, "eager_forward": True},
}
NEW_BASE_PLAN = {"scenarios": 16, "eager_forward": True}

# Every batch size captured twice on one backend (the decode runner's LoRA and
# no-LoRA graphs), replayed with the named cases of page edges at both page
# sizes and a runner's sparse capture list (padded replays).
DOUBLE_CAPTURE_PHASES = ("decode_graph", "verify_graph", "extend_v2_graph")
DOUBLE_CAPTURE_CASES = ("page-edges-64", "page-edges-32", "sparse-capture")


def per_base(each: Callable[[str], Iterable], bases: Iterable[str] = BASES) -> list:
    """``pytest.param(base, *values)`` for every value of ``each(base)`` (a
    value, a tuple of values or a ``pytest.param``), marked ``base(base)``."""
    out = []
    for base in bases:
        for value in each(base):
            if isinstance(value, type(pytest.param(None))):
                values, marks, ident = value.values, tuple(value.marks), value.id
            else:
                values = value if isinstance(value, tuple) else (value,)
                marks, ident = (), None
            ident = ident or "-".join(str(v) for v in values)
            marks = (pytest.mark.base(base), *marks)
            out.append(pytest.param(base, *values, marks=marks, id=f"{base}-{ident}"))
    return out


def on_bases(marks: dict | None = None) -> list:
    """``pytest.param(base)`` for every base, marked ``base(base)`` and with
    ``marks[base]`` (a mark or a list of them) where given."""
    marks = marks or {}

    def extra(base):
        mark = marks.get(base, [])
        return mark if isinstance(mark, list) else [mark]

    return [pytest.param(b, marks=[pytest.mark.base(b), *extra(b)], id=b) for b in BASES]


def graph_phases(base: str) -> tuple[str, ...]:
    from mla_harness.probe import phase_names

    return tuple(p for p in phase_names(base) if p.endswith("_graph"))


def eager_phases(base: str) -> tuple[str, ...]:
    from mla_harness.probe import phase_names

    return tuple(p for p in phase_names(base) if p.endswith("_eager"))


def double_capture_cases() -> list[dict]:
    from mla_harness import scenarios

    return [
        {**case, "captures_per_bs": 2}
        for case in scenarios.TEST_CASES
        if case["name"] in DOUBLE_CAPTURE_CASES
    ]


def differential_plan(base: str, count: int | None, seed: int) -> dict:
    """``base``'s plan: ``count`` (None: ``PLAN``'s) generated scenarios, the
    named cases, every phase ``base`` has."""
    from mla_harness import probe, scenarios

    defaults = PLAN.get(base, NEW_BASE_PLAN)
    return scenarios.plan(
        count or defaults["scenarios"],
        seed=seed,
        cases=scenarios.TEST_CASES,
        phases=probe.phase_names(base),
        eager_forward=defaults["eager_forward"],
    )


def double_capture_plan() -> dict:
    from mla_harness import scenarios

    return scenarios.plan(0, cases=double_capture_cases(), phases=DOUBLE_CAPTURE_PHASES)
