"""check-upstream: how each patch of the series fares on another release."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from sglpatch import series as series_mod
from sglpatch.console import note
from sglpatch.gitcmd import Git, output_of
from sglpatch.layout import Layout
from sglpatch.patchinfo import check_hunks, describe_failure
from sglpatch.pin import Pin, check_version, load_pin
from sglpatch.pipfetch import Wheel, WheelTarget, fetch
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


@dataclass(frozen=True)
class Verdict:
    """The result of one patch against a release tree."""

    patch: str
    result: str
    detail: str = ""


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
    check_version(version)
    pin = load_pin(layout.pin_file)
    series = series_mod.load(layout.patches)
    wheel = fetch_release(pin, version, layout.cache)
    base = fetch_pinned_wheel(pin, layout.cache)
    with tempfile.TemporaryDirectory(prefix="sglpatch-upstream-") as scratch:
        tree = Path(scratch, "sglang")
        init_from_wheel(base.path, base.sha256, pin.version, pin.released, tree)
        git = Git(tree)
        commit_wheel(git, wheel.path, wheel.sha256, version, pin.released)
        blob = git.rev(f"HEAD:{pin.target}")
        verdicts = classify(tree, series.paths)
    return render(pin, version, wheel, blob, verdicts)


def release_target(pin: Pin) -> WheelTarget:
    """The wheels check-upstream asks pip for: the pinned one's kind first."""
    return wheel_target(pin.wheel, *_MORE_PLATFORMS)


def fetch_release(pin: Pin, version: str, cache: Path) -> Wheel:
    """The wheel of sglang ``version``, checked against the index's sha256."""
    wheel = fetch([f"sglang=={version}"], release_target(pin), cache / "upstream")[0]
    note(f"{wheel.path.name}: sha256 {wheel.sha256} ({wheel.verified_by})")
    return wheel


def render(pin: Pin, version: str, wheel: Wheel, blob: str | None, verdicts: list[Verdict]) -> str:
    """The report as a markdown section with one table row per patch."""
    same = "unchanged" if blob == pin.target_blob else "changed"
    checked = "matches the index" if wheel.verified_by == "index" else "computed"
    lines = [
        f"## sglang {version} vs the series on {pin.tag} ({len(verdicts)} patch(es))",
        "",
        f"- wheel: `{wheel.path.name}`, sha256 `{wheel.sha256}` ({checked})",
        f"- `{pin.target}`: blob `{blob or 'missing'}`, {same} since {pin.tag}",
        "",
        "| # | patch | result | detail |",
        "| --- | --- | --- | --- |",
    ]
    for number, verdict in enumerate(verdicts, 1):
        cells = (str(number), f"`{verdict.patch}`", verdict.result, verdict.detail)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if not verdicts:
        lines.append("| - | (the series is empty) | - | - |")
    results = (APPLIES, MERGES, UPSTREAM, CONFLICTS)
    counts = {r: sum(v.result == r for v in verdicts) for r in results}
    lines += ["", ", ".join(f"{n} {r}" for r, n in counts.items())]
    return "\n".join(lines)
