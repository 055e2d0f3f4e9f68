"""Findings: evidence, in a release's code, that a patch is upstream in another form.

``patches/upstream.toml`` (optional) is a table of findings. Each names
patches of the series, an ``action`` (``drop`` or ``port``), a ``reason``, and
one or more pieces of evidence; check-upstream reports the finding for a patch
when every piece holds in the release. A piece of evidence names a ``file``
(default: the pin's target), an optional ``scope`` (``Class`` or
``Class.method``, located with Python's ``ast``), and strings that the scope's
source ``has`` and ``lacks``. The evidence must not hold in the pinned base
too, or it would not tell a release apart: ``check`` refuses such a table.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sglpatch.errors import UserError
from sglpatch.pin import Pin

FILE_NAME = "upstream.toml"
ACTIONS = ("drop", "port")
_FINDING_KEYS = {"patches", "action", "reason", "evidence"}
_EVIDENCE_KEYS = {"file", "scope", "has", "lacks"}

# Reads a file of a release (a path under the package root, e.g. python/...):
# its text, or None when the release has no such file.
Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Evidence:
    """Strings that a file, or one class or method in it, has and lacks."""

    file: str
    scope: str
    has: tuple[str, ...]
    lacks: tuple[str, ...]

    def look(self, read: Reader) -> str | None:
        """Where this holds (``file.py:LINE scope``), or None when it does not."""
        text = read(self.file)
        if text is None:
            return None
        found = _scope(text, self.scope) if self.scope else (text, 1)
        if found is None:
            return None
        source, line = found
        if not all(s in source for s in self.has) or any(s in source for s in self.lacks):
            return None
        if self.has:  # the line of the first string it has, else where the scope starts
            line += source[: source.index(self.has[0])].count("\n")
        return f"{Path(self.file).name}:{line}{' ' + self.scope if self.scope else ''}"

    def __str__(self) -> str:
        parts = [f"has {', '.join(f'`{s}`' for s in self.has)}"] if self.has else []
        parts += [f"lacks {', '.join(f'`{s}`' for s in self.lacks)}"] if self.lacks else []
        return " and ".join(parts)


@dataclass(frozen=True)
class Finding:
    """One row of the table: what to do with some patches, when, and why."""

    number: int
    patches: tuple[str, ...]
    action: str
    reason: str
    evidence: tuple[Evidence, ...]

    def look(self, read: Reader) -> list[str] | None:
        """Where each piece of evidence holds, or None unless all of them do."""
        places = [piece.look(read) for piece in self.evidence]
        return None if None in places else [p for p in places if p]


@dataclass(frozen=True)
class Match:
    """A finding that holds in a release: the report's words for it."""

    action: str
    reason: str
    places: tuple[str, ...]
    evidence: tuple[Evidence, ...]

    def describe(self) -> str:
        """``reason (file.py:LINE scope has `x`; ...)``."""
        shown = "; ".join(
            f"{place} {piece}" for place, piece in zip(self.places, self.evidence, strict=True)
        )
        return f"{self.reason} ({shown})"


def load(path: Path, pin: Pin) -> list[Finding]:
    """The findings of ``path``; none when it does not exist."""
    if not path.exists():
        return []
    try:
        table = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot be read as TOML: {exc}") from None
    rows = table.get("finding", [])
    if set(table) - {"finding"} or not isinstance(rows, list):
        raise UserError(f"{path}: expected only [[finding]] tables")
    return [_finding(path, number, row, pin) for number, row in enumerate(rows, 1)]


def _finding(path: Path, number: int, row: object, pin: Pin) -> Finding:
    """One validated [[finding]]."""
    where = f"{path}: finding {number}"
    if not isinstance(row, dict) or set(row) - _FINDING_KEYS:
        raise UserError(f"{where}: keys are {', '.join(sorted(_FINDING_KEYS))}")
    patches, action, reason = row.get("patches"), row.get("action"), row.get("reason")
    if not _strings(patches) or not patches:
        raise UserError(f"{where}: patches must be a list of patch file names")
    if action not in ACTIONS:
        raise UserError(f"{where}: action must be one of {', '.join(ACTIONS)}, not {action!r}")
    if not isinstance(reason, str) or not reason.strip():
        raise UserError(f"{where}: reason must be a sentence")
    pieces = row.get("evidence")
    if not isinstance(pieces, list) or not pieces:
        raise UserError(f"{where}: needs at least one [[finding.evidence]]")
    evidence = tuple(_evidence(where, piece, pin) for piece in pieces)
    return Finding(number, tuple(patches), action, " ".join(reason.split()), evidence)


def _evidence(where: str, piece: object, pin: Pin) -> Evidence:
    """One validated [[finding.evidence]]."""
    if not isinstance(piece, dict) or set(piece) - _EVIDENCE_KEYS:
        raise UserError(f"{where}: evidence keys are {', '.join(sorted(_EVIDENCE_KEYS))}")
    file, scope = piece.get("file", pin.target), piece.get("scope", "")
    has, lacks = piece.get("has", []), piece.get("lacks", [])
    if not isinstance(file, str) or file.startswith("/") or ".." in file.split("/"):
        raise UserError(f"{where}: file must be a path inside the release, like {pin.target}")
    parts = scope.split(".") if isinstance(scope, str) and scope else []
    if not isinstance(scope, str) or len(parts) > 2 or not all(p.isidentifier() for p in parts):
        raise UserError(f"{where}: scope must be Class or Class.method, not {scope!r}")
    if not _strings(has) or not _strings(lacks) or not (has or lacks):
        raise UserError(f"{where}: evidence needs lists of strings it has and/or lacks")
    return Evidence(file, scope, tuple(has), tuple(lacks))


def _strings(value: object) -> bool:
    """True for a list of non-empty strings."""
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def _scope(text: str, scope: str) -> tuple[str, int] | None:
    """The source of class ``A`` or method ``A.b`` in ``text`` and its first line."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    nodes: list[ast.stmt] = tree.body
    found: ast.stmt | None = None
    for name in scope.split("."):
        kinds = (ast.ClassDef,) if found is None else (ast.FunctionDef, ast.AsyncFunctionDef)
        found = next((n for n in nodes if isinstance(n, kinds) and n.name == name), None)
        if found is None:
            return None
        nodes = found.body
    source = ast.get_source_segment(text, found) if found else None
    return (source, found.lineno) if found and source else None


def problems(findings: list[Finding], names: tuple[str, ...]) -> list[str]:
    """Findings that name a patch the series does not list."""
    return [
        f"finding {finding.number} names {patch}, which the series does not list"
        for finding in findings
        for patch in finding.patches
        if patch not in names
    ]


def check(findings: list[Finding], names: tuple[str, ...], base: Reader, path: Path) -> None:
    """Refuse findings for unlisted patches, or whose evidence holds in the base."""
    stale = problems(findings, names)
    if stale:
        raise UserError(f"{path}: {stale[0]}: rename it there")
    for finding in findings:
        if finding.look(base) is not None:
            raise UserError(
                f"{path}: finding {finding.number} holds in the pinned base too, so it"
                " tells no release apart: make its evidence stricter"
            )


def match(findings: list[Finding], patch: str, release: Reader) -> Match | None:
    """The first finding for ``patch`` that holds in ``release``, or None."""
    for finding in findings:
        if patch in finding.patches:
            places = finding.look(release)
            if places is not None:
                return Match(finding.action, finding.reason, tuple(places), finding.evidence)
    return None
