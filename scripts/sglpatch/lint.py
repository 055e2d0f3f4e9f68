"""lint-patched: upstream's pre-commit hooks on the files the series touches
(the base's hook config: ``lint`` in patches/bases.toml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sglpatch.console import note
from sglpatch.errors import CheckFailed, UserError
from sglpatch.gitcmd import Git, scratch_worktree
from sglpatch.layout import Layout
from sglpatch.pin import load_pin
from sglpatch.queue import BRANCH, open_build_tree


def touched_files(git: Git, base_tag: str) -> list[str]:
    """Files that exist on ``patched`` and differ from the base."""
    out = git.run(
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--diff-filter=d",
        base_tag,
        f"refs/heads/{BRANCH}",
    ).stdout
    return [name for name in out.decode("utf-8").split("\0") if name]


def lint_patched(layout: Layout, pre_commit: Path) -> int:
    """Run the hooks in a scratch worktree of ``patched``; raise if any complains."""
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
    with scratch_worktree(git, f"refs/heads/{BRANCH}") as work:
        argv = [executable, "run", "--config", str(config), "--color=never"]
        argv += ["--show-diff-on-failure", "--files", *files]
        code = subprocess.run(
            argv, cwd=work.cwd, env=Git(work.cwd, isolated=False).env()
        ).returncode
        changed = work.out("diff", "--name-only", "HEAD").splitlines()
    problems = [f"a hook rewrote {name}" for name in changed]
    if code != 0:
        problems.append(f"pre-commit exited {code} (its output is above)")
    if problems:
        raise CheckFailed(f"lint of {len(files)} patched file(s) failed", problems)
    note(f"lint passed on {len(files)} file(s): {', '.join(files)}")
    return 0


def _executable(pre_commit: Path) -> str:
    """The pre-commit program as an absolute path; refuse a missing one."""
    found = shutil.which(str(pre_commit))
    if found is None:
        raise UserError(f"pre-commit not found at {pre_commit}: run `make venv` first")
    return str(Path(found).absolute())
