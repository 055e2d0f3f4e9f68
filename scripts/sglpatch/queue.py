"""The build tree: the pinned base plus one commit per patch, on branch ``patched``."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from sglpatch import scratch
from sglpatch import series as series_mod
from sglpatch import stamp as stamp_mod
from sglpatch.console import details, note
from sglpatch.errors import UserError
from sglpatch.gitcmd import TOOL_EMAIL, Git
from sglpatch.layout import Layout
from sglpatch.makevars import shown_path
from sglpatch.patchinfo import abort_am, all_paths
from sglpatch.pin import Pin, load_pin
from sglpatch.series import Series
from sglpatch.stamp import Building, Stamp
from sglpatch.upstream import check_source, create_base, git_url

BRANCH = "patched"
AM_OPTIONS = ("am", "--3way", "--keep-non-patch", "--committer-date-is-author-date")
# Lock files a killed git can leave in the git dir of the build tree.
_GIT_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", f"refs/heads/{BRANCH}.lock")


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
        if old is not None:
            _refuse_losing_work(layout, old)
        building = _fresh_base(layout, pin, source, wanted)
    else:
        building = _back_to_base(layout, pin, old, wanted)
    _apply_patches(layout, series, wanted, building)
    ensure_base_worktree(layout, pin)


def open_build_tree(layout: Layout, pin: Pin) -> Git:
    """Git of the build tree; refuse when there is none (or no ``patched``)."""
    git = Git(layout.sglang)
    if not (layout.sglang / ".git").exists() or not git.rev(f"{pin.base_tag}^{{commit}}"):
        raise UserError(f"no build tree at {layout.sglang}: run `make apply` first")
    if not git.rev(f"refs/heads/{BRANCH}"):
        raise UserError(f"{layout.sglang} has no branch {BRANCH}: run `make apply` first")
    return git


def require_built_from(layout: Layout, consequence: str = "") -> Stamp:
    """The stamp of a build tree at rest, built from the current pin and patches."""
    pin = load_pin(layout.pin_file)
    series = series_mod.load(layout.patches)
    found = stamp_mod.read(layout.sglang) if layout.sglang.exists() else None
    if found is None:
        raise UserError(
            f"no build tree made by sglpatch at {layout.sglang}: run `make apply` first"
        )
    if found.building is not None:
        raise UserError(
            f"the last `make apply` in {layout.sglang} was interrupted: run `make apply` first"
        )
    if found.patches != stamp_mod.patches_digest(pin, series):
        raise UserError(
            f"{layout.sglang} was not built from {layout.patches} as it is now (it changed"
            f" since){consequence}: run `make apply` first"
        )
    return found


def require_current(layout: Layout) -> Stamp:
    """The stamp of a build tree fully built from the current pin and patches."""
    found = require_built_from(layout)
    if not found.complete:
        raise UserError("the last `make apply` stopped on a failing patch: fix that first")
    return found


def _existing_stamp(layout: Layout) -> Stamp | None:
    """The stamp of an existing build tree; refuse a tree the tool did not make."""
    if not layout.sglang.exists() or _empty_dir(layout.sglang):
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
    if old.building is not None:
        foreign = foreign_work(git, old.building)
        if foreign:
            raise UserError(
                f"{layout.sglang} has {foreign}, made after an interrupted `make apply`:"
                " move that work out of the tree (a branch of its own, `git stash`) and"
                f" `git switch {BRANCH}`, or delete {layout.sglang}; then apply again"
            )
        note(f"the last `make apply` in {layout.sglang} was interrupted: rebuilding")
        return False
    local = local_work(git, old)
    same_inputs = old.inputs == wanted.inputs
    if same_inputs and local:
        note(f"{layout.sglang} has {local}; patches unchanged, tree left as is")
    elif same_inputs and old.complete and git.rev("HEAD") == old.head:
        note(f"{layout.sglang} is up to date ({read_hint(layout, load_pin(layout.pin_file))})")
    elif local:
        raise UserError(
            f"{layout.sglang} has {local}, and {layout.patches} changed since it was built:"
            f" to keep that work, set your change to {layout.patches} aside (e.g. `git stash"
            " -- patches`), run `make export` and redo the change; to drop it, delete"
            f" {layout.sglang}; then apply again"
        )
    else:
        return False
    return True


def local_work(git: Git, old: Stamp) -> str:
    """What in a tree at rest is not from the patches: '' when nothing is."""
    busy = git.busy()
    if busy:
        return f"{busy.what} in progress"
    if git.dirty_paths():
        return "uncommitted changes"
    if old.head and git.rev(f"{old.head}^{{commit}}"):
        extra = int(git.out("rev-list", "--count", f"{old.head}..HEAD"))
        if extra:
            return f"{extra} commit(s) not in patches/"
    return ""


def foreign_work(git: Git, building: Building) -> str:
    """What in a tree left by an interrupted apply is not the tool's: '' when nothing is.

    The tool's are: its own ``git am`` (while the stamp names one), commits it
    recorded or committed itself, and changes to the files it was rewriting.
    """
    busy = git.busy()
    # The stamp names the patch git am was applying: a rebase-apply that is not a
    # rebase's is that git am's, at any moment (even an empty one, left at its start).
    own_am = busy is not None and busy.marker in ("rebase-apply/applying", "rebase-apply")
    if busy and not (own_am and building.am is not None):
        return f"{busy.what} in progress"
    heads = [head for head in building.heads if git.rev(f"{head}^{{commit}}")]
    log = git.out("log", "--format=%H %ce", "HEAD", "--not", *heads).splitlines()
    theirs = [line.split()[0][:12] for line in log if line.split()[1:] != [TOOL_EMAIL]]
    if theirs:
        return f"{len(theirs)} commit(s) of its own ({', '.join(theirs)})"
    dirty = [path for path in git.dirty_paths() if path not in building.paths]
    if dirty:
        return f"uncommitted changes to {', '.join(dirty[:3])}{' ...' if dirty[3:] else ''}"
    return ""


# Files git may make from the tree's own code (imports): never anyone's work.
_DISPOSABLE = ("--exclude=__pycache__/", "--exclude=*.py[cod]")


def _refuse_losing_work(layout: Layout, old: Stamp) -> None:
    """Refuse to replace a tree that holds anything of the user's: a ref other than
    the tool's (branches, tags, the stash ...), a commit only the HEAD reflog holds
    (made on a detached HEAD since the last apply), untracked files; and the same
    in the base worktree."""
    git = Git(layout.sglang)
    found = _foreign_refs(git)
    found += _reflog_only(git, stamp_mod.path_of(layout.sglang))
    found += _untracked(git)
    if found:
        raise UserError(
            f"the base changed (base.toml or SOURCE), so {layout.sglang} is made anew,"
            f" and it holds {_listed(found)}: take out what you want to keep (`git"
            " format-patch`, `git stash show -p`, a copy of the files), delete the"
            f" others (or {layout.sglang} itself), then apply again"
        )
    _refuse_base_work(layout, "the base changed (base.toml or SOURCE), so it is made anew")


def _foreign_refs(git: Git) -> list[str]:
    """Refs that are not the tool's: all but ``patched``, the ``base/*`` tags, and
    (from a git source) the clone's remote refs and tags of the base commit."""
    listing = git.out("for-each-ref", "--format=%(refname) %(objectname) %(*objectname)")
    rows = [line.split() for line in listing.splitlines()]
    bases = {row[-1] for row in rows if row[0].startswith("refs/tags/base/")}
    own = (f"refs/heads/{BRANCH}",)
    return [
        row[0].removeprefix("refs/heads/")
        for row in rows
        if row[0] not in own
        and not row[0].startswith(("refs/tags/base/", "refs/remotes/origin/"))
        and not (row[0].startswith("refs/tags/") and row[-1] in bases)
    ]


def _reflog_only(git: Git, stamp_file: Path) -> list[str]:
    """Commits HEAD's reflog reached since the stamp was written that no ref holds
    and the tool did not make (a commit on a detached HEAD)."""
    since = int(stamp_file.stat().st_mtime) if stamp_file.exists() else 0
    log = git.run("log", "-g", "--date=unix", "--format=%H %gd", "HEAD", check=False)
    recent = []
    for line in log.stdout.decode("utf-8", "replace").splitlines():
        commit, _, selector = line.partition(" ")
        stamp = selector.rpartition("@{")[2].rstrip("}")
        if stamp.isdigit() and int(stamp) >= since and commit not in recent:
            recent.append(commit)
    if not recent:
        return []
    lost = git.out("rev-list", "--format=%H %ce", *recent, "--not", "--all")
    rows = [line.split() for line in lost.splitlines() if not line.startswith("commit ")]
    mine = [row[0][:12] for row in rows if row[1:] != [TOOL_EMAIL]]
    return [f"commit {commit} (only in the reflog of HEAD)" for commit in mine]


def _untracked(git: Git) -> list[str]:
    """Untracked files (not those git ignores, nor Python's caches)."""
    out = git.run("ls-files", "--others", "--exclude-standard", *_DISPOSABLE, "-z").stdout
    names = [name for name in out.decode("utf-8", "replace").split("\0") if name]
    return [f"untracked {name}" for name in names]


def _listed(items: list[str]) -> str:
    """``a, b, c and 4 more``."""
    more = f" and {len(items) - 5} more" if len(items) > 5 else ""
    return ", ".join(items[:5]) + more


def _refuse_base_work(layout: Layout, why: str) -> None:
    """Refuse to remake build/base while it holds changes, files or commits of the
    user's; one that ``git worktree add`` left half made is the tool's."""
    if not layout.base.is_dir() or _empty_dir(layout.base):
        return
    locked = layout.sglang / ".git" / "worktrees" / layout.base.name / "locked"
    if locked.is_file() and locked.read_text().strip() == "initializing":
        return
    base = Git(layout.base)
    found = [f"changes to {path}" for path in base.dirty_paths()]
    found += _untracked(base)
    commits = base.out("rev-list", "HEAD", "--not", "--branches", "--tags", "--remotes")
    found += [f"commit {commit[:12]}" for commit in commits.split()]
    if found:
        raise UserError(
            f"{layout.base} holds {_listed(found)}, and {why}: move them out of it"
            f" (`git -C {shown_path(layout.base)} stash`, a copy of the files) or delete"
            f" {layout.base}, then apply again"
        )


def _fresh_base(layout: Layout, pin: Pin, source: str, wanted: Stamp) -> Building:
    """Build a new base repository aside, then swap it in for the old trees."""
    if layout.base.exists():
        _check_base_is_ours(layout)
    work = scratch.new_dir(layout, scratch.NEW_TREE)
    try:
        repo = work / "sglang"
        commit = create_base(pin, source, layout.cache, repo)
        Git(repo).run("tag", "-f", pin.base_tag, commit)
        building = Building().step([commit])
        stamp_mod.write(repo, wanted.building_with(building))
        scratch.discard(layout, layout.base)
        scratch.discard(layout, layout.sglang)
        repo.rename(layout.sglang)
        note(f"base {pin.base_tag} is commit {commit} ({source})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return building


def _back_to_base(layout: Layout, pin: Pin, old: Stamp, wanted: Stamp) -> Building:
    """Reset ``patched`` to the base tag; first record what that may leave behind."""
    git = Git(layout.sglang)
    head, base = git.rev("HEAD"), git.rev(f"{pin.base_tag}^{{commit}}")
    if base is None:
        raise UserError(f"{layout.sglang} lacks tag {pin.base_tag}: delete it and apply again")
    changed = git.run("diff", "--name-only", "-z", head or base, base).stdout
    building = (old.building or Building()).step(
        [head, base], changed.decode("utf-8", "replace").split("\0")[:-1]
    )
    stamp_mod.write(layout.sglang, wanted.building_with(building))
    if old.building is not None:
        _drop_own_leftovers(git)
    git.run("checkout", "-q", "-f", "-B", BRANCH, pin.base_tag)
    return building


def _drop_own_leftovers(git: Git) -> None:
    """Lock files and the ``git am`` of an interrupted apply (checked to be its own)."""
    git_dir = git.cwd / ".git"
    for name in _GIT_LOCKS:
        (git_dir / name).unlink(missing_ok=True)
    if (git_dir / "rebase-apply").exists():
        git.run("am", "--quit", check=False)
        shutil.rmtree(git_dir / "rebase-apply", ignore_errors=True)


def _apply_patches(layout: Layout, series: Series, wanted: Stamp, building: Building) -> None:
    """``git am`` each patch; on failure stop at the last good commit."""
    git = Git(layout.sglang)
    for number, path in enumerate(series.paths, 1):
        building = building.step([git.rev("HEAD")], all_paths(path), am=path.name)
        stamp_mod.write(layout.sglang, wanted.building_with(building))
        proc = git.run(*AM_OPTIONS, str(path), check=False)
        if proc.returncode != 0:
            where = abort_am(git, path, proc)
            stamp_mod.write(layout.sglang, wanted.with_head(git.rev("HEAD"), False))
            raise UserError(_failure_message(layout, series, number, where))
    stamp_mod.write(layout.sglang, wanted.with_head(git.rev("HEAD"), True))
    pin = load_pin(layout.pin_file)
    note(f"{layout.sglang} is on branch {BRANCH}: {pin.base_tag} + {len(series)} patch(es)")
    details([*(str(line) for line in patch_summaries(git, pin)), read_hint(layout, pin)])


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


@dataclass(frozen=True)
class PatchSummary:
    """One commit of the series: its subject, the files it changes, lines +/-."""

    number: int
    subject: str
    files: tuple[str, ...]
    added: int
    deleted: int

    def __str__(self) -> str:
        names = ", ".join(Path(name).name for name in self.files) or "no files"
        return f"{self.number:04d} {self.subject} ({names} +{self.added} -{self.deleted})"


def patch_summaries(git: Git, pin: Pin) -> list[PatchSummary]:
    """A summary of each commit on ``patched`` above the base tag, oldest first."""
    log = git.out(
        "log", "--reverse", "--format=%x00%s", "--numstat", f"{pin.base_tag}..refs/heads/{BRANCH}"
    )
    out = []
    for number, record in enumerate(log.split("\0")[1:], 1):
        subject, *stats = record.splitlines()
        rows = [line.split("\t", 2) for line in stats if line.count("\t") >= 2]
        counts = [(int(a), int(d)) for a, d, _ in rows if a.isdigit() and d.isdigit()]
        out.append(
            PatchSummary(
                number,
                subject,
                tuple(name for _, _, name in rows),
                sum(a for a, _ in counts),
                sum(d for _, d in counts),
            )
        )
    return out


def read_hint(layout: Layout, pin: Pin) -> str:
    """How to read the series as commits."""
    return f"read it: git -C {shown_path(layout.sglang)} log -p {pin.base_tag}..{BRANCH}"


def ensure_base_worktree(layout: Layout, pin: Pin) -> None:
    """Keep build/base a clean detached worktree of the base tag."""
    git = Git(layout.sglang)
    tag = git.rev(f"{pin.base_tag}^{{commit}}")
    if layout.base.exists():
        _check_base_is_ours(layout)
        base = Git(layout.base)
        if base.rev("HEAD") == tag and not base.dirty_paths():
            return
        _refuse_base_work(layout, f"apply remakes it at {pin.base_tag}")
        scratch.discard(layout, layout.base)
    git.run("worktree", "prune")
    # -f -f: a `worktree add` killed half-way leaves build/base registered and locked.
    git.run("worktree", "add", "-f", "-f", "--detach", str(layout.base), pin.base_tag)


def _check_base_is_ours(layout: Layout) -> None:
    """Refuse to touch a build/base that is not a worktree of build/sglang."""
    if _empty_dir(layout.base):
        return
    marker = layout.base / ".git"
    text = marker.read_text() if marker.is_file() else ""
    owner = Path(text.removeprefix("gitdir:").strip()).parent.parent
    if owner.resolve() != (layout.sglang / ".git").resolve():
        raise UserError(
            f"{layout.base} exists and is not the base worktree of {layout.sglang}:"
            " move it away or delete it"
        )


def _empty_dir(path: Path) -> bool:
    """True for a directory with nothing in it (a tree that holds nothing to lose)."""
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def patch_commits(layout: Layout) -> list[tuple[str, str]]:
    """(commit, subject) of each patch on branch ``patched``, oldest first.

    For callers that walk the series one patch at a time (``make bench
    --ladder``); refuses, as ``open_build_tree`` does, without a build tree.
    """
    pin = load_pin(layout.pin_file)
    git = open_build_tree(layout, pin)
    commits = git.out("rev-list", "--reverse", f"{pin.base_tag}..refs/heads/{BRANCH}").split()
    return [(commit, git.out("log", "-1", "--format=%s", commit)) for commit in commits]
