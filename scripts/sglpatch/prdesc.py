"""patches/<base>/PR.md: the series' pull-request description, held to the series.

A base may keep the description a maintainer would paste into the upstream
pull request. ``check`` (run by ``check-patches``) fails unless its sections
follow SGLang's pull-request template in order, and its patch table lists
every patch of ``series``, numbered in order, with the patch's subject
exactly: a description that no longer describes the series is a failed
check, as a stale export is.
"""

from __future__ import annotations

import email.parser
import re
from pathlib import Path

from sglpatch import series as series_mod

FILE_NAME = "PR.md"
# SGLang's .github/pull_request_template.md, in order.
SECTIONS = (
    "Motivation",
    "Modifications",
    "Accuracy Tests",
    "Benchmarking and Profiling",
    "Checklist",
)
_ROW = re.compile(r"^\|\s*(\d{4})\s*\|\s*`?(\[(?:fix|perf|test)\][^|`]*?)`?\s*\|")


def subject(patch: Path) -> str:
    """A patch file's commit subject, unfolded, without ``[PATCH]``."""
    with patch.open("rb") as f:
        headers = email.parser.BytesHeaderParser().parse(f)
    text = " ".join(str(headers["Subject"] or "").split())
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", text)


def problems(directory: Path) -> list[str]:
    """How ``directory``/PR.md disagrees with the series (empty: it agrees, or
    the base keeps no description)."""
    path = directory / FILE_NAME
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    found = [m.group(1) for m in re.finditer(r"^## (.+?)\s*$", text, re.M)]
    out = []
    if [s for s in found if s in SECTIONS] != list(SECTIONS):
        out.append(f"{FILE_NAME}: sections {found}, expected {list(SECTIONS)} in that order")
    rows = [(m.group(1), m.group(2).strip()) for m in map(_ROW.match, text.splitlines()) if m]
    names = [entry.name for entry in series_mod.read_entries(directory)]
    want = [(f"{i:04d}", subject(directory / name)) for i, name in enumerate(names, 1)]
    if len(rows) != len(want):
        out.append(
            f"{FILE_NAME}: its patch table has {len(rows)} rows, the series {len(want)} patches"
        )
    for got, expected in zip(rows, want, strict=False):
        if got != expected:
            out.append(
                f"{FILE_NAME}: row {got[0]} reads {got[1]!r}, the series' is {expected[1]!r}"
            )
    return out
