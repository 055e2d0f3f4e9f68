"""Read patch files: the files and hunks they touch, and why one failed."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sglpatch.gitcmd import Git, output_of

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_FAILED_AT = re.compile(r"^error: patch failed: (.+):(\d+)$")
_FILE_REASONS = (
    (re.compile(r"^error: (.+): does not exist in index$"), "does not exist"),
    (re.compile(r"^error: (.+): No such file or directory$"), "does not exist"),
    (
        re.compile(r"^error: (.+): already exists in (?:index|working directory)$"),
        "exists",
    ),
    (
        re.compile(r"^CONFLICT \([^)]*\): Merge conflict in (.+)$"),
        "3-way merge conflicts",
    ),
)
_NOT_APPLIED = re.compile(r"^error: (.+): patch does not apply$")
_PATCH_REASONS = (
    re.compile(r"^error: (corrupt patch at line \d+)$"),
    re.compile(r"^(Patch is empty)\.?"),
    re.compile(r"^error: (No valid patches in input.*)$"),
    re.compile(r"^fatal: (.+)$"),
)


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` section: where it starts in the old and the new file."""

    old_start: int
    new_start: int
    header: str


@dataclass
class FileDiff:
    """The changes of one file."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        """The file's name after the change (before it, for a deletion)."""
        return self.new_path or self.old_path or "?"


def parse(text: str) -> list[FileDiff]:
    """The file diffs of a git-format patch, in order."""
    files: list[FileDiff] = []
    for line in text.splitlines():
        if line.startswith("diff --git "):
            old, _, new = line[len("diff --git ") :].partition(" b/")
            files.append(FileDiff(_strip(old), _strip("b/" + new)))
        elif files and line.startswith("--- "):
            files[-1].old_path = _strip(line[4:])
        elif files and line.startswith("+++ "):
            files[-1].new_path = _strip(line[4:])
        elif files and (match := _HUNK.match(line)):
            hunk = Hunk(int(match[1]), int(match[3]), line.split(" @@")[0] + " @@")
            files[-1].hunks.append(hunk)
    return files


def _strip(name: str) -> str | None:
    """A path from a diff header without quotes and the a/ or b/ prefix."""
    name = name.strip().strip('"').split("\t")[0]
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def touched_files(patch: Path) -> list[str]:
    """Paths a patch creates or changes (not those it deletes)."""
    return [
        diff.new_path
        for diff in parse(patch.read_text("utf-8", "replace"))
        if diff.new_path
    ]


def abort_am(git: Git, patch: Path, am: subprocess.CompletedProcess[bytes]) -> str:
    """Abort a failed ``git am`` of ``patch``; return where it failed.

    A 3-way merge names only the conflicting file, so ``git apply --check``
    is asked for the failing hunks too.
    """
    git.run("am", "--abort", check=False)
    check = git.run("apply", "--check", str(patch), check=False)
    return describe_failure(patch, output_of(am) + output_of(check))


def describe_failure(patch: Path, git_output: str) -> str:
    """Where ``patch`` failed, from the output of git am and/or git apply."""
    diffs = {diff.path: diff for diff in parse(patch.read_text("utf-8", "replace"))}
    reasons: dict[str, list[str]] = {}
    for line in (line.strip() for line in git_output.splitlines()):
        for path, reason in _line_reasons(line, diffs):
            if reason not in reasons.setdefault(path, []):
                reasons[path].append(reason)
    for why in reasons.values():
        if len(why) > 1 and "does not apply" in why:
            why.remove("does not apply")
    if reasons:
        return "; ".join(f"{path}: {', '.join(why)}" for path, why in reasons.items())
    return _patch_reason(git_output)


def _line_reasons(line: str, diffs: dict[str, FileDiff]) -> list[tuple[str, str]]:
    """(path, reason) pairs that one line of git output states."""
    if match := _FAILED_AT.match(line):
        return [(match[1], _hunk_label(diffs.get(match[1]), int(match[2])))]
    found = [
        (m[1], why) for pattern, why in _FILE_REASONS if (m := pattern.match(line))
    ]
    if not found and (match := _NOT_APPLIED.match(line)):
        found = [(match[1], "does not apply")]
    return found


def _hunk_label(diff: FileDiff | None, start: int) -> str:
    """``hunk #N of M (@@ ... @@)`` for the hunk starting at old line ``start``."""
    hunks = diff.hunks if diff else []
    for number, hunk in enumerate(hunks, 1):
        if hunk.old_start == start:
            return f"hunk #{number} of {len(hunks)} ({hunk.header}) does not apply"
    return f"hunk at line {start} does not apply"


def _patch_reason(git_output: str) -> str:
    """A reason that concerns the whole patch, or git's last line."""
    lines = [line.strip() for line in git_output.splitlines() if line.strip()]
    for line in lines:
        for pattern in _PATCH_REASONS:
            if match := pattern.match(line):
                return match[1]
    return lines[-1] if lines else "git gave no reason"
