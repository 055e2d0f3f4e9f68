"""Call tree of a cProfile dump from its roots (functions with no profiled caller): tree2.py FILE NCALLS [depth] [min_us]."""
import pstats
import sys

st = pstats.Stats(sys.argv[1])
stats = st.stats
n = int(sys.argv[2])
maxdepth = int(sys.argv[3]) if len(sys.argv) > 3 else 6
min_us = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
children = {}
for func, (cc, nc, tt, ct, callers) in stats.items():
    for caller, edge in callers.items():
        children.setdefault(caller, []).append((func, edge))
total = sum(v[2] for v in stats.values())
print(f"total profiled time per call: {total / n * 1e6:.1f} us (includes profiler overhead)")


def name(f):
    path, line, fn = f
    parts = path.split("/")
    return f"{'/'.join(parts[-2:])}:{line}({fn})"


roots = [f for f, v in stats.items() if not [c for c in v[4] if c in stats]]
for root in sorted(roots, key=lambda f: -stats[f][3]):
    cc, nc, tt, ct, _ = stats[root]
    if ct / n * 1e6 < min_us:
        continue
    print(f"{ct / n * 1e6:8.1f} cum {tt / n * 1e6:7.1f} self  x{nc / n:.1f}  {name(root)}")

    def walk(f, depth, path):
        kids = sorted(children.get(f, []), key=lambda x: -x[1][3])
        for g, e in kids:
            gct = e[3] / n * 1e6
            if gct < min_us:
                continue
            print(f"{'  ' * depth}{gct:8.1f} cum {e[2] / n * 1e6:7.1f} self  x{e[1] / n:.1f}  {name(g)}")
            if depth < maxdepth and g not in path:
                walk(g, depth + 1, path | {g})

    walk(root, 1, frozenset([root]))
