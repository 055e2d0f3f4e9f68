"""Helpers of the sglpatch tests: run the tool and git, workspaces, snapshots."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from sglpatch.pin import load_pin  # noqa: E402

PIN = load_pin(ROOT / "patches" / "base.toml")
TARGET = PIN.target
# The base commit made from the pinned wheel: the same on every machine.
BASE_COMMIT = "77d0a340eeba395927313aec72d46121ed15c978"


def run(argv: list[str], cwd: Path | None = None, env: dict | None = None):
    """Run a command; return the completed process (text)."""
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout, stripped; fail loudly."""
    proc = run(["git", *args], cwd=cwd)
    assert proc.returncode == 0, f"git {args}: {proc.stderr}"
    return proc.stdout.strip()


@dataclass
class Workspace:
    """A build dir with a warm cache and a patch dir holding the pin."""

    root: Path

    @classmethod
    def create(cls, root: Path, wheel: Path) -> Workspace:
        """A workspace under ``root`` whose cache already holds ``wheel``."""
        space = cls(root)
        (space.build / "cache").mkdir(parents=True)
        link_or_copy(wheel, space.build / "cache" / wheel.name)
        space.patches.mkdir()
        shutil.copyfile(PIN.path, space.patches / "base.toml")
        return space

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    @property
    def tree(self) -> Path:
        return self.build / "sglang"

    def tool(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """Run ``python3 -m sglpatch`` on this workspace."""
        argv = [sys.executable, "-m", "sglpatch", "--build", str(self.build)]
        full_env = {**os.environ, **(env or {})}
        return run([*argv, "--patches", str(self.patches), *args], cwd=ROOT, env=full_env)

    def ok(self, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """Run the tool and require success."""
        proc = self.tool(*args, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc

    def use_patches(self, source: Path, names: list[str] | None = None) -> list[str]:
        """Copy patches from ``source`` and list them (all, sorted, by default)."""
        names = names or sorted(p.name for p in source.glob("*.patch"))
        for name in names:
            shutil.copyfile(source / name, self.patches / name)
        write_series(self.patches, names)
        return names

    def head(self) -> str:
        return git(self.tree, "rev-parse", "HEAD")


def link_or_copy(source: Path, dest: Path) -> None:
    """Hard-link ``source`` to ``dest``, copying across file systems."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def write_series(directory: Path, names: list[str]) -> None:
    """A series file listing ``names``."""
    (directory / "series").write_text("# test series\n\n" + "".join(n + "\n" for n in names))


def commit_all(tree: Path, author: str, subject: str, date: str) -> None:
    """Commit everything in ``tree`` as ``author`` at ``date``."""
    name, email = author.split(" <")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email.rstrip(">"),
        "GIT_AUTHOR_DATE": date,
    }
    proc = run(["git", "add", "-A"], cwd=tree, env=env)
    proc = run(["git", "commit", "-q", "-m", subject], cwd=tree, env=env)
    assert proc.returncode == 0, proc.stderr


def edit_target(tree: Path, old: str, new: str) -> None:
    """Replace the first ``old`` by ``new`` in the target file of ``tree``."""
    path = tree / TARGET
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def snapshot(repo: Path) -> dict:
    """Everything a refused command must leave unchanged in a checkout."""
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": run(["git", "symbolic-ref", "-q", "HEAD"], cwd=repo).stdout.strip(),
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git(repo, "status", "--porcelain"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "am": (git_dir / "rebase-apply").exists(),
    }


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``sglpatch: error:`` line of a refused command."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("sglpatch: error:")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0]
