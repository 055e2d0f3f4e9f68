"""Each process's `execute` per EAGLE iteration (draft + target verify's
execute + draft extend), per setup and batch size, from bench.json's runner
reports: python3 processes.py bench.json"""

import json
import sys

VERIFY = "DecodeCudaGraphRunner (target verify)"


def iteration(rows, setup, bs):
    return sum(
        row["execute_us"]
        for row in rows
        if row["setup"] == setup
        and row["bs"] == bs
        and (row["runner"] != VERIFY or row["path"] == "execute")
        and row["runner"] != "DecodeCudaGraphRunner (decode)"
    )


runners = json.load(open(sys.argv[1]))["runners"]
keys = sorted({(row["setup"], row["bs"]) for rows in runners["base"] for row in rows})
for setup, bs in keys:
    print(f"setup {setup}, bs {bs}:")
    for tree, processes in runners.items():
        sums = [round(iteration(rows, setup, bs), 1) for rows in processes]
        print(f"  {tree:8s} {sums}")
