"""``prdesc``: a base's prs/ must describe its series as pull requests (check-patches)."""

from __future__ import annotations

from sglpatch import prdesc
from sglpatch.series import HEADER

SUBJECTS = (
    "[fix] a: one thing",
    "[perf] a: another thing, with a subject long enough to fold",
    "[test] a: a third",
)
SECTIONS = "".join(f"## {name}\n\ntext\n\n" for name in prdesc.SECTIONS)


def _series(tmp_path, subjects=SUBJECTS, body="body\n"):
    names = []
    for i, subject in enumerate(subjects, 1):
        name = f"{i:04d}-x.patch"
        folded = subject if len(subject) < 60 else subject[:50] + "\n " + subject[50:]
        (tmp_path / name).write_text(
            "From 0 Mon Sep 17 00:00:00 2001\nFrom: sglpatch <sglpatch@example>\n"
            f"Subject: [PATCH] {folded}\n\n{body}"
            "---\ndiff --git a/f b/f\n+see tests/backend in a diff line\n"
        )
        names.append(name)
    (tmp_path / "series").write_text(HEADER + "".join(n + "\n" for n in names))
    return tmp_path


def _describe(tmp_path, name, rows, sections=SECTIONS, extra=""):
    table = "| # | subject |\n| --- | --- |\n" + "".join(f"| {n} | {s} |\n" for n, s in rows)
    folder = tmp_path / prdesc.DIRECTORY
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(
        "# title\n\n"
        + sections.replace("## Modifications\n", "## Modifications\n\n" + table, 1)
        + extra
    )


def _all(tmp_path):
    _describe(tmp_path, "1-fixes.md", [("0001", SUBJECTS[0])])
    _describe(tmp_path, "2-perf.md", [("0002", SUBJECTS[1]), ("0003", SUBJECTS[2])])


def test_no_description_is_no_problem(tmp_path):
    assert prdesc.problems(_series(tmp_path)) == []


def test_pull_requests_covering_the_series_in_order_pass(tmp_path):
    d = _series(tmp_path)
    _all(d)
    assert prdesc.problems(d) == []


def test_a_stale_subject_a_missing_patch_and_section_order_fail(tmp_path):
    d = _series(tmp_path)
    _describe(d, "1-fixes.md", [("0001", "[fix] a: old words")])
    found = prdesc.problems(d)
    assert any("row 0001" in p and "old words" in p for p in found), found
    assert any("list 1 patches, the series has 3" in p for p in found), found
    swapped = SECTIONS.replace("## Motivation", "## X").replace("## Checklist", "## Motivation")
    _describe(d, "1-fixes.md", [("0001", SUBJECTS[0])], sections=swapped)
    assert any("1-fixes.md: sections" in p for p in prdesc.problems(d))


def test_pull_requests_out_of_queue_order_fail(tmp_path):
    d = _series(tmp_path)
    _describe(d, "1-perf.md", [("0002", SUBJECTS[1]), ("0003", SUBJECTS[2])])
    _describe(d, "2-fixes.md", [("0001", SUBJECTS[0])])
    found = prdesc.problems(d)
    assert any("1-perf.md: row 0002" in p for p in found), found


def test_a_description_without_patches_or_too_long_fails(tmp_path):
    d = _series(tmp_path)
    _all(d)
    _describe(d, "3-empty.md", [])
    assert any("3-empty.md: its patch table lists no patch" in p for p in prdesc.problems(d))
    (d / prdesc.DIRECTORY / "3-empty.md").unlink()
    _describe(d, "2-perf.md", [("0002", SUBJECTS[1]), ("0003", SUBJECTS[2])], extra="x\n" * 120)
    assert any("2-perf.md:" in p and "at most 110" in p for p in prdesc.problems(d))


def test_this_repositorys_harness_in_a_description_or_message_fails(tmp_path):
    d = _series(tmp_path, body="Tests: tests/v0_5_23/test_x.py and make bench.\n")
    _describe(d, "1-fixes.md", [("0001", SUBJECTS[0])], extra="see ci/results\n")
    _describe(d, "2-perf.md", [("0002", SUBJECTS[1]), ("0003", SUBJECTS[2])])
    found = prdesc.problems(d)
    assert any("1-fixes.md names 'ci/results'" in p for p in found), found
    assert any("0001-x.patch's message names 'tests/v0_5'" in p for p in found), found
    assert any("0003-x.patch's message names 'make bench'" in p for p in found), found
    # The diff is upstream's code and the author header no message: not checked.
    assert not any("tests/backend" in p or "'sglpatch'" in p for p in found), found


def test_a_refactor_row_counts_and_the_series_notes_are_not_upstreams(tmp_path):
    subjects = (SUBJECTS[0], "[refactor] a: move a pointer", SUBJECTS[2])
    d = _series(tmp_path, subjects=subjects)
    _describe(d, "1-fixes.md", [("0001", subjects[0]), ("0002", subjects[1])])
    _describe(d, "2-test.md", [("0003", subjects[2])], extra="figures: series notes\n")
    found = prdesc.problems(d)
    assert len(found) == 1 and "2-test.md names 'series notes'" in found[0], found
