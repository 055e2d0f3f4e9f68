"""Call tree under execute from a cProfile dump: python tree.py FILE [depth] [min_us]."""
import pstats
import sys

st = pstats.Stats(sys.argv[1])
stats = st.stats
maxdepth = int(sys.argv[2]) if len(sys.argv) > 2 else 6
min_us = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
children = {}
for func, (cc, nc, tt, ct, callers) in stats.items():
    for caller, edge in callers.items():
        children.setdefault(caller, []).append((func, edge))


def name(f):
    path, line, fn = f
    parts = path.split("/")
    return f"{'/'.join(parts[-2:])}:{line}({fn})"


roots = [f for f in stats if f[2] == "execute" and "runner" in f[0]]
for root in roots:
    cc, nc, tt, ct, _ = stats[root]
    n = nc
    print(f"==== {name(root)}: {n} calls, {ct / n * 1e6:.1f} us/call cumulative, {tt / n * 1e6:.1f} self")

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
