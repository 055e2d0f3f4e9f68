"""One SGLang tree per process: the child's entry point and the parent's launcher.

Every child (``mla_harness.probe``, ``.consumer``, ``.rebuild_check``,
``mla_bench.worker``) takes ``--tree DIR`` (a ``python/`` root holding
``sglang``) and ``--device``; ``enter`` installs the replacements that must
come before the import and puts the tree first on ``sys.path``. ``run`` starts
a child from the parent; ``exchange`` also hands it a JSON input file and
returns what it wrote to ``--out``; ``run_json`` returns a child's last line
as JSON or its error. Every command-line entry point of the
harness and the benchmark reports a ``UserError`` (sglpatch's, the project's one
error type) as one line, ``PROG: error: ...``, and its exit code (``report_errors``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from sglpatch.errors import UserError

from . import subprocess_env


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
    interpreter with ``scripts/`` on its path; returns its stdout. Its stderr is
    passed through (``live_stderr``: progress lines) or kept for the error, which
    names the module, the tree, the exit status and the end of stderr. ``cpus``:
    the child (and every thread it starts) runs on those CPUs only."""
    cmd = [sys.executable, "-m", module, "--tree", str(tree), "--device", device, *args]
    proc = subprocess.run(
        cmd,
        env=subprocess_env(),
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
