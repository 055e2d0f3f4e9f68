"""Helpers of the sglpatch tests: run the tool and git, workspaces, snapshots."""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from sglpatch.digest import sha256_file  # noqa: E402
from sglpatch.layout import Layout  # noqa: E402
from sglpatch.pin import load_pin  # noqa: E402
from sglpatch.pipfetch import Wheel  # noqa: E402

# The base most tests use, v0.5.12 (the seeds' series; the default base is
# v0.5.23, patches/bases.toml), and the second one.
DEFAULT = Layout.create(ROOT / "build", ROOT / "patches" / "v0.5.12", base="v0.5.12")
PIN = load_pin(DEFAULT.pin_file)
TARGET = PIN.target
# The base commit made from the pinned wheel: the same on every machine.
BASE_COMMIT = "77d0a340eeba395927313aec72d46121ed15c978"
SECOND = Layout.create(ROOT / "build", ROOT / "patches" / "v0.5.23", base="v0.5.23")
PIN_23 = load_pin(SECOND.pin_file)


def _default_signals() -> None:
    """In a child, before exec: SIGINT, SIGTERM and SIGHUP back to their defaults."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def run(argv: list[str], cwd: Path | None = None, env: dict | None = None, preexec=None):
    """Run a command; return the completed process (text)."""
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, preexec_fn=preexec
    )


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout, stripped; fail loudly."""
    proc = run(["git", *args], cwd=cwd)
    assert proc.returncode == 0, f"git {args}: {proc.stderr}"
    return proc.stdout.strip()


@dataclass
class Workspace:
    """A build root with a warm cache for one base (``base``, v0.5.12 unless
    given) and a patch dir holding that base's pin."""

    root: Path
    base: str = DEFAULT.name

    @classmethod
    def create(cls, root: Path, wheel: Path, base: Layout = DEFAULT) -> Workspace:
        """A workspace under ``root`` whose cache already holds ``wheel``."""
        space = cls(root, base.name)
        (space.build / "cache").mkdir(parents=True)
        link_or_copy(wheel, space.build / "cache" / wheel.name)
        space.patches.mkdir()
        shutil.copyfile(base.pin_file, space.patches / "base.toml")
        return space

    @property
    def build_root(self) -> Path:
        """What ``--build`` names: the base's trees are in ``<build_root>/<base>``."""
        return self.root / "build"

    @property
    def build(self) -> Path:
        """The base's build folder (cache, lock, trees)."""
        return self.build_root / self.base

    @property
    def patches(self) -> Path:
        return self.root / "patches"

    @property
    def tree(self) -> Path:
        return self.build / "sglang"

    def tool(
        self, *args: str, env: dict | None = None, preexec=None
    ) -> subprocess.CompletedProcess:
        """Run ``python3 -m sglpatch`` on this workspace (``preexec`` in the child)."""
        argv = [sys.executable, "-m", "sglpatch", *self.options()]
        full_env = {**os.environ, **(env or {})}
        argv += args
        return run(argv, cwd=ROOT, env=full_env, preexec=preexec)

    def start(self, *args: str, env: dict | None = None) -> Running:
        """Start ``python3 -m sglpatch`` in a session of its own (to signal it),
        with the default action for the signals the tests send, whatever the
        test runner ignores (nohup, a background job): the tool keeps a
        disposition it inherits as ignored, as nohup expects."""
        argv = [sys.executable, "-m", "sglpatch", *self.options(), *args]
        log = self.root / f"run-{time.monotonic_ns()}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**os.environ, **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_default_signals,
            )
        return Running(proc, log)

    def options(self) -> list[str]:
        """The tool's options that select this workspace and its base."""
        root, patches = str(self.build_root), str(self.patches)
        return ["--build", root, "--base", self.base, "--patches", patches]

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


def drop_root_powers() -> None:
    """In a child: make root obey file modes as other users do (drop CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH and CAP_FOWNER from the bounding set before exec)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2, 3):
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def limit_file_size(limit: int):
    """A preexec function: files the child writes stop at ``limit`` bytes (EFBIG),
    which stands in for a full disk."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``sglpatch: error:`` line of a refused command."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("sglpatch: error:")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0]


@dataclass
class Running:
    """The tool running in the background; its output goes to ``log``."""

    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = 120) -> int:
        return self.proc.wait(timeout)

    def signal(self, signum: int, group: bool = False) -> None:
        """Send ``signum`` to the tool alone, or to its whole process group (as a
        terminal's Ctrl-C does, or a kill of the job)."""
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)


def wait_until(predicate, timeout: float = 60, what: str = "condition") -> None:
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@dataclass
class Gate:
    """A point where a run stops until released: a git hook, or a ``git`` shim on
    PATH, that waits once ``armed`` (on its ``count``-th call) for ``go``."""

    folder: Path

    @classmethod
    def create(cls, folder: Path) -> Gate:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder)

    def script(self, then: str = "exit 0") -> str:
        """A shell script that waits at the gate when armed, then runs ``then``."""
        gate = self.folder
        return f"""#!/bin/sh
if [ -e '{gate}/armed' ]; then
    n=$(cat '{gate}/armed')
    if [ "$n" -gt 1 ]; then
        echo $((n - 1)) > '{gate}/armed'
    else
        rm -f '{gate}/armed'
        : > '{gate}/inside'
        i=0
        while [ ! -e '{gate}/go' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
    fi
fi
{then}
"""

    def hook(self, repo: Path, name: str) -> None:
        """Install the gate as hook ``name`` of ``repo`` (hooks of all its worktrees)."""
        hooks = Path(git(repo, "rev-parse", "--git-common-dir"))
        hooks = (hooks if hooks.is_absolute() else repo / hooks) / "hooks"
        hooks.mkdir(exist_ok=True)
        (hooks / name).write_text(self.script())
        (hooks / name).chmod(0o755)

    def git_shim(self, pattern: str, before: str = "") -> dict:
        """An environment whose ``git`` waits at the gate before a call whose
        arguments contain the word ``pattern``; when armed, the shell command
        ``before`` runs first (in git's folder): a moment of git's own to stop in."""
        real = shutil.which("git")
        wait = self.script(then=":").removeprefix("#!/bin/sh\n")
        first = f"[ -e '{self.folder}/armed' ] && {{ {before}; }}\n" if before else ""
        shim = self.folder / "bin" / "git"
        shim.parent.mkdir(exist_ok=True)
        shim.write_text(
            f'#!/bin/sh\ncase " $* " in *" {pattern} "*)\n{first}{wait};;\nesac\nexec {real} "$@"\n'
        )
        shim.chmod(0o755)
        return {"PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}

    def arm(self, count: int = 1) -> None:
        (self.folder / "armed").write_text(f"{count}\n")
        (self.folder / "go").unlink(missing_ok=True)
        (self.folder / "inside").unlink(missing_ok=True)

    def wait_inside(self, running: Running | None = None, timeout: float = 60) -> None:
        def inside() -> bool:
            if running is not None and running.proc.poll() is not None:
                raise AssertionError(f"the run ended before the gate: {running.output()}")
            return (self.folder / "inside").exists()

        wait_until(inside, timeout, "the run to reach the gate")

    def release(self) -> None:
        (self.folder / "go").write_text("")


def interrupt(running: Running, signum: int) -> None:
    """Stop a run as a user would: Ctrl-C and SIGKILL hit the whole job, SIGTERM and
    SIGHUP the tool alone (``kill PID``, a closed terminal)."""
    running.signal(signum, group=signum in (signal.SIGINT, signal.SIGKILL))


def demo_wheel(directory: Path) -> Wheel:
    """A minimal pure-Python wheel that pip installs offline."""
    path = directory / "demo_pkg-1.0-py3-none-any.whl"
    info = "demo_pkg-1.0.dist-info"
    files = {
        "demo_pkg/__init__.py": "VALUE = 7\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), text)
    return Wheel("demo-pkg==1.0", path, sha256_file(path), "index")
