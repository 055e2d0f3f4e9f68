"""check-upstream: how each patch of the series fares on another release."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sglpatch import findings as findings_mod
from sglpatch import series as series_mod
from sglpatch.console import note
from sglpatch.errors import UserError
from sglpatch.findings import Match
from sglpatch.gitcmd import Git, output_of
from sglpatch.layout import Layout
from sglpatch.makevars import shown_path, spelled
from sglpatch.patchinfo import check_hunks, describe_failure
from sglpatch.pin import Pin, check_version, load_pin
from sglpatch.pipfetch import Wheel, WheelTarget, fetch, reuse
from sglpatch.upstream import (
    commit_wheel,
    fetch_pinned_wheel,
    init_from_wheel,
    wheel_target,
)

APPLIES = "applies cleanly"
MERGES = "applies with 3-way merge"
UPSTREAM = "already upstream"
CONFLICTS = "conflicts"
# Platforms tried after the pinned one, for releases built for other glibcs.
_MORE_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)


# What to do with a patch that no finding (patches/upstream.toml) speaks for,
# by how it applies: (action, what that result means).
ADVICE = {
    APPLIES: ("rebase", "applies as is"),
    MERGES: ("rebase", "applies with a 3-way merge"),
    UPSTREAM: ("drop", "the release has these very lines"),
    CONFLICTS: ("port", "rewrite it for the release's code"),
}
# The actions, in the order the report lists them, and what each asks of you.
ACTIONS = {
    "drop": "leave it out of the series for this release: upstream has it, an"
    " equivalent, or cannot reach what it fixes",
    "rebase": "keep it: it applies; `make apply` on the new pin, then `make export`",
    "port": "rewrite it for the release's code, then `make export`",
}


@dataclass(frozen=True)
class Verdict:
    """The result of one patch against a release tree."""

    patch: str
    result: str
    detail: str = ""


@dataclass(frozen=True)
class Advice:
    """What to do with one patch, and why."""

    action: str
    why: str


def advise(verdict: Verdict, found: Match | None) -> Advice:
    """A finding's action where one holds, else the action of the patch's result."""
    if found is not None:
        return Advice(found.action, found.describe())
    action, meaning = ADVICE[verdict.result]
    return Advice(action, f"{meaning}: {verdict.detail}" if verdict.detail else meaning)


def classify(tree: Path, patches: list[Path]) -> list[Verdict]:
    """Check ``patches`` in order against the clean git work tree ``tree``.

    A patch that applies is applied to the index and work tree, so later
    patches may build on it: pass a scratch tree. A 3-way merge is tried only
    when the repository holds the blobs the patch was made against.
    """
    git = Git(tree)
    return [_classify_one(git, path) for path in patches]


def _classify_one(git: Git, path: Path) -> Verdict:
    """The verdict of one patch; leaves the tree with the patch applied or not."""
    forward = git.run("apply", "--index", "--check", str(path), check=False)
    if forward.returncode == 0:
        git.run("apply", "--index", str(path))
        return Verdict(path.name, APPLIES)
    if git.ok("apply", "--index", "--reverse", "--check", str(path)):
        return Verdict(path.name, UPSTREAM)
    detail = describe_failure(path, output_of(forward) + check_hunks(git, path))
    before = git.out("write-tree")
    if git.run("apply", "--3way", str(path), check=False).returncode == 0:
        return Verdict(path.name, MERGES, f"as is: {detail}")
    git.run("read-tree", "--reset", "-u", before)
    return Verdict(path.name, CONFLICTS, detail)


def check_upstream(layout: Layout, version: str) -> str:
    """Fetch release ``version`` and return the markdown report of the series."""
    if not version:
        raise UserError(
            f"check-upstream needs the release to check: {spelled('VERSION', '--version', 'X.Y.Z')}"
            f" (e.g. {spelled('VERSION', '--version', '0.5.23')})"
        )
    check_version(version, spelled("VERSION", "--version", repr(version)))
    pin = load_pin(layout.pin_file)
    series = series_mod.load(layout.patches)
    table = layout.patches / findings_mod.FILE_NAME
    findings = findings_mod.load(table, pin)
    wheel = fetch_release(layout, pin, version)
    base = fetch_pinned_wheel(pin, layout.cache)
    with tempfile.TemporaryDirectory(prefix="sglpatch-upstream-") as scratch:
        tree = Path(scratch, "sglang")
        init_from_wheel(base.path, base.sha256, pin.version, pin.released, tree)
        git = Git(tree)
        commit_wheel(git, wheel.path, wheel.sha256, version, pin.released)
        findings_mod.check(findings, series.names, _reader(git, "HEAD~1"), table)
        blob = git.rev(f"HEAD:{pin.target}")
        release = _reader(git, "HEAD")
        verdicts = classify(tree, series.paths)
        advice = [advise(v, findings_mod.match(findings, v.patch, release)) for v in verdicts]
    return render(pin, version, wheel, blob, verdicts, advice, ported_series(layout, version))


def ported_series(layout: Layout, version: str) -> list[str]:
    """Where this project carries a series of its own for release ``version``
    (another base of ``patches/bases.toml`` pinned to it): the port to use."""
    pin = load_pin(layout.pin_file)
    found = []
    for other in Layout.every_base(layout.build.parent):
        other_pin = load_pin(other.pin_file)
        if other.name != layout.name and other_pin.version == version:
            count = len(series_mod.load(other.patches))
            where = shown_path(other.patches)
            found.append(
                f"the series on {pin.tag} is ported to {other_pin.tag} in {where}/ ({count}"
                f" patch(es)): use `make apply BASE={other.name}`"
            )
    return found


def _reader(git: Git, commit: str) -> findings_mod.Reader:
    """Reads files of ``commit`` (never the work tree, which patches change)."""

    def read(path: str) -> str | None:
        proc = git.run("show", f"{commit}:{path}", check=False)
        return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None

    return read


def release_target(pin: Pin) -> WheelTarget:
    """The wheels check-upstream asks pip for: the pinned one's kind first."""
    return wheel_target(pin.wheel, *_MORE_PLATFORMS)


def fetch_release(layout: Layout, pin: Pin, version: str) -> Wheel:
    """The wheel of sglang ``version``: a base's cached pinned wheel of that
    version (checked against its pin's sha256), else one from the index into
    ``<cache>/upstream`` (checked against the index's sha256)."""
    wheel = cached_release(layout, version)
    if wheel is None:
        wheel = fetch([f"sglang=={version}"], release_target(pin), layout.cache / "upstream")[0]
    note(f"{wheel.path.name}: sha256 {wheel.sha256} ({wheel.verified_by})")
    return wheel


def cached_release(layout: Layout, version: str) -> Wheel | None:
    """The pinned wheel of a base pinned to ``version`` (this one or another of
    ``patches/bases.toml``), where that base's cache holds it and its sha256 is
    the pin's; a cached file that fails is moved aside (``pipfetch.reuse``)."""
    for other in Layout.every_base(layout.build.parent):
        other = layout if other.name == layout.name else other
        other_pin = load_pin(other.pin_file)
        if other_pin.version != version:
            continue
        path = other.cache / other_pin.wheel
        source = f"wheel_sha256 in {shown_path(other.pin_file)}"
        wheel = reuse(f"sglang=={version}", path, other_pin.wheel_sha256, source)
        if wheel is not None:
            note(f"reusing {shown_path(path)} (base {other.name}'s pinned wheel; {source})")
            return wheel
    return None


def render(
    pin: Pin,
    version: str,
    wheel: Wheel,
    blob: str | None,
    verdicts: list[Verdict],
    advice: list[Advice],
    ported: Sequence[str] = (),
) -> str:
    """The report as a markdown section: one table row per patch, then what to do
    (``ported``: the project's own series for that release, which replaces it)."""
    same = "unchanged" if blob == pin.target_blob else "changed"
    checked = {"index": "matches the index", "pin": "matches a base's pinned wheel_sha256"}
    checked = checked.get(wheel.verified_by, "computed")
    lines = [
        f"## sglang {version} vs the series on {pin.tag} ({len(verdicts)} patch(es))",
        "",
        f"- wheel: `{wheel.path.name}`, sha256 `{wheel.sha256}` ({checked})",
        f"- `{pin.target}`: blob `{blob or 'missing'}`, {same} since {pin.tag}",
        *(f"- **port**: {line}" for line in ported),
        "",
        "| # | patch | result | what to do | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for number, (verdict, todo) in enumerate(zip(verdicts, advice, strict=True), 1):
        cells = (str(number), f"`{verdict.patch}`", verdict.result, f"**{todo.action}**", todo.why)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if not verdicts:
        lines.append("| - | (the series is empty) | - | - | - |")
    results = (APPLIES, MERGES, UPSTREAM, CONFLICTS)
    counts = {r: sum(v.result == r for v in verdicts) for r in results}
    lines += ["", ", ".join(f"{n} {r}" for r, n in counts.items())]
    lines += _next_steps(version, advice)
    if ported:
        lines += ["", f"Rather than redo that: {'; '.join(ported)}."]
    return "\n".join(lines)


def _next_steps(version: str, advice: list[Advice]) -> list[str]:
    """``What to do for X: drop 2 (#1, #2), port 1 (#3)`` and what each action means."""
    numbers = {
        action: [f"#{n}" for n, todo in enumerate(advice, 1) if todo.action == action]
        for action in ACTIONS
    }
    todo = [f"{a} {len(ns)} ({', '.join(ns)})" for a, ns in numbers.items() if ns]
    if not todo:
        return []
    meanings = [f"- {a}: {ACTIONS[a]}" for a, ns in numbers.items() if ns]
    return ["", f"What to do for {version}: {', '.join(todo)}.", "", *meanings]
