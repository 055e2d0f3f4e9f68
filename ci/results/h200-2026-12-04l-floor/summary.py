"""Tables of this record from its raw files: python3 summary.py (in this folder).

run1.txt, run2.txt, run3.txt: floor.py's output lines (FLOOR ...), one per
process, after the process's start time (and, in run3, FLOOR_WAIT); lines.txt:
lines.py's (LINES ...), one per process."""

import json
import statistics


def processes(path, tag):
    wait, out = "synchronize", []
    for line in open(path):
        if line.startswith("WAIT "):
            wait = line.split()[1]
        elif line.startswith(tag + " "):
            out.append((wait, json.loads(line[len(tag) + 1 :])))
    return out


def floor_tables():
    print("## floor.py: host µs per iteration, medians of the rounds' medians (range)")
    print(
        "| run | process | tree | wait | bs | execute, single | floor, single | execute, back to back"
        " | floor, back to back | back to back: execute / floor |"
    )
    print("|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for run in ("run1.txt", "run2.txt", "run3.txt"):
        for k, (wait, d) in enumerate(processes(run, "FLOOR"), 1):
            tree = "v0.5.23" if run == "run2.txt" and k == 2 else "the queue"
            for bs, v in d["sizes"].items():
                r = v["rounds"]
                m = {key: statistics.median(x) for key, x in r.items()}
                cell = lambda key: f"{m[key]:.1f} ({min(r[key]):.1f}-{max(r[key]):.1f})"  # noqa: E731
                print(
                    f"| {run} | {k} | {tree} | {wait} | {bs} | {cell('single_execute')} | "
                    f"{cell('single_floor')} | {cell('loop_execute')} | {cell('loop_floor')} | "
                    f"{m['loop_execute'] / m['loop_floor']:.2f} |"
                )
    print()
    print("## floor.py: each recorded operation's median host µs (single calls; back to back)")
    for run in ("run2.txt", "run3.txt"):
        for k, (wait, d) in enumerate(processes(run, "FLOOR"), 1):
            if run == "run2.txt" and k == 2:
                continue  # v0.5.23: its input copies are not among the recorded operations
            for bs, v in d["sizes"].items():
                ops = v["per_op_us"]
                for name, single in ops["single"].items():
                    loop = ops["loop"][name]
                    pairs = ", ".join(f"{a[0]} {a[1]}; {b[1]}" for a, b in zip(single, loop))
                    print(f"- {run} process {k} ({wait}) bs {bs}, {name}: {pairs}")


def line_tables():
    print()
    print(
        "## lines.py: single calls, median host µs per statement (process 1; process 2),"
        " statements of at least 0.8 µs in either"
    )
    runs = [d for _, d in processes("lines.txt", "LINES")]
    for bs in (1, 32, 64):
        key = f"single bs {bs}"
        print(f"### bs {bs}")
        for name, a in runs[0][key].items():
            b = runs[1][key][name]
            print(f"- {name}: whole {a['whole_us']}; {b['whole_us']} ({a['calls']} calls)")
            for i, (us, _, line) in enumerate(a["statements"]):
                us2 = b["statements"][i][0]
                if max(us, us2) >= 0.8:
                    print(f"  - {us}; {us2}: `{line}`")


floor_tables()
line_tables()
