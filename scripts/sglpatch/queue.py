"""The build tree: the pinned base plus one commit per patch, on branch ``patched``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sglpatch import series as series_mod
from sglpatch import stamp as stamp_mod
from sglpatch.console import note
from sglpatch.errors import UserError
from sglpatch.gitcmd import Git
from sglpatch.layout import Layout
from sglpatch.patchinfo import abort_am
from sglpatch.pin import Pin, load_pin
from sglpatch.series import Series
from sglpatch.stamp import Stamp
from sglpatch.upstream import check_source, create_base, git_url

BRANCH = "patched"
AM_OPTIONS = ("am", "--3way", "--keep-non-patch", "--committer-date-is-author-date")


def apply_series(layout: Layout, source: str) -> None:
    """Bring build/sglang up to date with the pin and the series."""
    check_source(source)
    pin = load_pin(layout.pin_file)
    series = series_mod.load(layout.patches)
    url = git_url(pin) if source == "git" else ""
    wanted = stamp_mod.compute(pin, series, source, url)
    old = _existing_stamp(layout)
    if old is not None and _keep(layout, old, wanted):
        ensure_base_worktree(layout, pin)
        return
    if old is None or old.base != wanted.base:
        _fresh_base(layout, pin, source, wanted)
    else:
        Git(layout.sglang).run("checkout", "-q", "-f", "-B", BRANCH, pin.base_tag)
    _apply_patches(layout, series, wanted)
    ensure_base_worktree(layout, pin)


def open_build_tree(layout: Layout, pin: Pin) -> Git:
    """Git of the build tree; refuse when there is none (or no ``patched``)."""
    git = Git(layout.sglang)
    if not (layout.sglang / ".git").exists() or not git.rev(f"{pin.base_tag}^{{commit}}"):
        raise UserError(f"no build tree at {layout.sglang}: run `make apply` first")
    if not git.rev(f"refs/heads/{BRANCH}"):
        raise UserError(f"{layout.sglang} has no branch {BRANCH}: run `make apply` first")
    return git


def require_current(layout: Layout) -> Stamp:
    """The stamp of a build tree fully built from the current pin and patches."""
    pin = load_pin(layout.pin_file)
    series = series_mod.load(layout.patches)
    found = stamp_mod.read(layout.sglang) if layout.sglang.exists() else None
    if found is None or found.patches != stamp_mod.patches_digest(pin, series):
        raise UserError(
            f"{layout.sglang} was not built from {layout.patches}: run `make apply` first"
        )
    if not found.complete:
        raise UserError("the last `make apply` stopped on a failing patch: fix that first")
    return found


def _existing_stamp(layout: Layout) -> Stamp | None:
    """The stamp of an existing build tree; refuse a tree the tool did not make."""
    if not layout.sglang.exists():
        return None
    found = stamp_mod.read(layout.sglang)
    if found is None:
        raise UserError(
            f"{layout.sglang} exists but was not made by sglpatch"
            f" (no .git/{stamp_mod.FILE_NAME}): move it away or delete it"
        )
    return found


def _keep(layout: Layout, old: Stamp, wanted: Stamp) -> bool:
    """True when the tree may stay as it is; raise when it must not be rebuilt."""
    git = Git(layout.sglang)
    local = local_work(git, old)
    unchanged = old.inputs == wanted.inputs and old.complete
    if unchanged and local:
        note(f"{layout.sglang} has {local}; patches unchanged, tree left as is")
    elif unchanged and git.rev("HEAD") == old.head:
        note(f"{layout.sglang} is up to date")
    elif local:
        raise UserError(
            f"{layout.sglang} has {local} and patches/ changed: run `make export` to"
            f" keep that work, or delete {layout.sglang} to drop it, then apply again"
        )
    else:
        return False
    return True


def local_work(git: Git, old: Stamp) -> str:
    """What in the tree is not from the patches: '' when nothing is."""
    git_dir = git.cwd / ".git"
    if (git_dir / "rebase-apply").exists() or (git_dir / "rebase-merge").exists():
        return "a git am or rebase in progress"
    if git.out("status", "--porcelain", "--untracked-files=no"):
        return "uncommitted changes"
    if old.head and git.rev(f"{old.head}^{{commit}}"):
        extra = int(git.out("rev-list", "--count", f"{old.head}..HEAD"))
        if extra:
            return f"{extra} commit(s) not in patches/"
    return ""


def _fresh_base(layout: Layout, pin: Pin, source: str, wanted: Stamp) -> None:
    """Build a new base repository aside, then swap it in for the old tree."""
    layout.build.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".sglang-new-", dir=layout.build))
    try:
        repo = scratch / "sglang"
        commit = create_base(pin, source, layout.cache, repo)
        Git(repo).run("tag", "-f", pin.base_tag, commit)
        stamp_mod.write(repo, wanted.with_head(commit, False))
        _remove_build_trees(layout)
        repo.rename(layout.sglang)
        note(f"base {pin.base_tag} is commit {commit} ({source})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _remove_build_trees(layout: Layout) -> None:
    """Delete the tool's own build/base and build/sglang."""
    if layout.base.exists():
        _check_base_is_ours(layout)
        shutil.rmtree(layout.base)
    if layout.sglang.exists():
        shutil.rmtree(layout.sglang)


def _apply_patches(layout: Layout, series: Series, wanted: Stamp) -> None:
    """``git am`` each patch; on failure stop at the last good commit."""
    git = Git(layout.sglang)
    for number, path in enumerate(series.paths, 1):
        proc = git.run(*AM_OPTIONS, str(path), check=False)
        if proc.returncode != 0:
            where = abort_am(git, path, proc)
            stamp_mod.write(layout.sglang, wanted.with_head(git.rev("HEAD"), False))
            raise UserError(_failure_message(layout, series, number, where))
    stamp_mod.write(layout.sglang, wanted.with_head(git.rev("HEAD"), True))
    note(f"{layout.sglang} is on branch {BRANCH}: base + {len(series)} patch(es)")


def _failure_message(layout: Layout, series: Series, number: int, where: str) -> str:
    """One line saying which patch failed where, and how to fix it."""
    rest = " ".join(str(path) for path in series.paths[number - 1 :])
    return (
        f"patch {number}/{len(series)} {series.names[number - 1]} does not apply:"
        f" {where}; {layout.sglang} is left at the last good commit"
        f" (base + {number - 1} patch(es)); to rebase the series there, run"
        f" `git am -3 {rest}`, resolve each conflict and `git am --continue`,"
        " then `make export`"
    )


def ensure_base_worktree(layout: Layout, pin: Pin) -> None:
    """Keep build/base a clean detached worktree of the base tag."""
    git = Git(layout.sglang)
    tag = git.rev(f"{pin.base_tag}^{{commit}}")
    if layout.base.exists():
        _check_base_is_ours(layout)
        base = Git(layout.base)
        if base.rev("HEAD") == tag and not base.out("status", "--porcelain", "-uno"):
            return
        shutil.rmtree(layout.base)
    git.run("worktree", "prune")
    git.run("worktree", "add", "--detach", str(layout.base), pin.base_tag)


def _check_base_is_ours(layout: Layout) -> None:
    """Refuse to touch a build/base that is not a worktree of build/sglang."""
    marker = layout.base / ".git"
    text = marker.read_text() if marker.is_file() else ""
    owner = Path(text.removeprefix("gitdir:").strip()).parent.parent
    if owner.resolve() != (layout.sglang / ".git").resolve():
        raise UserError(
            f"{layout.base} exists and is not the base worktree of {layout.sglang}:"
            " move it away or delete it"
        )


def patch_commits(layout: Layout) -> list[tuple[str, str]]:
    """(commit, subject) of each patch on branch ``patched``, oldest first.

    For callers that walk the series one patch at a time (``make bench
    --ladder``); refuses, as ``open_build_tree`` does, without a build tree.
    """
    pin = load_pin(layout.pin_file)
    git = open_build_tree(layout, pin)
    commits = git.out("rev-list", "--reverse", f"{pin.base_tag}..refs/heads/{BRANCH}").split()
    return [(commit, git.out("log", "-1", "--format=%s", commit)) for commit in commits]
