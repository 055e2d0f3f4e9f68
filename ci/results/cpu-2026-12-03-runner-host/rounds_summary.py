"""rounds_summary.py DIR: rounds.sh's processes, per tree and row.

Per (runner, bs, path): each process's execute median, their median (the
processes' values), the change; "loop": host µs per EAGLE iteration;
"[timers]": a process's sectioned calls' median less its whole calls' median.
"""

import glob
import json
import os
import statistics
import sys

SHORT = (("DecodeCudaGraphRunner", "Decode"), ("EAGLEDraft", "Draft"), ("CudaGraphRunner", ""))
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-*.json"))):
    tree = os.path.basename(path)[:-5].split("-")[1]
    for r in json.load(open(path)):
        if r.get("loop"):
            rows.setdefault(("loop", r["bs"], ""), {}).setdefault(tree, []).append(r["host_us"])
            continue
        name = r["runner"]
        for a, b in SHORT:
            name = name.replace(a, b)
        key = (name, r["bs"], r["path"])
        rows.setdefault(key, {}).setdefault(tree, []).append(r["execute_us"])
        timers = r["sectioned_execute_us"] - r["execute_us"]
        rows.setdefault((name + " [timers]", r["bs"], r["path"]), {}).setdefault(tree, []).append(
            timers
        )
for key in sorted(rows, key=lambda k: ("[timers]" in k[0], k[0] == "loop", k)):
    cells, med = [], {}
    for tree in ("before", "after"):
        xs = rows[key].get(tree, [])
        med[tree] = statistics.median(xs)
        cells.append(f"{tree} {med[tree]:7.1f} ({' '.join(f'{x:.0f}' for x in xs)})")
    change = med["after"] / med["before"] - 1 if med["before"] > 0 else float("nan")
    print(f"{key[0]:32s} bs {key[1]:2d} {key[2]:20s} " + "  ".join(cells) + f"  {change:+.1%}")
