"""summary.py RUNS: per process and size, `runner_check --pairs`' figures, general
-> kept, and across processes how many had the kept median lower, with the
one-sided sign test's p (each process one vote)."""

import json
import pathlib
import statistics
import sys

runs = sorted(pathlib.Path(sys.argv[1]).glob("*.json"), key=lambda p: int(p.stem))
rows = {}
for path in runs:
    for r in json.loads(path.read_text()):
        rows.setdefault(r["bs"], []).append((path.stem, r))
for bs, per in sorted(rows.items()):
    print(f"bs {bs}")
    for kind in ("single", "loop"):
        count = "iterations" if kind == "single" else "blocks"
        ratios = []
        for name, r in per:
            g, k = r[f"{kind}_general_us"], r[f"{kind}_kept_us"]
            ratios.append(k / g)
            lower = f"{r[f'{kind}_kept_lower']}/{r[count]}"
            print(f"  {kind:6} process {name:>2}: {g:7.1f} -> {k:7.1f} us ({k / g:.3f}), {lower} pairs lower")
        n, below = len(ratios), sum(x < 1 for x in ratios)
        p = sum(__import__("math").comb(n, i) for i in range(below, n + 1)) / 2**n
        print(
            f"  {kind:6} kept/general median {statistics.median(ratios):.3f}"
            f" ({min(ratios):.3f}-{max(ratios):.3f}); lower in {below} of {n} processes,"
            f" sign test p = {p:.2g}"
        )
