"""Per-process EAGLE-iteration sums of bench.json and a one-sided exact
Mann-Whitney test between trees: python3 ranks.py bench.json"""

import itertools
import json
import sys

RUNNERS = ("EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
VERIFY = "DecodeCudaGraphRunner (target verify)"


def sums(processes, bs, loop):
    out = []
    for rows in processes:
        total = 0.0
        for row in rows:
            if row.get("bs") != bs or bool(row.get("loop")) != loop:
                continue
            if loop:
                total = row["host_us"]
            elif row["runner"] in RUNNERS or (row["runner"] == VERIFY and row["path"] == "execute"):
                total += row["execute_us"]
        out.append(round(total, 1))
    return out


def u(a, b):
    return sum((x < y) + 0.5 * (x == y) for x in a for y in b)


def p_one_sided(a, b):
    """P(U >= observed) over every split of the pooled values (exact)."""
    seen, pooled, n = u(a, b), a + b, len(a)
    hits = total = 0
    for pick in itertools.combinations(range(len(pooled)), n):
        rest = [pooled[i] for i in range(len(pooled)) if i not in pick]
        total += 1
        hits += u([pooled[i] for i in pick], rest) >= seen
    return seen, hits / total


record = json.load(open(sys.argv[1]))["runners"]
for loop in (False, True):
    for bs in (1, 32, 64):
        what = "back-to-back host µs / iteration" if loop else "execute sum µs / iteration"
        print(f"bs {bs}, {what}:")
        for tree, processes in record.items():
            print(f"  {tree:13s} {sums(processes, bs, loop)}")
        for lower, higher in (("patched", "without-last"), ("without-last", "base")):
            a, b = sums(record[lower], bs, loop), sums(record[higher], bs, loop)
            seen, p = p_one_sided(a, b)
            print(f"  {lower} < {higher}: U = {seen:g} of {len(a) * len(b)}, p = {p:.4f}")
