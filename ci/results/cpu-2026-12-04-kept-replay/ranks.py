"""rounds.sh's processes: each process's EAGLE-iteration sum (draft + verify
execute + draft extend) and back-to-back host µs per iteration, per tree, and
a one-sided exact Mann-Whitney test that "after" is lower (no ties assumed):
python3 ranks.py rounds"""

import glob
import json
import os
import sys
from functools import lru_cache
from math import comb

SUMMED = ("EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
VERIFY = "DecodeCudaGraphRunner (target verify)"


def figures(path, bs):
    total, loop = 0.0, None
    for r in json.load(open(path)):
        if r["bs"] != bs:
            continue
        if r.get("loop"):
            loop = r["host_us"]
        elif r["runner"] in SUMMED or (r["runner"] == VERIFY and r["path"] == "execute"):
            total += r["execute_us"]
    return round(total, 1), round(loop, 1)


@lru_cache(maxsize=None)
def ways(u, n, m):
    """Orderings of n and m values in which exactly u (x, y) pairs have x < y."""
    if u < 0:
        return 0
    if n == 0 or m == 0:
        return int(u == 0)
    # the largest value is an x (beats no y) or a y (every x is below it)
    return ways(u, n - 1, m) + ways(u - n, n, m - 1)


def p_lower(a, b):
    """P(U >= observed) under no difference; U counts pairs with a < b."""
    seen = sum(x < y for x in a for y in b)
    n, m = len(a), len(b)
    return seen, sum(ways(u, n, m) for u in range(seen, n * m + 1)) / comb(n + m, n)


trees = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-*.json"))):
    trees.setdefault(os.path.basename(path)[:-5].split("-")[1], []).append(path)
for bs in (1, 32):
    for i, what in enumerate(("execute sum", "back to back")):
        cols = {t: [figures(p, bs)[i] for p in paths] for t, paths in trees.items()}
        seen, p = p_lower(cols["after"], cols["before"])
        n = len(cols["after"]) * len(cols["before"])
        print(f"bs {bs:2d} {what:12s} µs / iteration")
        for t in ("before", "after"):
            print(f"  {t:6s} {sorted(cols[t])}")
        print(f"  after < before: U = {seen} of {n}, p = {p:.2g}")
