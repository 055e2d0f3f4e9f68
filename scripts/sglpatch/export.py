"""Export the build tree's commits as patches/, and check patches/ against that."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from sglpatch import findings as findings_mod
from sglpatch import prdesc, roundtrip
from sglpatch import series as series_mod
from sglpatch import stamp as stamp_mod
from sglpatch.console import note
from sglpatch.errors import CheckFailed, UserError
from sglpatch.gitcmd import Git
from sglpatch.interrupt import deferred
from sglpatch.layout import Layout
from sglpatch.pin import Pin, load_pin
from sglpatch.queue import BRANCH, open_build_tree, require_built_from, require_current
from sglpatch.scratch import NEW_EXPORT, discard, new_dir
from sglpatch.stamp import Stamp

# Settings that could change format-patch output, pinned to git's defaults.
_DIFF_CONFIG = (
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.renames=false",
    "diff.relative=false",
    "diff.algorithm=myers",
    "diff.context=3",
    "diff.interHunkContext=0",
    "diff.suppressBlankEmpty=false",
    "diff.external=",
    "core.abbrev=12",
    "i18n.logOutputEncoding=UTF-8",
    "format.headers=",
    "format.signature=",
    "format.coverLetter=false",
    "format.numbered=false",
    "format.useAutoBase=false",
    "format.signOff=false",
    "format.notes=false",
    "format.thread=false",
    "format.encodeEmailHeaders=true",
    "format.forceInBodyFrom=false",
    "format.mboxrd=false",
)
_FORMAT_PATCH = (
    "format-patch",
    "--stdout",
    "--no-numbered",
    "--subject-prefix=PATCH",
    "--zero-commit",
    "--full-index",
    "--binary",
    "--no-signature",
    "--no-stat",
    "--no-renames",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-notes",
    "--no-thread",
    "--no-attach",
    "--no-to",
    "--no-cc",
    "--no-add-header",
    "--no-signoff",
    "--encode-email-headers",
    "--diff-algorithm=myers",
    "--unified=3",
    "--inter-hunk-context=0",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
SLUG_MAX = 52


def slug(subject: str) -> str:
    """A file-name-safe form of a commit subject, as git format-patch makes it."""
    text = re.sub(r"[^A-Za-z0-9._]+", "-", subject)
    text = re.sub(r"\.\.+", ".", text).strip("-.")
    return text[:SLUG_MAX].rstrip("-.") or "patch"


def render(layout: Layout) -> dict[str, bytes]:
    """File name -> bytes of each patch between the base tag and ``patched``.

    Refuses a commit that ``git am`` would not read back as itself.
    """
    pin = load_pin(layout.pin_file)
    git = open_build_tree(layout, pin)
    span = f"{pin.base_tag}..refs/heads/{BRANCH}"
    if git.out("rev-list", "--merges", span):
        raise UserError(f"{layout.sglang}: branch {BRANCH} has merge commits; rebase them away")
    patches: dict[str, bytes] = {}
    refused: list[str] = []
    commits = git.out("rev-list", "--reverse", "--topo-order", span).split()
    for number, commit in enumerate(commits, 1):
        subject = git.out("log", "-1", "--format=%s", commit)
        name = f"{number:04d}-{slug(subject)}.patch"
        patches[name] = git.run(*_format_options(), "-1", commit).stdout
        reason = roundtrip.why_not(git, commit, patches[name])
        if reason:
            refused.append(f"commit {commit[:12]} ({subject!r}): {reason}")
    if refused:
        raise UserError(
            f"{len(refused)} commit(s) of {layout.sglang} would not survive export and apply:"
            f" {'; '.join(refused)}; reword or fix them there (`git rebase -i"
            f" {pin.base_tag}`), then export"
        )
    return patches


def _format_options() -> list[str]:
    """``-c`` settings and the format-patch command with its fixed flags."""
    options = [word for item in _DIFF_CONFIG for word in ("-c", item)]
    return [*options, *_FORMAT_PATCH]


def export_series(layout: Layout) -> list[str]:
    """Rewrite the patch files and series from the build tree; return the names.

    Refuses unless the tree was built from patches/ as it is (so every file it
    replaces or removes is one the tree holds), is at rest on ``patched``, and
    every commit survives ``git am``.
    """
    pin = load_pin(layout.pin_file)
    listed = series_mod.load(layout.patches)
    require_built_from(layout, ": exporting would overwrite that change")
    _refuse_unfinished(layout, pin)
    patches = render(layout)
    _refuse_partial(layout, len(patches))
    writes = {
        name: data
        for name, data in patches.items()
        if not (layout.patches / name).is_file() or (layout.patches / name).read_bytes() != data
    }
    if [e.name for e in series_mod.read_entries(layout.patches)] != list(patches):
        writes["series"] = series_mod.text(list(patches))
    removes = [stale.name for stale in listed.paths if stale.name not in patches]
    head = Git(layout.sglang).rev(f"refs/heads/{BRANCH}")
    # From the record's appearing to the series written: a signal in between
    # would leave a record that no command of this run finishes.
    with deferred():
        _record_plan(layout, writes, removes, head)
        finish_export(layout, fresh=True)
    note(f"exported {len(patches)} patch(es) to {layout.patches}")
    return list(patches)


# The export being written: its new files and what it does, in the build folder;
# _FAILED in it, once a fault stopped it half-way, says which.
PENDING = ".export-pending"
_PLAN = "plan.json"
_FAILED = "failed"


def _record_plan(layout: Layout, writes: dict[str, bytes], removes: list[str], head) -> None:
    """Record the whole export in ``build/<base>/.export-pending`` before patches/
    changes: made aside and renamed, it is there complete or not at all."""
    work = new_dir(layout, NEW_EXPORT)
    try:
        (work / "files").mkdir()
        for name, data in writes.items():
            (work / "files" / name).write_bytes(data)
        plan = {"patches": str(layout.patches), "write": list(writes), "remove": removes}
        (work / _PLAN).write_text(json.dumps({**plan, "head": head}, indent=1) + "\n")
        work.rename(layout.build / PENDING)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def finish_export(layout: Layout, fresh: bool = False) -> str:
    """Carry out a recorded export (this run's, ``fresh``, or one a signal or a
    fault cut short): patches/ then holds the new series as a whole, and the
    tree's stamp says it was built from it. Signals wait until it is done; a kill
    leaves the record for the next command (any that takes the build lock) to
    finish. Returns how an earlier one ended ("was interrupted", "failed (...)"),
    '' when there was none.

    A fault (a read-only or full patches/) is one line: before patches/ changed,
    a fresh export is dropped (nothing was changed); after, the record stays, and
    says so, for the next command to finish."""
    pending = layout.build / PENDING
    try:
        plan = json.loads((pending / _PLAN).read_text())
    except (OSError, ValueError):
        return ""
    how = _how_it_ended(pending)
    directory = Path(plan["patches"])
    changed = []
    try:
        with deferred():
            directory.mkdir(parents=True, exist_ok=True)
            for name in plan["write"]:
                temporary = directory / f".{name}.sglpatch-new"
                shutil.copyfile(pending / "files" / name, temporary)
                os.replace(temporary, directory / name)
                changed.append(name)
                if name != "series":
                    note(f"wrote {name}")
            for name in plan["remove"]:
                if (directory / name).exists():
                    (directory / name).unlink()
                    changed.append(name)
                    note(f"removed {name} (its commit is gone from {layout.sglang})")
            if directory == layout.patches:
                _restamp(layout, plan["head"])
            discard(layout, pending)
    except OSError as exc:
        raise _export_fault(layout, directory, exc, fresh and not changed) from None
    return how


def _how_it_ended(pending: Path) -> str:
    """How the export recorded in ``pending`` ended: a fault it met, or a signal."""
    try:
        return f"failed ({(pending / _FAILED).read_text().strip()})"
    except OSError:
        return "was interrupted"


def _export_fault(layout: Layout, directory: Path, exc: OSError, untouched: bool) -> UserError:
    """The one line of an export a fault stopped: nothing changed (the record is
    dropped), or not (the record stays, marked failed)."""
    what = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else str(exc)
    pending = layout.build / PENDING
    if untouched:
        discard(layout, pending)
        return UserError(
            f"cannot write the series to {directory}: {what}; nothing was changed there:"
            f" make {directory} writable for you (or free some space), then export again"
        )
    try:
        (pending / _FAILED).write_text(f"{what}\n")
    except OSError:
        pass
    return UserError(
        f"the export to {directory} stopped before it finished: {what}; its record stays in"
        f" {pending}: once {directory} can be written, the next sglpatch command"
        " (`make export`, `make apply` ...) finishes it"
    )


def _refuse_unfinished(layout: Layout, pin: Pin) -> None:
    """Refuse a tree with work export would not see: uncommitted, mid-rebase, off-branch."""
    git = open_build_tree(layout, pin)
    busy = git.busy()
    if busy:
        raise UserError(
            f"{layout.sglang} is in the middle of {busy.what}: {busy.advice()}, then export"
        )
    dirty = git.dirty_paths()
    if dirty:
        more = f" and {len(dirty) - 3} more" if len(dirty) > 3 else ""
        raise UserError(
            f"{layout.sglang} has uncommitted changes to {', '.join(dirty[:3])}{more}:"
            " commit them (`git commit`, or `git commit --amend` to fold them into the"
            " last patch) or `git stash` them, then export"
        )
    head = git.run("symbolic-ref", "-q", "HEAD", check=False).stdout.decode().strip()
    if head != f"refs/heads/{BRANCH}":
        where = f"branch {head.removeprefix('refs/heads/')}" if head else "a detached HEAD"
        raise UserError(
            f"{layout.sglang} is on {where}, not on {BRANCH}, which export reads: bring"
            f" the work onto {BRANCH} (`git switch {BRANCH}`, then `git cherry-pick` or"
            " `git reset`), then export"
        )


def _refuse_partial(layout: Layout, count: int) -> None:
    """Refuse to drop the patches that a failed apply never reached."""
    found = stamp_mod.read(layout.sglang)
    listed = len(series_mod.read_entries(layout.patches))
    if found is not None and not found.complete and count < listed:
        raise UserError(
            f"the last `make apply` stopped before the end of the series, and"
            f" {layout.sglang} has {count} of its {listed} patches: exporting would"
            " drop the others; `git am -3` them there first, or drop them from"
            " patches/series and apply again"
        )


def _restamp(layout: Layout, head: str | None) -> None:
    """Record that the build tree (``patched`` at ``head``) now is what the
    exported series builds."""
    old = stamp_mod.read(layout.sglang)
    if old is not None:
        pin = load_pin(layout.pin_file)
        patches = stamp_mod.patches_digest(pin, series_mod.load(layout.patches))
        stamp_mod.write(layout.sglang, Stamp(old.base, patches, head, True))


def check_patches(layout: Layout) -> None:
    """Raise CheckFailed listing each way patches/ differs from a fresh export."""
    problems = series_mod.problems(layout.patches)
    if not problems:
        require_current(layout)
        problems = _export_differences(layout)
    if problems:
        raise CheckFailed(f"{layout.patches} is out of date (fix: make apply export)", problems)
    table = layout.patches / findings_mod.FILE_NAME
    listed = tuple(entry.name for entry in series_mod.read_entries(layout.patches))
    stale = findings_mod.problems(findings_mod.load(table, load_pin(layout.pin_file)), listed)
    if stale:
        raise CheckFailed(f"{table} names patches the series lacks (fix: rename them)", stale)
    described = prdesc.problems(layout.patches)
    if described:
        raise CheckFailed(
            f"{layout.patches / prdesc.DIRECTORY} does not describe the series", described
        )
    note(f"{layout.patches} matches a fresh export of {layout.sglang}")


def _export_differences(layout: Layout) -> list[str]:
    """Differences between the committed patches and a fresh export."""
    fresh = render(layout)
    listed = [entry.name for entry in series_mod.read_entries(layout.patches)]
    problems = [f"{name}: no such commit in the build tree" for name in listed if name not in fresh]
    problems += [f"{name}: a fresh export adds it" for name in fresh if name not in listed]
    for name in (name for name in listed if name in fresh):
        if (layout.patches / name).read_bytes() != fresh[name]:
            problems.append(f"{name}: differs from a fresh export")
    if not problems and listed != list(fresh):
        problems.append("series order differs from the commits of the build tree")
    return problems
