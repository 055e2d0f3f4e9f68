"""Per-patch trees: the base plus the first k patches of the series, k = 1..n.

Every patch in the series changes one file (``target`` in the pin), so a step
tree is the base tree with that file as of patch k. ``prepare`` asks sglpatch
for the patches' commits in the build tree and writes the file at each into
``Layout.ladder`` (needs git); ``trees`` builds the step trees from those files
and the base tree without git, so a GPU host needs only the bundle and the
ladder directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sglpatch import prdesc
from sglpatch.errors import UserError
from sglpatch.gitcmd import Git
from sglpatch.layout import Layout
from sglpatch.pin import load_pin
from sglpatch.queue import patch_commits


def prepare(layout: Layout) -> Path:
    """Write <ladder>/NN.py (the target at patch NN) and index.json."""
    pin = load_pin(layout.pin_file)
    commits = patch_commits(layout)
    git, ladder = Git(layout.sglang), layout.ladder
    for commit, subject in commits:
        touched = git.out("diff-tree", "--no-commit-id", "--name-only", "-r", commit).split()
        if touched != [pin.target]:
            raise UserError(
                f"--ladder swaps only {pin.target} per step, but {subject!r} changes"
                f" {', '.join(touched)}: measure this series without --ladder"
            )
    shutil.rmtree(ladder, ignore_errors=True)
    ladder.mkdir(parents=True)
    steps = []
    for number, (commit, subject) in enumerate(commits, 1):
        name = f"{number:02d}"
        (ladder / f"{name}.py").write_bytes(git.run("show", f"{commit}:{pin.target}").stdout)
        steps.append({"name": name, "subject": subject})
    (ladder / "index.json").write_text(json.dumps({"target": pin.target, "steps": steps}, indent=1))
    return ladder


def ensure(layout: Layout) -> Path:
    """The ladder, rewritten wherever the series' commits are at hand (so it never
    lags patches/); a GPU host without them uses the one copied beside the bundle."""
    if (layout.sglang / ".git").exists():
        return prepare(layout)
    if not (layout.ladder / "index.json").exists():
        raise UserError(
            f"the ladder needs the commits in {layout.sglang} (`make apply`) or a "
            f"{layout.ladder} written where they are (`make bench BENCH_ARGS=--ladder`)"
        )
    return layout.ladder


def trees(layout: Layout, base_tree: Path) -> list[tuple[str, Path]]:
    """[(label, python root)] for base + 1 .. base + n, built from the ladder."""
    ladder = layout.ladder
    index = json.loads((ladder / "index.json").read_text())
    target = Path(index["target"]).relative_to("python")
    out = []
    for step in index["steps"]:
        root = ladder / "trees" / step["name"] / "python"
        if not root.exists():
            shutil.copytree(base_tree, root, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copyfile(ladder / f"{step['name']}.py", root / target)
        out.append((f"+{step['name']} {step['subject']}", root))
    return out


def without_last(layout: Layout, patched_tree: Path) -> Path:
    """``--without-last``: the patched tree less the series' last pull request
    (the patches the last of ``patches/<base>/prs/`` lists; the last patch
    where the base keeps none), at ``<build>/<base>/without-last-tree/python``:
    the patched tree with the files those patches change as they were before
    them and the ones they add left out. What to restore is written to
    ``<build>/<base>/without-last`` from the build tree's commits where they
    are at hand (needs git); a GPU host without them uses that folder copied
    beside the bundle (as the ladder's)."""
    material = layout.build / "without-last"
    if (layout.sglang / ".git").exists():
        _prepare_without_last(layout, material)
    elif not (material / "index.json").is_file():
        raise UserError(
            f"--without-last needs the commits in {layout.sglang} (`make apply`) or a"
            f" {material} written where they are"
        )
    index = json.loads((material / "index.json").read_text())
    root = layout.build / "without-last-tree" / "python"
    shutil.rmtree(root.parent, ignore_errors=True)
    shutil.copytree(patched_tree, root, ignore=shutil.ignore_patterns("__pycache__"))
    for path in index["remove"]:
        (root / path).unlink()
    for path in index["restore"]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)  # a folder it removed
        shutil.copyfile(material / "before" / path, root / path)
    return root


def _prepare_without_last(layout: Layout, material: Path) -> None:
    """Write ``material``/index.json (the left-out patches' subjects, the
    package files to restore and to remove, relative to ``python/``) and
    ``before/<file>`` for each file to restore, as it was before those
    patches."""
    commits = patch_commits(layout)
    if not commits:
        raise UserError(f"{layout.name}'s series has no patch to leave out")
    count = len(prdesc.last_request(layout.patches)) or 1
    if count > len(commits):
        raise UserError(
            f"the last pull request of {layout.patches} lists {count} patches;"
            f" {layout.sglang} has {len(commits)}: run `make apply`"
        )
    left_out, git = commits[-count:], Git(layout.sglang)
    before = f"{left_out[0][0]}~1"
    changed = git.out("diff", "--no-renames", "--name-status", before, left_out[-1][0])
    shutil.rmtree(material, ignore_errors=True)
    restore, remove = [], []
    for line in changed.splitlines():
        status, path = line.split("\t", 1)
        if not path.startswith("python/"):
            continue  # outside the package (the patches' tests)
        relative = str(Path(path).relative_to("python"))
        if status == "A":
            remove.append(relative)
            continue
        target = material / "before" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git.run("show", f"{before}:{path}").stdout)
        restore.append(relative)
    index = {"patches": [subject for _, subject in left_out], "restore": restore, "remove": remove}
    (material / "index.json").write_text(json.dumps(index, indent=1))
