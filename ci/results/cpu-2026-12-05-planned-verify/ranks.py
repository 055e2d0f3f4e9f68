"""runner_check --time --loop processes of two trees (rounds.sh's OUTDIR, or a
bench record's runner processes): per process the EAGLE iteration's host µs
three ways, and a one-sided exact Mann-Whitney test that the second tree is
lower (no ties assumed):
  - "verify alone": draft + verify execute (not planned ahead) + draft extend;
  - "as the EAGLE worker": draft + verify load_batch + execute planned ahead
    (eagle_utils.py:398-409) + draft extend;
  - "back to back": the loop's host µs per iteration (verify planned ahead).
python3 ranks.py OUTDIR [BEFORE AFTER] (rounds.sh's <round>-<tree>.json;
default trees before, after), or python3 ranks.py RECORD.json BEFORE AFTER."""

import glob
import json
import os
import sys
from functools import lru_cache
from math import comb

DRAFTS = ("EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
VERIFY = "DecodeCudaGraphRunner (target verify)"
PLANNED = "load_batch, execute"
WAYS = ("verify alone", "as the EAGLE worker", "back to back")


def figures(rows, bs):
    alone = worker = 0.0
    loop = None
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
        elif r["runner"] == VERIFY and r["path"] == PLANNED:
            worker += r["execute_us"] + r["load_batch_us"]
    return round(alone, 1), round(worker, 1), round(loop, 1)


@lru_cache(maxsize=None)
def ways(u, n, m):
    """Orderings of n and m values in which exactly u (x, y) pairs have x < y."""
    if u < 0:
        return 0
    if n == 0 or m == 0:
        return int(u == 0)
    return ways(u, n - 1, m) + ways(u - n, n, m - 1)


def p_lower(a, b):
    """P(U >= observed) under no difference; U counts pairs with a < b."""
    seen = sum(x < y for x in a for y in b)
    n, m = len(a), len(b)
    return seen, sum(ways(u, n, m) for u in range(seen, n * m + 1)) / comb(n + m, n)


source = sys.argv[1]
before, after = sys.argv[2:4] if len(sys.argv) > 3 else ("before", "after")
processes = {}
if os.path.isdir(source):
    for path in sorted(glob.glob(os.path.join(source, "*-*.json"))):
        tree = os.path.basename(path)[:-5].split("-", 1)[1]
        processes.setdefault(tree, []).append(json.load(open(path)))
else:
    processes = json.load(open(source))["runners"]
sizes = sorted({r["bs"] for rows in processes[after] for r in rows})
for bs in sizes:
    for i, what in enumerate(WAYS):
        cols = {t: [figures(rows, bs)[i] for rows in processes[t]] for t in (before, after)}
        seen, p = p_lower(cols[after], cols[before])
        n = len(cols[after]) * len(cols[before])
        print(f"bs {bs:2d} {what}, µs / iteration")
        for t in (before, after):
            print(f"  {t:12s} {cols[t]}")
        print(f"  {after} < {before}: U = {seen} of {n}, p = {p:.2g}")
