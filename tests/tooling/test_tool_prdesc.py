"""``prdesc``: a base's PR.md must describe its series (check-patches)."""

from __future__ import annotations

from sglpatch import prdesc
from sglpatch.series import HEADER

SUBJECTS = ("[fix] a: one thing", "[perf] a: another thing, with a subject long enough to fold")
SECTIONS = "".join(f"## {name}\n\ntext\n\n" for name in prdesc.SECTIONS)


def _series(tmp_path, subjects=SUBJECTS):
    names = []
    for i, subject in enumerate(subjects, 1):
        name = f"{i:04d}-x.patch"
        folded = subject if len(subject) < 60 else subject[:50] + "\n " + subject[50:]
        (tmp_path / name).write_text(
            f"From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] {folded}\n\nbody\n"
        )
        names.append(name)
    (tmp_path / "series").write_text(HEADER + "".join(n + "\n" for n in names))
    return tmp_path


def _describe(tmp_path, rows, sections=SECTIONS):
    table = "| # | subject |\n| --- | --- |\n" + "".join(f"| {n} | {s} |\n" for n, s in rows)
    (tmp_path / prdesc.FILE_NAME).write_text(
        "# title\n\n" + sections.replace("## Modifications\n", "## Modifications\n\n" + table, 1)
    )


def test_no_description_is_no_problem(tmp_path):
    assert prdesc.problems(_series(tmp_path)) == []


def test_a_description_of_the_series_passes(tmp_path):
    _describe(_series(tmp_path), [("0001", SUBJECTS[0]), ("0002", SUBJECTS[1])])
    assert prdesc.problems(tmp_path) == []


def test_a_stale_subject_a_missing_patch_and_section_order_fail(tmp_path):
    d = _series(tmp_path)
    _describe(d, [("0001", "[fix] a: old words")])
    found = prdesc.problems(d)
    assert any("row 0001" in p and "old words" in p for p in found), found
    assert any("1 rows, the series 2 patches" in p for p in found), found
    swapped = SECTIONS.replace("## Motivation", "## X").replace("## Checklist", "## Motivation")
    _describe(d, [("0001", SUBJECTS[0]), ("0002", SUBJECTS[1])], sections=swapped)
    assert any("sections" in p for p in prdesc.problems(d))
