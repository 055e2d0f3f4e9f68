"""One SGLang tree per process: the child's entry point and the parent's launcher.

Every child (``mla_harness.probe``, ``.consumer``, ``.rebuild_check``,
``mla_bench.worker``) takes ``--tree DIR`` (a ``python/`` root holding
``sglang``) and ``--device``; ``enter`` installs the replacements that must
come before the import and puts the tree first on ``sys.path``. ``run`` starts
a child from the parent (a fresh interpreter, or after ``use_forkservers`` a
fork of its tree's ``forkserver``); ``exchange`` also hands it a JSON input
file and returns what it wrote to ``--out``; ``run_json`` returns a child's
last line as JSON or its error. Every command-line entry point of the
harness and the benchmark reports a ``UserError`` (sglpatch's, the project's one
error type) as one line, ``PROG: error: ...``, and its exit code (``report_errors``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from sglpatch.errors import UserError

from . import forkserver, subprocess_env


def parser(doc: str, device: str = "cpu") -> argparse.ArgumentParser:
    """A child's argument parser: ``--tree`` and ``--device`` (default ``device``)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--tree", required=True, type=Path, help="python/ root holding sglang")
    p.add_argument("--device", default=device, choices=("cpu", "cuda"))
    return p


def enter(args: argparse.Namespace) -> None:
    """Make ``args.tree``'s sglang the one imported (before anything imports it)."""
    from . import replacements

    if not (args.tree / "sglang" / "__init__.py").is_file():
        raise UserError(f"no sglang package in {args.tree} (a python/ root of `make apply`)")
    replacements.prepare_environment(args.device == "cuda")
    sys.path.insert(0, str(args.tree.resolve()))


def run(
    module: str,
    tree: Path,
    device: str,
    *args: str,
    timeout: float | None = None,
    live_stderr: bool = False,
    cpus: frozenset | None = None,
) -> str:
    """``python -m module --tree tree --device device args`` in a fresh
    interpreter with ``scripts/`` on its path (or in a fork of the tree's
    ``forkserver``: ``use_forkservers``); returns its stdout. Its stderr is
    passed through (``live_stderr``: progress lines) or kept for the error, which
    names the module, the tree, the exit status and the end of stderr. ``cpus``:
    the child (and every thread it starts) runs on those CPUs only."""
    argv = ["--tree", str(tree), "--device", device, *args]
    if _forkservers is not None and _forkservers.serves(module, tree, device):
        proc = _forkservers.run(module, tree, argv, timeout, live_stderr, cpus)
    else:
        proc = subprocess.run(
            [sys.executable, "-m", module, *argv],
            env=_forkservers.env if _forkservers is not None else subprocess_env(),
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            stdout=subprocess.PIPE,
            stderr=None if live_stderr else subprocess.PIPE,
            text=True,
            timeout=timeout,
        )
    if proc.returncode != 0:
        tail = f":\n{proc.stderr[-6000:]}" if proc.stderr else ""
        raise UserError(f"{module} failed on {tree} (exit {proc.returncode}){tail}")
    return proc.stdout


class ForkServers:
    """A ``forkserver`` for each of ``trees``, started at its first run, in the
    environment ``env``; ``run`` is ``subprocess.run``'s part of ``child.run``
    through it."""

    def __init__(self, trees, folder: Path, env: dict):
        self.trees = {str(Path(tree).resolve()): threading.Lock() for tree in trees}
        self.folder, self.env = folder, env
        self.servers: dict[str, tuple[subprocess.Popen, Path]] = {}

    def serves(self, module: str, tree: Path, device: str) -> bool:
        return device == "cpu" and module in forkserver.SERVED and self.key(tree) in self.trees

    @staticmethod
    def key(tree: Path) -> str:
        return str(Path(tree).resolve())

    def server(self, tree: Path) -> Path:
        """The socket of ``tree``'s server, started (and ready) on first use."""
        key = self.key(tree)
        with self.trees[key]:
            if key not in self.servers:
                path = self.folder / f"{list(self.trees).index(key)}.sock"
                cmd = [sys.executable, "-m", "mla_harness.forkserver", "--tree", str(tree)]
                proc = subprocess.Popen(
                    [*cmd, "--socket", str(path)],
                    env=self.env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                if proc.stdout.readline().strip() != "ready":
                    _, err = proc.communicate()
                    code = proc.returncode
                    raise UserError(f"forkserver failed on {tree} (exit {code}):\n{err[-6000:]}")
                proc.stdout.close()
                self.servers[key] = (proc, path)
            return self.servers[key][1]

    def run(self, module, tree, argv, timeout, live_stderr, cpus) -> subprocess.CompletedProcess:
        path = self.server(tree)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            request = {"module": module, "args": argv, "cwd": os.getcwd()}
            if cpus:
                request["cpus"] = sorted(cpus)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(path))
                fds = [out.fileno(), sys.stderr.fileno() if live_stderr else err.fileno()]
                socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], fds)
                lines = conn.makefile("rb")
                pid = int(lines.readline())
                conn.settimeout(timeout)
                try:
                    status = lines.readline()
                except TimeoutError:
                    os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired([module, *argv], timeout) from None
            if not status:
                raise UserError(f"forkserver of {tree} ended during {module}")
            out.seek(0)
            err.seek(0)
            stderr = None if live_stderr else err.read().decode(errors="replace")
            stdout = out.read().decode(errors="replace")
            return subprocess.CompletedProcess([module, *argv], int(status), stdout, stderr)

    def close(self) -> None:
        for proc, path in self.servers.values():
            proc.stdin.close()
            proc.wait()
            path.unlink(missing_ok=True)
        self.servers.clear()


_forkservers: ForkServers | None = None


def use_forkservers(trees=(), folder: Path | None = None, env: dict | None = None) -> None:
    """From now on ``run`` starts the CPU children of ``forkserver.SERVED`` on
    ``trees`` (python/ roots) as forks of a ``forkserver`` of their tree
    (``folder``: where the sockets go), and every child in the environment
    ``env`` (default ``subprocess_env()`` now: a test that changes
    ``os.environ`` later changes nothing there); no trees: fresh interpreters
    in the environment of the time again (the servers exit)."""
    global _forkservers
    if _forkservers is not None:
        _forkservers.close()
    _forkservers = ForkServers(trees, folder, env or subprocess_env()) if trees else None


def exchange(module: str, tree: Path, device: str, flag: str, payload, **kwargs) -> bytes:
    """``run`` a child that reads ``payload`` (as JSON) from ``flag FILE`` and
    writes its result to ``--out FILE``; return the result's bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        source, out = Path(tmp, "in.json"), Path(tmp, "out")
        source.write_text(json.dumps(payload))
        run(module, tree, device, flag, str(source), "--out", str(out), **kwargs)
        return out.read_bytes()


def run_report(module: str, tree: Path, device: str, *args: str, **kwargs):
    """``run`` a child that prints a JSON report as its last line and pickles
    its records to ``--out FILE``; return (report, records)."""
    import pickle

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "records.pkl")
        stdout = run(module, tree, device, *args, "--out", str(out), **kwargs)
        return json.loads(stdout.strip().splitlines()[-1]), pickle.loads(out.read_bytes())


def run_json(module: str, tree: Path, device: str, *args: str, **kwargs):
    """``run`` a child that prints a JSON report as its last line; return
    (report, None), or (None, the error) where the child failed, for a test
    to assert on either."""
    try:
        stdout = run(module, tree, device, *args, **kwargs)
    except UserError as error:
        return None, str(error)
    return json.loads(stdout.strip().splitlines()[-1]), None


def report_errors(prog: str, body: Callable[[], int]) -> int:
    """Run an entry point's ``body``; a ``UserError`` is one line on stderr."""
    try:
        return body()
    except UserError as exc:
        print(f"{prog}: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
