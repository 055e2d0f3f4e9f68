"""summary.py RUNS: per process, size, measure and verify path, `runner_check
--pairs`' figures, general -> kept, and across processes how many had the kept
median lower, with the one-sided sign test's p (each process one vote)."""

import json
import math
import pathlib
import statistics
import sys

runs = sorted(pathlib.Path(sys.argv[1]).glob("*.json"), key=lambda p: int(p.stem))
groups = {}
for path in runs:
    for r in json.loads(path.read_text()):
        groups.setdefault((r["bs"], r["pairs"], r["verify"]), []).append((path.stem, r))
for (bs, measure, verify), per in sorted(groups.items()):
    print(f"bs {bs}, {measure}, verify {verify!r}")
    ratios, saved = [], []
    for name, r in per:
        g, k = r["general_us"], r["kept_us"]
        ratios.append(k / g)
        saved.append(g - k)
        lower = f"{r['kept_lower']}/{r['count']}"
        print(f"  process {name:>2}: {g:7.1f} -> {k:7.1f} us ({k / g:.3f}), {lower} pairs lower")
    n, below = len(ratios), sum(x < 1 for x in ratios)
    p = sum(math.comb(n, i) for i in range(below, n + 1)) / 2**n
    print(
        f"  kept/general median {statistics.median(ratios):.3f}"
        f" ({min(ratios):.3f}-{max(ratios):.3f}), saved {min(saved):.1f}-{max(saved):.1f} us;"
        f" lower in {below} of {n} processes, sign test p = {p:.2g}"
    )
