"""A thin git runner with a predictable environment, confined to one repository."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from sglpatch.errors import UserError, file_size_limit

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
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
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
# Operations a work tree can be in the middle of: marker in the git dir ->
# (what, the command that continues or aborts it). rebase-apply/applying: git am;
# rebase-apply alone: a git am (or rebase) stopped before it wrote which it is.
_BUSY_MARKERS = {
    "rebase-merge": ("a rebase", "git rebase"),
    "rebase-apply/applying": ("a git am", "git am"),
    "rebase-apply/rebasing": ("a rebase", "git rebase"),
    "rebase-apply": ("a git am or rebase", "git am"),
    "MERGE_HEAD": ("a merge", "git merge"),
    "CHERRY_PICK_HEAD": ("a cherry-pick", "git cherry-pick"),
    "REVERT_HEAD": ("a revert", "git revert"),
}
# Lock files of a git dir that a git killed by a signal leaves behind.
_LOCK_NAMES = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock")
# Seconds a git child may take to clean up (its lock files) after SIGTERM.
_TERM_GRACE = 5.0
SCRATCH_PREFIX = "sglpatch-worktree-"


class Busy(NamedTuple):
    """An operation a work tree is in the middle of."""

    what: str
    command: str
    # The marker found in the git dir (a key of _BUSY_MARKERS).
    marker: str = ""

    def advice(self) -> str:
        """How to get out of it."""
        return f"finish it (`{self.command} --continue`) or abort it (`{self.command} --abort`)"


class GitError(UserError):
    """A git command failed; carries its combined output for callers to parse."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


class Git:
    """Runs git in one repository: the one whose top level is ``cwd``.

    Discovery stops at ``cwd`` (GIT_CEILING_DIRECTORIES is its parent), so a
    directory that lost its ``.git`` is an error, never the enclosing repository.
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
        # A query (git status) does not write the index it refreshes: a read-only
        # run writes nothing (and needs no room under a file size limit).
        env.update(GIT_OPTIONAL_LOCKS="0")
        env.update(GIT_CEILING_DIRECTORIES=str(Path(os.path.abspath(self.cwd)).parent))
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
        shielded: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git args``; raise GitError on failure when ``check``. A ``shielded``
        git runs in a process group of its own: a Ctrl-C of the job does not stop
        it half-way (hold the signals meanwhile: ``interrupt.deferred``)."""
        if not self.cwd.is_dir():
            raise UserError(f"git {' '.join(args[:2])}: {self.cwd} is not a directory")
        if shutil.which("git", path=os.environ.get("PATH", os.defpath)) is None:
            raise UserError("git not found on PATH: install git and retry")
        before = self._lock_files()
        proc = run_child(self.argv(args), self.cwd, self.env(env), input, shielded)
        if proc.returncode < 0:  # killed: its lock files are left, and are its own
            for lock in self._lock_files() - before:
                lock.unlink(missing_ok=True)
        if check and proc.returncode != 0:
            raise _failure(args, self.cwd, proc)
        return proc

    def _lock_files(self) -> set[Path]:
        """The lock files git makes in this repository's git dir that exist now."""
        git_dir = self.cwd / ".git"
        if git_dir.is_file():  # a worktree: "gitdir: PATH"
            text = git_dir.read_text(errors="replace").removeprefix("gitdir:").strip()
            git_dir = (self.cwd / text) if text else git_dir
        if not git_dir.is_dir():
            return set()
        return {git_dir / name for name in _LOCK_NAMES if (git_dir / name).exists()}

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

    def git_dir(self) -> Path:
        """The absolute git directory of this repository (of this worktree)."""
        return Path(self.out("rev-parse", "--absolute-git-dir"))

    def busy(self) -> Busy | None:
        """The operation the work tree is in the middle of (a rebase ...), or None."""
        git_dir = self.git_dir()
        for marker, (what, command) in _BUSY_MARKERS.items():
            if (git_dir / marker).exists():
                return Busy(what, command, marker)
        return None

    def dirty_paths(self) -> list[str]:
        """Tracked files with uncommitted changes (staged or not), renames split."""
        out = self.run("status", "--porcelain", "-z", "--untracked-files=no", "--no-renames")
        return [entry[3:] for entry in out.stdout.decode("utf-8", "replace").split("\0") if entry]


def run_child(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    input: bytes | None = None,
    shielded: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run a command to completion; on an interrupt, SIGTERM it and let it clean up.

    git removes its lock files on SIGTERM; only one that outlives the grace
    period is killed.
    """
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0 if shielded else None,
        # SIGXFSZ stays ignored, as Python has it: a write past the file size limit
        # fails (EFBIG) and git cleans up its lock files, instead of dying.
        preexec_fn=_ignore_file_size_signal,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(input)
        except BaseException:
            _stop(proc)
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _ignore_file_size_signal() -> None:
    """In the child, before exec: SIGXFSZ ignored (subprocess resets it)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM ``proc``, then SIGKILL it if it is still there after the grace period."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(_TERM_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()


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
    if proc.returncode < 0:
        status = f"killed by {signal.Signals(-proc.returncode).name}"
    else:
        status = f"exit status {proc.returncode}"
    reason = (complaints or lines or [status])[-1]
    too_large = -proc.returncode == signal.SIGXFSZ or "File too large" in text
    if too_large and file_size_limit():
        reason += f"; {file_size_limit()}: raise it (or free some space) and run again"
    return GitError(f"git {' '.join(args[:2])} failed in {cwd}: {reason}", text)


@contextmanager
def scratch_worktree(git: Git, rev: str) -> Iterator[Git]:
    """A detached worktree of ``rev`` in a temporary folder, removed afterwards.

    The folder holds a lock while in use; scratch worktrees of ``git`` whose
    lock nobody holds (their run was killed) are removed first.
    """
    remove_dead_scratch_worktrees(git)
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    work = scratch / "tree"
    try:
        with (scratch / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            git.run("worktree", "add", "--detach", str(work), rev)
            yield Git(work, isolated=git.isolated)
    finally:
        _remove_worktree(git, scratch)


def remove_dead_scratch_worktrees(git: Git) -> list[Path]:
    """Remove this tool's scratch worktrees of ``git`` left by killed runs."""
    listing = git.out("worktree", "list", "--porcelain")
    paths = [Path(line[len("worktree ") :]) for line in listing.splitlines()]
    removed = []
    for path in paths:
        scratch = path.parent
        if path.name == "tree" and scratch.name.startswith(SCRATCH_PREFIX) and _dead(scratch):
            _remove_worktree(git, scratch)
            removed.append(scratch)
    git.run("worktree", "prune", check=False)
    return removed


def _dead(scratch: Path) -> bool:
    """True when no live run holds the lock of a scratch folder."""
    try:
        with (scratch / "lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _remove_worktree(git: Git, scratch: Path) -> None:
    """Unregister and delete the scratch worktree in ``scratch``."""
    git.run("worktree", "remove", "--force", "--force", str(scratch / "tree"), check=False)
    shutil.rmtree(scratch, ignore_errors=True)
    git.run("worktree", "prune", check=False)
