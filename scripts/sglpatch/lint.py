"""lint-patched: upstream's pre-commit hooks on the files the series touches
(the base's hook config: ``lint`` in patches/bases.toml), run in a scratch
worktree of the base tag (on the touched files it has) and of ``patched``; it
fails on what the patched run finds beyond the base run's (what passes:
ci/sglang-v0.5.23-pre-commit.yaml's header).

Compared per file, never by line number: a rewrite, as the ``git diff -U0``
hunks the hooks leave (their removed and added lines), from a hook that exits
0 or exits 1 saying only ``Fixing <file>`` (ruff format, black, isort, the
whitespace fixers); a report ``path:N: message`` of a hook that rewrites
nothing (codespell, debug-statements, check-merge-conflict), as (hook, the
text of line N, message). Not comparable, so failing whatever the base does:
any other output of a failed hook (check-ast's traceback, a crash, a fixer's
error) and a pre-commit run that fails without naming a hook.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sglpatch.console import note
from sglpatch.errors import CheckFailed, UserError
from sglpatch.gitcmd import Git, scratch_worktree
from sglpatch.layout import Layout
from sglpatch.pin import load_pin
from sglpatch.queue import BRANCH, open_build_tree

# pre-commit's line per hook: its name, dots, the outcome.
_STATUS = re.compile(r"^.*?\.+(?:\(no files to check\))?(Passed|Failed|Skipped)$")
_REPORT = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<message>.*)$")


@dataclass
class _Hook:
    """A hook pre-commit reports as failed: its header and output lines."""

    id: str = "?"
    exit: int = 0
    modified: bool = False
    body: list[str] | None = None  # None while the header is read


@dataclass
class _Run:
    """What the hooks found in one tree, per file."""

    rewrites: dict[str, Counter] = field(default_factory=dict)  # hunk -> count
    reports: dict[str, Counter] = field(default_factory=dict)  # (hook, text, msg)
    lines: dict[tuple[str, tuple], list[int]] = field(default_factory=dict)  # where
    rewriters: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)


def touched_files(git: Git, base_tag: str, diff_filter: str = "d") -> list[str]:
    """Files that differ between the base and ``patched`` (by default: those
    that exist on ``patched``; ``A``: those the series adds)."""
    out = git.run(
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        f"--diff-filter={diff_filter}",
        base_tag,
        f"refs/heads/{BRANCH}",
    ).stdout
    return [name for name in out.decode("utf-8").split("\0") if name]


def lint_patched(layout: Layout, pre_commit: Path) -> int:
    """Run the hooks on the base and on ``patched``; raise if the series adds findings."""
    pin = load_pin(layout.pin_file)
    git = open_build_tree(layout, pin)
    executable = _executable(pre_commit)
    config = layout.lint_config
    if not config.is_file():
        raise UserError(f"{config} not found")
    files = touched_files(git, pin.base_tag)
    if not files:
        note("the series touches no files: nothing to lint")
        return 0
    added = set(touched_files(git, pin.base_tag, "A"))
    argv = [executable, "run", "--config", str(config), "--color=never", "--files"]
    old = [name for name in files if name not in added]
    base = _run_hooks(git, pin.base_tag, argv + old) if old else _Run()
    new = _run_hooks(git, f"refs/heads/{BRANCH}", argv + files)
    problems = list(new.opaque)
    hooks = " or ".join(new.rewriters) or "a hook"
    for kind, name, key, count, on_base in _extra(new, base):
        if kind == "rewrites":
            what = f"{hooks} rewrote " + " ".join(ln[0] + repr(ln[1:]) for ln in key[:4])
        else:
            what = f"{key[0]}:{key[2]}, in {key[1]!r}"
        where = ",".join(str(number) for number in new.lines[name, key])
        problems.append(f"{name}:{where}: {what} ({count} time(s); the base file: {on_base})")
    if problems:
        raise CheckFailed(f"lint of {len(files)} patched file(s) failed", problems)
    shared = sum(c.total() for c in (*base.rewrites.values(), *base.reports.values()))
    note(f"lint passed on {len(files)} file(s): {', '.join(files)}")
    if shared:
        note(f"not the series': {shared} finding(s) the hooks make on the base's own files")
    return 0


def _extra(new: _Run, base: _Run):
    """(kind, file, finding, its count, the base file's) for each finding
    the patched files get more often than the base files."""
    for kind in ("rewrites", "reports"):
        olds = getattr(base, kind)
        for name, found in sorted(getattr(new, kind).items()):
            old = olds.get(name, Counter())
            for key in sorted(found - old):
                yield kind, name, key, found[key], old[key]


def _run_hooks(git: Git, rev: str, argv: list[str]) -> _Run:
    """pre-commit on the files of ``argv`` in a scratch worktree of ``rev``."""
    found = _Run()
    with scratch_worktree(git, rev) as work:
        proc = subprocess.run(
            argv,
            cwd=work.cwd,
            env=Git(work.cwd, isolated=False).env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output = proc.stdout.decode("utf-8", "replace")
        hooks = _failed_hooks(output)
        if proc.returncode != 0 and not hooks:
            last = (output.strip().splitlines() or ["no output"])[-1]
            found.opaque.append(f"pre-commit exited {proc.returncode}: {last}")
        for hook in hooks:
            if hook.modified:
                found.rewriters.append(hook.id)
            _sort_output(hook, work.cwd, found)
        for name in work.out("diff", "--name-only", "-z").split("\0"):
            if name:
                diff = work.run("diff", "-U0", "--no-color", "--no-ext-diff", "--", name)
                hunks = _hunks(diff.stdout.decode("utf-8", "replace"))
                found.rewrites[name] = Counter(hunk for hunk, _ in hunks)
                for hunk, number in hunks:
                    found.lines.setdefault((name, hunk), []).append(number)
    return found


def _failed_hooks(output: str) -> list[_Hook]:
    """The hooks pre-commit's output shows as failed, with their header and output."""
    hooks: list[_Hook] = []
    current: _Hook | None = None
    for line in output.splitlines():
        status = _STATUS.match(line)
        if status:
            current = _Hook() if status.group(1) == "Failed" else None
            hooks += [current] if current else []
        elif current is None:
            continue
        elif current.body is not None:
            current.body += [line] if line.strip() else []
        elif line.startswith("- hook id: "):
            current.id = line.removeprefix("- hook id: ")
        elif line.startswith("- exit code: "):
            current.exit = int(line.removeprefix("- exit code: "))
        elif line == "- files were modified by this hook":
            current.modified = True
        elif not line.startswith("- "):
            current.body = []
    return hooks


def _sort_output(hook: _Hook, root: Path, found: _Run) -> None:
    """File a failed hook's output: nothing (its rewrite is in the diff),
    reports, or a failure that cannot be compared."""
    body = hook.body or []
    if hook.modified:  # its rewrite is in the diff; its exit and output must add nothing
        if hook.exit == 0 or (hook.exit == 1 and all(ln.startswith("Fixing ") for ln in body)):
            return
    reports = [_REPORT.match(line) for line in body]
    if hook.modified or not body or not all(m and (root / m["path"]).is_file() for m in reports):
        shown = " | ".join(body[:3]) or "no output"
        found.opaque.append(f"{hook.id}: exit {hook.exit}, output not comparable: {shown}")
        return
    for match in reports:
        path, number = match["path"], int(match["line"])
        lines = (root / path).read_text(errors="replace").splitlines()
        text = lines[number - 1].strip() if 0 < number <= len(lines) else ""
        key = (hook.id, text, match["message"])
        found.reports.setdefault(path, Counter())[key] += 1
        found.lines.setdefault((path, key), []).append(number)


def _hunks(diff: str) -> list[tuple[tuple[str, ...], int]]:
    """The hunks of a ``git diff -U0``: each as its removed and added lines,
    and the number of its first line in the file before the hooks."""
    hunks: list[tuple[list[str], int]] = []
    for line in diff.splitlines():
        if line.startswith("@@"):
            hunks.append(([], int(re.match(r"@@ -(\d+)", line)[1])))
        elif hunks and line.startswith(("-", "+", "\\")):
            hunks[-1][0].append(line)
    return [(tuple(hunk), number) for hunk, number in hunks] or [(tuple(diff.splitlines()), 0)]


def _executable(pre_commit: Path) -> str:
    """The pre-commit program as an absolute path; refuse a missing one."""
    found = shutil.which(str(pre_commit))
    if found is None:
        raise UserError(f"pre-commit not found at {pre_commit}: run `make venv` first")
    return str(Path(found).absolute())
