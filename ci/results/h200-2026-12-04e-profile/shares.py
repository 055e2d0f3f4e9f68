"""Per runner, µs per profiled execute (cProfile, about 2x inflated: read
shares): python3 shares.py bs1/*.prof (114 profiled calls each)."""

import pstats
import sys

CALLS = 114
CLONE = "<method 'clone' of 'torch._C.TensorBase' objects>"
ITEMS = (
    ("SmallCopy.__call__", "__call__", "small_copy.py"),
    ("its self time", "__call__", "small_copy.py"),
    ("CUDAGraph.replay", "replay", "cuda/graphs.py"),
    ("dataclasses.replace", "replace", "dataclasses.py"),
    ("Tensor.clone", CLONE, None),
    ("model_context", "model_context", "base_runner.py"),
)

for path in sys.argv[1:]:
    stats = pstats.Stats(path).stats
    total = sum(v[2] for k, v in stats.items() if "disable" not in k[2])
    parts = [f"{path}: {total / CALLS * 1e6:.1f} µs per execute"]
    for label, name, where in ITEMS:
        column = 2 if label == "its self time" else 3
        value = sum(
            v[column]
            for k, v in stats.items()
            if k[2] == name and (where is None or where in k[0])
        )
        share = value / total * 100 if total else 0
        parts.append(f"{label} {value / CALLS * 1e6:.1f} ({share:.0f}%)")
    print("; ".join(parts))
