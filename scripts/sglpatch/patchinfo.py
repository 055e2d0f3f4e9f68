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
# A damaged patch (text or binary hunk): git apply on the patch file numbers its
# lines; git am numbers those of the diff it split off the mail.
_CORRUPT = re.compile(r"^error: (corrupt (?:binary )?patch at line (\d+))")
# Reasons that concern the whole patch, the most telling first.
_PATCH_REASONS = (
    _CORRUPT,
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
    # The patch file's line of its ``diff --git`` header (1-based).
    line: int = 0

    @property
    def path(self) -> str:
        """The file's name after the change (before it, for a deletion)."""
        return self.new_path or self.old_path or "?"


def parse(text: str) -> list[FileDiff]:
    """The file diffs of a git-format patch, in order."""
    files: list[FileDiff] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("diff --git "):
            old, _, new = line[len("diff --git ") :].partition(" b/")
            files.append(FileDiff(_strip(old), _strip("b/" + new), line=number))
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
    return [diff.new_path for diff in parse(patch.read_text("utf-8", "replace")) if diff.new_path]


def all_paths(patch: Path) -> list[str]:
    """Every path a patch names: created, changed, deleted or renamed."""
    diffs = parse(patch.read_text("utf-8", "replace"))
    return sorted({path for diff in diffs for path in (diff.old_path, diff.new_path) if path})


def abort_am(git: Git, patch: Path, am: subprocess.CompletedProcess[bytes]) -> str:
    """Abort a failed ``git am`` of ``patch``; return where it failed.

    A 3-way merge names only the conflicting file, so ``git apply --check``
    is asked for the failing hunks too.
    """
    git.run("am", "--abort", check=False)
    return describe_failure(patch, output_of(am) + check_hunks(git, patch))


def check_hunks(git: Git, patch: Path) -> str:
    """Output of ``git apply --check --reject``: it names every failing hunk."""
    return output_of(git.run("apply", "--check", "--reject", str(patch), check=False))


def describe_failure(patch: Path, git_output: str) -> str:
    """Where ``patch`` failed, from the output of git am and/or git apply."""
    diffs = {diff.path: diff for diff in parse(patch.read_text("utf-8", "replace"))}
    failures: dict[str, _FileFailure] = {}
    for line in (line.strip() for line in git_output.splitlines()):
        _read_line(line, failures)
    if failures:
        return "; ".join(
            f"{path}: {failure.summary(diffs.get(path))}" for path, failure in failures.items()
        )
    corrupt = [m for line in git_output.splitlines() if (m := _CORRUPT.match(line.strip()))]
    if corrupt:
        return _corrupt_reason(patch, corrupt)
    return _patch_reason(git_output)


def _corrupt_reason(patch: Path, found: list[re.Match]) -> str:
    """``python/x.bin: corrupt binary patch at line 64 of 0001-x.patch``: git
    apply's line (of the patch file: the last report, as callers append it after
    git am's) and the file whose diff holds it."""
    reason, line = found[-1][1], int(found[-1][2])
    diffs = parse(patch.read_text("utf-8", "replace"))
    holder = [diff for diff in diffs if 0 < diff.line <= line]
    where = f"{holder[-1].path}: " if holder else ""
    return f"{where}{reason} of {patch.name}"


@dataclass
class _FileFailure:
    """What git said about one file: failing hunks (by old start) and reasons."""

    starts: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def summary(self, diff: FileDiff | None) -> str:
        """``reason, hunk #N of M (@@ ... @@) does not apply`` and the like."""
        reasons = [r for r in self.reasons if r != "does not apply"]
        if self.starts:
            reasons.append(_hunks_label(diff, self.starts))
        return ", ".join(reasons or self.reasons)


def _read_line(line: str, failures: dict[str, _FileFailure]) -> None:
    """Record what one line of git output says about a file."""
    if match := _FAILED_AT.match(line):
        starts = failures.setdefault(match[1], _FileFailure()).starts
        if int(match[2]) not in starts:
            starts.append(int(match[2]))
        return
    found = [(m[1], why) for pattern, why in _FILE_REASONS if (m := pattern.match(line))]
    if not found and (match := _NOT_APPLIED.match(line)):
        found = [(match[1], "does not apply")]
    for path, why in found:
        reasons = failures.setdefault(path, _FileFailure()).reasons
        if why not in reasons:
            reasons.append(why)


def _hunks_label(diff: FileDiff | None, starts: list[int]) -> str:
    """``hunk #2 of 5 (@@ ... @@) does not apply``, or several hunks."""
    hunks = diff.hunks if diff else []
    known = {hunk.old_start: (n, hunk.header) for n, hunk in enumerate(hunks, 1)}
    total = f" of {len(hunks)}" if hunks else ""
    if len(starts) == 1:
        number, header = known.get(starts[0], (None, ""))
        if number is None:
            return f"hunk at line {starts[0]} does not apply"
        return f"hunk #{number}{total} ({header}) does not apply"
    labels = [f"#{known[s][0]} ({known[s][1]})" if s in known else f"at line {s}" for s in starts]
    return f"hunks {', '.join(labels)}{total} do not apply"


def _patch_reason(git_output: str) -> str:
    """A reason that concerns the whole patch, or git's last line."""
    lines = [line.strip() for line in git_output.splitlines() if line.strip()]
    for pattern in _PATCH_REASONS:
        for line in lines:
            if match := pattern.match(line):
                return match[1]
    return lines[-1] if lines else "git gave no reason"
