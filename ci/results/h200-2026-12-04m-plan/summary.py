"""The tables of this record: python3 summary.py [layers|attribute] (in this
folder). plan.txt: plan.py's output lines (PLAN ...), layers.txt: layers.py's
(LAYERS ...), attribute.txt: attribute.py's (KEEP=launch or KEEP=copies ...),
one per process, each after the process's start time."""

import json
import statistics as st
import sys

MODE = sys.argv[1] if sys.argv[1:] else "plan"
FILE = {"plan": "plan.txt", "layers": "layers.txt", "attribute": "attribute.txt"}[MODE]
# attribute.txt's lines start with KEEP=<layer>: each process's kept layer.
procs, kept = [], []
for line in open(FILE):
    tag, _, rest = line.partition(" ")
    if tag in ("PLAN", "LAYERS") or tag.startswith("KEEP="):
        procs.append(json.loads(rest))
        kept.append(tag)
print(f"## {FILE}" + ("" if MODE != "attribute" else ": " + ", ".join(kept)))
print(
    "| process | bs | single calls: execute -> plan, µs per iteration | change | back to back: execute -> plan | change |"
)
print("|---:|---:|---|---:|---|---:|")
for k, d in enumerate(procs, 1):
    for bs, v in d["sizes"].items():
        se, sp = v["single"]["single_execute"], v["single"]["single_plan"]
        ie = [sum(x) for x in zip(*se.values())]
        ip = [sum(x) for x in zip(*sp.values())]
        le, lp = v["loop"]["loop_execute"], v["loop"]["loop_plan"]
        a, b, c, e = st.median(ie), st.median(ip), st.median(le), st.median(lp)
        print(
            f"| {k} | {bs} | {a:.1f} ({min(ie):.1f}-{max(ie):.1f}) -> {b:.1f} ({min(ip):.1f}-{max(ip):.1f})"
            f" | {100 * (b / a - 1):.0f}% | {c:.1f} ({min(le):.1f}-{max(le):.1f}) -> {e:.1f}"
            f" ({min(lp):.1f}-{max(lp):.1f}) | {100 * (e / c - 1):.0f}% |"
        )
print()
print("Per runner, single calls, medians of the rounds (execute -> plan), µs:")
for k, d in enumerate(procs, 1):
    for bs, v in d["sizes"].items():
        se, sp = v["single"]["single_execute"], v["single"]["single_plan"]
        cells = "; ".join(f"{n} {st.median(se[n]):.1f} -> {st.median(sp[n]):.1f}" for n in se)
        print(f"- process {k}, bs {bs}: {cells}")
print()
print(
    "Compared (plan, then execute, on the same batch): "
    + ", ".join(f"{n} bs {bs} ({m} buffers)" for n, bs, m in procs[0]["checked"])
    + "; in each process"
)
