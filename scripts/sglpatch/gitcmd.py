"""A thin git runner with a predictable environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sglpatch.errors import UserError

# Identity of every commit the tool makes in its own build trees.
TOOL_NAME = "sglpatch"
TOOL_EMAIL = "sglpatch@sglang.invalid"

# Variables that would point git at another repository than the one asked for.
_LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
)
# Settings that make output and commits independent of the caller's git config.
_ISOLATED_CONFIG = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.fileMode=true",
    "core.quotePath=false",
    "core.abbrev=12",
    "gc.auto=0",
    "advice.detachedHead=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
)


class GitError(UserError):
    """A git command failed; carries its combined output for callers to parse."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


class Git:
    """Runs git in one directory.

    ``isolated`` build trees ignore the system and global git config and commit
    with the tool's fixed identity; a user's checkout keeps the user's config.
    """

    def __init__(self, cwd: Path, *, isolated: bool = True) -> None:
        self.cwd = Path(cwd)
        self.isolated = isolated

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for a git child process."""
        env = {k: v for k, v in os.environ.items() if k not in _LOCATION_VARS}
        env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0")
        env.update(GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no")
        if self.isolated:
            env = {k: v for k, v in env.items() if not k.startswith("GIT_CONFIG")}
            env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, TZ="UTC")
            env.update(GIT_COMMITTER_NAME=TOOL_NAME, GIT_COMMITTER_EMAIL=TOOL_EMAIL)
        env.update(extra or {})
        return env

    def argv(self, args: tuple[str, ...]) -> list[str]:
        """The full command line for ``git args``."""
        options = [("-c", item) for item in _ISOLATED_CONFIG] if self.isolated else []
        return ["git", *(word for pair in options for word in pair), *args]

    def run(
        self,
        *args: str,
        check: bool = True,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git args``; raise GitError on failure when ``check``."""
        try:
            proc = subprocess.run(
                self.argv(args),
                cwd=self.cwd,
                input=input,
                env=self.env(env),
                capture_output=True,
            )
        except FileNotFoundError:
            raise UserError("git not found on PATH: install git and retry") from None
        if check and proc.returncode != 0:
            raise _failure(args, self.cwd, proc)
        return proc

    def out(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run ``git args`` and return its stdout, stripped."""
        return self.run(*args, env=env).stdout.decode("utf-8", "replace").strip()

    def ok(self, *args: str) -> bool:
        """True when ``git args`` exits 0."""
        return self.run(*args, check=False).returncode == 0

    def rev(self, name: str) -> str | None:
        """The object id ``name`` resolves to, or None."""
        proc = self.run("rev-parse", "-q", "--verify", name, check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None


def output_of(proc: subprocess.CompletedProcess[bytes]) -> str:
    """stdout and stderr of a finished git command as text."""
    return (proc.stdout + b"\n" + proc.stderr).decode("utf-8", "replace")


def _failure(
    args: tuple[str, ...], cwd: Path, proc: subprocess.CompletedProcess[bytes]
) -> GitError:
    """A GitError naming the command and git's last complaint."""
    text = output_of(proc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    complaints = [line for line in lines if line.startswith(("fatal:", "error:"))]
    reason = (complaints or lines or [f"exit status {proc.returncode}"])[-1]
    return GitError(f"git {' '.join(args[:2])} failed in {cwd}: {reason}", text)


@contextmanager
def scratch_worktree(git: Git, rev: str) -> Iterator[Git]:
    """A detached worktree of ``rev`` in a temporary folder, removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="sglpatch-worktree-"))
    work = scratch / "tree"
    try:
        git.run("worktree", "add", "--detach", str(work), rev)
        yield Git(work, isolated=git.isolated)
    finally:
        git.run("worktree", "remove", "--force", str(work), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        git.run("worktree", "prune", check=False)
