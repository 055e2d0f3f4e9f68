"""ab_summary.py FILE: ab_0010.py's blocks, "old" against "new", per row.

Per row: each mode's median of its blocks' medians (their range), the change,
and, pairing the blocks in the order they ran (ABBA), the median of the
paired differences and how many pairs went down.
"""

import json
import statistics
import sys

data = json.load(open(sys.argv[1]))
for key in data["old"]:
    old, new = data["old"][key], data["new"][key]
    mo, mn = statistics.median(old), statistics.median(new)
    diffs = [b - a for a, b in zip(old, new, strict=True)]
    down = sum(d < 0 for d in diffs)
    print(
        f"{key:60s} old {mo:7.1f} ({min(old):.0f}-{max(old):.0f})"
        f"  new {mn:7.1f} ({min(new):.0f}-{max(new):.0f})  {mn - mo:+7.1f}"
        f"  paired {statistics.median(diffs):+7.1f}, down in {down}/{len(diffs)}"
    )
