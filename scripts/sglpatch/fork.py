"""Apply the series to a user's SGLang checkout, on a new branch, atomically."""

from __future__ import annotations

import os
import pwd
import shlex
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sglpatch import interrupt
from sglpatch import series as series_mod
from sglpatch.console import note
from sglpatch.errors import UserError
from sglpatch.gitcmd import Git, output_of, scratch_worktree
from sglpatch.layout import Layout
from sglpatch.lock import pid_lock
from sglpatch.makevars import via_make
from sglpatch.patchinfo import abort_am, describe_failure
from sglpatch.pin import Pin, load_pin
from sglpatch.series import Series


def apply_to_checkout(layout: Layout, path: Path, three_way: bool = False) -> str:
    """Apply the series to ``path`` on a new branch and check it out; return its name.

    The branch starts at the checkout's HEAD. Patches are applied in a
    temporary worktree; the branch is created and checked out only once all of
    them applied, so a failure changes nothing.
    """
    pin = load_pin(layout.pin_file)
    series = series_mod.load(layout.patches)
    git = open_checkout(path, pin)
    _refuse_own_tree(layout, git)
    branch = f"sglpatch/{pin.tag}-{len(series)}-patches"
    with fork_lock(git):
        _check_ready(git, series, branch)
        blob = git.rev(f"HEAD:{pin.target}")
        if blob != pin.target_blob and not three_way:
            raise _differs(git, pin, series, blob)
        start = _where(git)
        commit = _apply_in_worktree(git, series, branch, three_way)
        # The branch is made and checked out by one git, which a signal does not
        # stop half-way: it appears only with the apply done, and a signal that
        # came meanwhile finds it done (said so; the exit status is success).
        with interrupt.deferred(resume=False) as held:
            _create_and_switch(git, branch, commit, len(series))
            note(
                f"{git.cwd}: on new branch {branch}: {len(series)} commit(s) on top of"
                f" {_describe(git, start)}, where HEAD was (`git checkout {_name(start)}`"
                " goes back)"
            )
        if held:
            name = signal.Signals(held[0]).name
            note(f"{name} came as branch {branch} was made: the apply had finished")
    return branch


LOCK_NAME = "sglpatch.lock"


@contextmanager
def fork_lock(git: Git) -> Iterator[None]:
    """One sglpatch apply at a time on a checkout: a lock in its git dir; a second
    run is refused (it would apply on top of the first's branch)."""
    common = Path(git.out("rev-parse", "--path-format=absolute", "--git-common-dir"))
    path = common / LOCK_NAME

    def refuse(holder: str) -> None:
        raise UserError(
            f"another sglpatch apply is running on {git.cwd} ({holder}, lock {path}):"
            " wait for it to finish, then apply again"
        )

    with pid_lock(path, refuse):
        yield


def _refuse_own_tree(layout: Layout, git: Git) -> None:
    """Refuse a checkout that is one of the tool's own trees (build/<base>/base,
    build/<base>/sglang, or a worktree of theirs)."""
    root = layout.build.parent.resolve()
    common = Path(git.out("rev-parse", "--path-format=absolute", "--git-common-dir"))
    for where in (git.cwd.resolve(), common.resolve()):
        if where == root or root in where.parents:
            raise UserError(
                f"{git.cwd} is a tree of sglpatch's own (in {root}), which apply remakes:"
                " pass the root of your SGLang checkout"
            )


def open_checkout(path: Path, pin: Pin) -> Git:
    """Git of the SGLang checkout whose root is ``path``; refuse anything else.

    git looks for the repository in ``path`` only, never in a folder above it.
    """
    if not path.is_dir():
        raise UserError(f"{path} is not a directory: pass the root of an SGLang checkout")
    path = path.resolve()
    proc = Git(path, isolated=False).run("rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        _refuse_git_refusal(path, output_of(proc))
    if proc.returncode != 0 or Path(proc.stdout.decode().strip()) != path:
        raise UserError(
            f"{path} is not the root of a git checkout: clone SGLang, check out {pin.tag},"
            " pass the clone's root"
        )
    git = Git(path, isolated=False)
    if not (git.cwd / pin.target).is_file() or not git.rev(f"HEAD:{pin.target}"):
        raise UserError(
            f"{git.cwd} is not an SGLang checkout (no {pin.target} committed there):"
            f" pass the root of a clone of SGLang at {pin.tag}"
        )
    return git


def _refuse_git_refusal(path: Path, output: str) -> None:
    """Say why git refused a checkout it found (``dubious ownership``: another
    user owns it), with git's own way out; return for a folder git found no
    repository in."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    fatal = [line.removeprefix("fatal: ") for line in lines if line.startswith("fatal:")]
    if not fatal or "not a git repository" in fatal[-1]:
        return
    owner = ""
    if "dubious ownership" in fatal[-1]:
        try:
            owner = f" (owned by {pwd.getpwuid(path.stat().st_uid).pw_name}, not by you)"
        except (KeyError, OSError):
            owner = " (owned by another user)"
    commands = [line for line in lines if line.startswith("git config")]
    raise UserError(
        f"git refuses the checkout {path}: {fatal[-1]}{owner}",
        hints=[f"if you trust it: {command}" for command in commands],
    )


def _check_ready(git: Git, series: Series, branch: str) -> None:
    """Refuse an empty series, a busy or dirty tree, or an existing branch."""
    if not len(series):
        raise UserError(f"the series is empty: nothing to apply to {git.cwd}")
    busy = git.busy()
    if busy:
        raise UserError(f"{git.cwd} is in the middle of {busy.what}: {busy.advice()} first")
    if git.out("status", "--porcelain", "--untracked-files=no"):
        raise UserError(
            f"{git.cwd} has uncommitted changes: commit or stash them, then apply again"
        )
    if git.rev(f"refs/heads/{branch}"):
        raise UserError(
            f"branch {branch} already exists in {git.cwd}: delete or rename it"
            f" (git branch -m {branch} <new name>), then apply again"
        )


def _differs(git: Git, pin: Pin, series: Series, blob: str | None) -> UserError:
    """Why the checkout was refused, which patches fail, and what to do."""
    failing = dry_run(git, series)
    verdict = (
        f"{len(failing)} of {len(series)} patch(es) do not apply"
        if failing
        else f"all {len(series)} patch(es) pass `git apply --check`"
    )
    base = os.environ.get("SGLPATCH_MK_BASE", "")  # BASE as typed, if it was
    rerun = (
        f"make apply SGLANG_DIR={shlex.quote(str(git.cwd))}"
        f"{f' BASE={shlex.quote(base)}' if base else ''} THREE_WAY=1"
        if via_make("THREE_WAY")
        else "the same command with --three-way"
    )
    return UserError(
        f"{git.cwd} is not at {pin.tag}: its {pin.target} is blob {(blob or '?')[:12]},"
        f" not {pin.target_blob[:12]} (base.toml); {verdict}",
        hints=[
            *failing,
            f"to merge them: {rerun} (a 3-way merge), or check out {pin.tag} first",
        ],
    )


def dry_run(git: Git, series: Series) -> list[str]:
    """``git apply --check`` each patch on a scratch index of HEAD; list failures."""
    failing = []
    with tempfile.TemporaryDirectory(prefix="sglpatch-index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch, "index"))}
        git.run("read-tree", "HEAD", env=env)
        for path in series.paths:
            check = git.run("apply", "--cached", "--check", str(path), check=False, env=env)
            if check.returncode == 0:
                git.run("apply", "--cached", str(path), env=env)
            else:
                failing.append(f"{path.name}: {describe_failure(path, output_of(check))}")
    return failing


def _apply_in_worktree(git: Git, series: Series, branch: str, three_way: bool) -> str:
    """``git am`` the series in a scratch worktree of HEAD; return the last commit."""
    options = ["am", "--keep-non-patch", *(["--3way"] if three_way else [])]
    with scratch_worktree(git, "HEAD") as work:
        for number, path in enumerate(series.paths, 1):
            proc = work.run(*options, str(path), check=False)
            if proc.returncode != 0:
                what = f"patch {number}/{len(series)} {path.name}"
                work.run("am", "--abort", check=False)
                if work.ok("apply", "--check", str(path)):
                    raise UserError(
                        f"git am stopped at {what} (it applies cleanly):"
                        f" {am_refusal(output_of(proc))}; nothing was changed"
                    )
                merge = " even with a 3-way merge" if three_way else ""
                raise UserError(
                    f"{what} does not apply to {git.cwd}{merge}; nothing was changed there",
                    hints=[abort_am(work, path, proc), *by_hand(git, series, branch)],
                )
        return work.out("rev-parse", "HEAD")


# git am's own lines around a stop, which say nothing of why it stopped.
_AM_CHATTER = (
    "Applying:",
    "hint:",
    "Patch failed at",
    "When you have resolved",
    "If you prefer to skip",
    "To restore the original branch",
    "Use 'git am --show-current-patch",
    "*** Please tell me who you are",
    "Run",
    "git config",
    "to set your account",
    "Omit --global",
)


def am_refusal(output: str) -> str:
    """Why git am stopped on a patch that applies: a hook's own lines, or git's
    complaint (``Committer identity unknown: fatal: unable to auto-detect ...``)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(_AM_CHATTER)]
    if not lines:
        return "git am gave no reason (a hook: applypatch-msg, pre-applypatch?)"
    identity = [line for line in lines if "identity unknown" in line]
    fatal = [line for line in lines if line.startswith("fatal:")]
    if identity:
        why = (fatal or [""])[-1].removeprefix("fatal: ")
        return f"{identity[0]} ({why}): set user.name and user.email"
    return "; ".join(lines[:3])


def by_hand(git: Git, series: Series, branch: str) -> list[str]:
    """The README's by-hand route, as lines to copy: ``git am --3way`` stops at
    each conflict for you to resolve."""
    paths = [shlex.quote(str(path)) for path in series.paths]
    return [
        "resolve them by hand, in a clean tree (README: Using the patches in a fork):",
        f"  cd {shlex.quote(str(git.cwd))} && git switch -c {branch}",
        "  git am --3way --keep-non-patch \\",
        *[f"    {path} \\" for path in paths[:-1]],
        f"    {paths[-1]}",
        "  then, at each stop: fix the files, `git add` them, `git am --continue`",
    ]


def _create_and_switch(git: Git, branch: str, commit: str, count: int) -> None:
    """Create ``branch`` at ``commit`` and check it out; undo the branch on failure.

    What is reported is what git did: a post-checkout hook that fails makes
    ``git checkout`` fail after it switched, and a branch that cannot be
    deleted stays.
    """
    before = _where(git)
    proc = git.run("checkout", "-q", "-b", branch, commit, check=False, shielded=True)
    if proc.returncode == 0:
        return
    lines = output_of(proc).strip().splitlines() or [f"exit status {proc.returncode}"]
    if _where(git) == f"refs/heads/{branch}":
        raise UserError(
            f"{git.cwd} is now on the new branch {branch} (+{count} commit(s)), but"
            f" `git checkout` exited {proc.returncode} after switching (a post-checkout"
            f" hook?): {lines[-1]}; to go back: `git checkout {_name(before)}"
            f" && git branch -D {branch}`"
        )
    if not git.rev(f"refs/heads/{branch}"):
        raise UserError(
            f"could not check out {branch} in {git.cwd}: {lines[0]}; nothing was changed"
        )
    deleted = git.run("branch", "-D", branch, check=False)
    if deleted.returncode != 0:
        why = (output_of(deleted).strip().splitlines() or ["?"])[-1]
        raise UserError(
            f"could not check out {branch} in {git.cwd}: {lines[0]}; HEAD did not move,"
            f" but the new branch {branch} stays ({why}): delete it with"
            f" `git branch -D {branch}`"
        )
    raise UserError(f"could not check out {branch} in {git.cwd}: {lines[0]}; nothing was changed")


def _describe(git: Git, where: str) -> str:
    """``main (1a2b3c4d5e6f Subject)``: a ref or commit and what it holds."""
    commit = git.out("log", "-1", "--format=%h %s", "--abbrev=12", where)
    return f"{_name(where)} ({commit})" if where.startswith("refs/") else commit


def _where(git: Git) -> str:
    """The ref HEAD is on, or the commit of a detached HEAD."""
    proc = git.run("symbolic-ref", "-q", "HEAD", check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else git.rev("HEAD") or ""


def _name(where: str) -> str:
    """A ref or commit as the user would type it."""
    return where.removeprefix("refs/heads/")
