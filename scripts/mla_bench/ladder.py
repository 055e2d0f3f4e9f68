"""Per-patch trees: the base plus the first k patches of the series, k = 1..n.

Every patch in the series changes one file (``target`` in patches/base.toml),
so a step tree is the base tree with that file as of patch k. ``prepare`` reads
the file at each commit above the base tag of ``build/sglang`` into
``build/ladder/`` (needs git); ``trees`` builds the step trees from those files
and the base tree without git, so a GPU host needs only the bundle and
``build/ladder``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from sglpatch.pin import load_pin

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def prepare(build: Path) -> Path:
    """Write build/ladder/NN.py (the target at patch NN) and index.json."""
    pin = load_pin(ROOT / "patches" / "base.toml")
    repo, ladder = build / "sglang", build / "ladder"
    commits = _git(repo, "rev-list", "--reverse", f"{pin.base_tag}..patched").split()
    shutil.rmtree(ladder, ignore_errors=True)
    ladder.mkdir(parents=True)
    steps = []
    for number, sha in enumerate(commits, 1):
        name = f"{number:02d}"
        (ladder / f"{name}.py").write_text(_git(repo, "show", f"{sha}:{pin.target}"))
        steps.append({"name": name, "subject": _git(repo, "log", "-1", "--format=%s", sha).strip()})
    (ladder / "index.json").write_text(json.dumps({"target": pin.target, "steps": steps}, indent=1))
    return ladder


def trees(build: Path, base_tree: Path) -> list[tuple[str, Path]]:
    """[(label, python root)] for base + 1 .. base + n, built from build/ladder."""
    ladder = build / "ladder"
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
