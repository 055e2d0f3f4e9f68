"""patches/<base>/prs/: the series as upstream pull requests, held to the series.

A base may keep, in ``prs/``, the descriptions a maintainer would paste into
the upstream pull requests that land its series, one file per pull request
(``NN-name.md``, in landing order). ``problems`` (run by ``check-patches``)
fails unless

- each description follows SGLang's pull-request template, its sections in
  order, in at most ``MAX_LINES`` lines;
- each lists its patches in a table, numbered as in ``series`` with the
  patch's subject exactly, and the tables, read in landing order, list every
  patch of ``series`` once and in order (so each pull request is a
  contiguous range of the queue, and the queue is nothing but its pull
  requests);
- neither a description nor a patch's commit message names this
  repository's own harness (``HARNESS_TERMS``): upstream reads only its own
  files, lines and tests.

A description that no longer describes the series is a failed check, as a
stale export is.
"""

from __future__ import annotations

import email.parser
import re
from pathlib import Path

from sglpatch import series as series_mod

DIRECTORY = "prs"
MAX_LINES = 110  # "about 100"
# SGLang's .github/pull_request_template.md, in order.
SECTIONS = (
    "Motivation",
    "Modifications",
    "Accuracy Tests",
    "Benchmarking and Profiling",
    "Checklist",
)
# What only this repository has: its directories, tools and make targets.
HARNESS_TERMS = (
    "tests/backend",
    "tests/gpu",
    "tests/bench",
    "tests/harness",
    "tests/tooling",
    "tests/v0_5",
    "mla_harness",
    "mla_bench",
    "sglpatch",
    "ci/results",
    "patches/v0.5",
    "make apply",
    "make test",
    "make bench",
    "make bundle",
    "series notes",
)
_ROW = re.compile(r"^\|\s*(\d{4})\s*\|\s*`?(\[(?:fix|perf|refactor|test)\][^|`]*?)`?\s*\|")


def subject(patch: Path) -> str:
    """A patch file's commit subject, unfolded, without ``[PATCH]``."""
    with patch.open("rb") as f:
        headers = email.parser.BytesHeaderParser().parse(f)
    text = " ".join(str(headers["Subject"] or "").split())
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", text)


def message(patch: Path) -> str:
    """A patch file's commit message, subject included: from its Subject:
    header to its diff (the author and date headers are not the message)."""
    text = patch.read_text(encoding="utf-8", errors="replace")
    start = re.search(r"^Subject:", text, re.M)
    text = text[start.start() :] if start else text
    return re.split(r"^(?:---\n|diff --git )", text, maxsplit=1, flags=re.M)[0]


def descriptions(directory: Path) -> list[Path]:
    """The base's pull-request descriptions, in landing order."""
    folder = directory / DIRECTORY
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def last_request(directory: Path) -> list[str]:
    """The patch numbers (``NNNN``) the last pull request lists, in order;
    empty where the base keeps no descriptions."""
    files = descriptions(directory)
    if not files:
        return []
    lines = files[-1].read_text(encoding="utf-8").splitlines()
    return [m.group(1) for m in map(_ROW.match, lines) if m]


def _harness_terms(name: str, text: str) -> list[str]:
    return [
        f"{name} names {term!r}, which only this repository has"
        for term in HARNESS_TERMS
        if term in text
    ]


def problems(directory: Path) -> list[str]:
    """How ``directory``'s pull-request descriptions disagree with its series
    (empty: they agree, or the base keeps none)."""
    files = descriptions(directory)
    if not files:
        return []
    names = [entry.name for entry in series_mod.read_entries(directory)]
    want = [(f"{i:04d}", subject(directory / name)) for i, name in enumerate(names, 1)]
    out, rows = [], []
    for path in files:
        label = f"{DIRECTORY}/{path.name}"
        text = path.read_text(encoding="utf-8")
        found = [m.group(1) for m in re.finditer(r"^## (.+?)\s*$", text, re.M)]
        if [s for s in found if s in SECTIONS] != list(SECTIONS):
            out.append(f"{label}: sections {found}, expected {list(SECTIONS)} in that order")
        lines = len(text.splitlines())
        if lines > MAX_LINES:
            out.append(f"{label}: {lines} lines, at most {MAX_LINES}")
        own = [(m.group(1), m.group(2).strip()) for m in map(_ROW.match, text.splitlines()) if m]
        if not own:
            out.append(f"{label}: its patch table lists no patch")
        rows += [(label, *row) for row in own]
        out += _harness_terms(label, text)
    if len(rows) != len(want):
        out.append(f"the descriptions list {len(rows)} patches, the series has {len(want)}")
    for (label, number, got), (expected_number, expected) in zip(rows, want, strict=False):
        if (number, got) != (expected_number, expected):
            out.append(
                f"{label}: row {number} reads {got!r}; patch {expected_number} of the"
                f" series is {expected!r}"
            )
    for name in names:
        out += _harness_terms(f"{name}'s message", message(directory / name))
    return out
