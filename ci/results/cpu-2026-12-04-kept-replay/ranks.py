"""rounds.sh's processes: each process's EAGLE-iteration sum (draft + verify
execute + draft extend) and back-to-back host µs per iteration, per tree, and
a one-sided exact Mann-Whitney test that "after" is lower (no ties assumed):
python3 ranks.py rounds"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts"))
from mla_bench.ranks import p_lower  # noqa: E402

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
