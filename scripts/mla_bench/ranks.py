"""Each runner process's EAGLE-iteration figures, and an exact rank test
between two trees.

``python -m mla_bench.ranks SOURCE [BEFORE AFTER]``: SOURCE is a folder of
``runner_check --time --loop`` reports named ``<round>-<tree>.json`` (as
``ci/results/cpu-2026-12-03-runner-host/rounds.sh`` writes them, or the
benchmark's ``runner-rounds/``, each report under ``report``: what a run cut
short keeps) or a bench record with ``--runners`` (its ``runners``); the
trees default to ``before`` and ``after``. Per batch size, each process's
host µs per iteration three ways, and a one-sided exact Mann-Whitney test
that AFTER is lower (no ties assumed):

- "verify alone": draft + verify ``execute`` not planned ahead + draft extend;
- "as the EAGLE worker": draft + verify's ``load_batch`` and ``execute``
  planned ahead (v0.5.23's ``eagle_utils.py:398-409``) + draft extend;
- "back to back": the loop's host µs per iteration.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import cache
from math import comb
from pathlib import Path

from sglpatch.errors import UserError

from . import runner_rounds

DRAFTS = ("EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
VERIFY = "DecodeCudaGraphRunner (target verify)"
PLANNED = "load_batch, execute"
WAYS = ("verify alone", "as the EAGLE worker", "back to back")


def figures(rows: list, bs: int) -> tuple:
    """One process's (verify alone, as the EAGLE worker, back to back) at
    ``bs``, µs per iteration, rounded to 0.1; None where it lacks a part."""
    alone = worker = 0.0
    loop = None
    seen = set()
    for r in rows:
        if r["bs"] != bs:
            continue
        if r.get("loop"):
            loop = r["host_us"]
        elif r["runner"] in DRAFTS:
            alone += r["execute_us"]
            worker += r["execute_us"]
        elif r["runner"] == VERIFY and r["path"] == "execute":
            alone += r["execute_us"]
            seen.add("alone")
        elif r["runner"] == VERIFY and r["path"] == PLANNED and "load_batch_us" in r:
            worker += r["execute_us"] + r["load_batch_us"]
            seen.add("worker")
    return (
        round(alone, 1) if "alone" in seen else None,
        round(worker, 1) if "worker" in seen else None,
        round(loop, 1) if loop is not None else None,
    )


@cache
def _ways(u: int, n: int, m: int) -> int:
    """Orderings of n and m distinct values in which exactly u (x, y) pairs have x < y."""
    if u < 0:
        return 0
    if n == 0 or m == 0:
        return int(u == 0)
    # the largest value is an x (below no y) or a y (above every x)
    return _ways(u, n - 1, m) + _ways(u - n, n, m - 1)


def p_lower(a: list, b: list) -> tuple:
    """(U, p): U counts the pairs with a < b; p = P(U >= observed) when a and
    b come from one distribution (exact, no ties assumed)."""
    seen = sum(x < y for x in a for y in b)
    n, m = len(a), len(b)
    return seen, sum(_ways(u, n, m) for u in range(seen, n * m + 1)) / comb(n + m, n)


def load(source: Path) -> dict:
    """tree -> [each process's report rows], from a folder or a bench record."""
    if source.is_dir():
        by_tree = {}
        for (_, tree), rows in runner_rounds.processes(source).items():
            by_tree.setdefault(tree, []).append(rows)
        return by_tree
    try:
        return json.loads(source.read_text())["runners"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{source}: not runner reports nor a --runners record ({error})") from None


def table(processes: dict, before: str, after: str) -> str:
    missing = [t for t in (before, after) if not processes.get(t)]
    if missing:
        raise UserError(f"no processes of {', '.join(missing)} (trees: {sorted(processes)})")
    lines = []
    sizes = sorted({r["bs"] for rows in processes[after] for r in rows})
    for bs in sizes:
        each = {t: [figures(rows, bs) for rows in processes[t]] for t in (before, after)}
        for i, what in enumerate(WAYS):
            cols = {t: [f[i] for f in each[t]] for t in (before, after)}
            if None in cols[before] + cols[after]:
                continue  # a way some process did not measure
            seen, p = p_lower(cols[after], cols[before])
            lines.append(f"bs {bs:2d} {what}, µs / iteration")
            lines += [f"  {t:12s} {cols[t]}" for t in (before, after)]
            n = len(cols[after]) * len(cols[before])
            lines.append(f"  {after} < {before}: U = {seen} of {n}, p = {p:.2g}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("trees", nargs="*", default=["before", "after"], metavar="TREE")
    args = parser.parse_args(argv)
    if len(args.trees) != 2:
        raise UserError(f"two trees, BEFORE and AFTER; got {args.trees}")
    processes = load(args.source)
    try:
        print(table(processes, *args.trees))
    except (KeyError, TypeError, ValueError) as error:  # rows of another shape
        raise UserError(
            f"{args.source}: its runner reports do not rank ({type(error).__name__}: {error})"
        ) from None
    return 0


if __name__ == "__main__":
    from mla_harness import child

    sys.exit(child.report_errors("mla_bench.ranks", main))
