"""``make bench``: base and patched trees measured in one run, then compared."""

from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from mla_harness import child
from sglpatch.errors import UserError
from sglpatch.layout import Layout
from sglpatch.makevars import shown_path
from sglpatch.trees import tree_paths

from . import config, ladder, report, runner_rounds
from .worker import progress, time_left

CHART = "eagle_metadata.png"  # the latest run's chart; bench-<stamp>.png keeps each
# Starts each runner_check process (--runners). A name of this module's own, so
# that replacing it (the bench's tests, which have no GPU) reaches no other
# harness child that runs in the same process meanwhile.
run_child = child.run


def run_tree(tree: Path, cfg: dict) -> dict:
    """One tree measured in a process of its own (``worker``); its progress
    lines pass through."""
    out = child.exchange("mla_bench.worker", tree, cfg["device"], "--config", cfg, live_stderr=True)
    return json.loads(out)


def invocation(argv: list[str]) -> str:
    """The command that reruns this benchmark, as the user would type it: ``make
    bench BENCH_ARGS="..."`` when make started it, else the module's command."""
    args = os.environ.get("SGLPATCH_MK_BENCH_ARGS")
    build = os.environ.get("SGLPATCH_MK_BUILD", "")
    base = os.environ.get("SGLPATCH_MK_BASE", "")
    chosen = [f"--base={base}"] if base else []
    if args is not None and argv == ["--build", build, *chosen, *args.split()]:
        words = ["make", "bench"]
        if build != "build":
            words.append(f"BUILD={shlex.quote(build)}")
        if base:
            words.append(f"BASE={shlex.quote(base)}")
        if args.strip():
            plain = not any(c in args for c in '"$`\\')
            words.append(
                f'BENCH_ARGS="{args.strip()}"' if plain else f"BENCH_ARGS={shlex.quote(args)}"
            )
        return " ".join(words)
    return "PYTHONPATH=scripts python -m mla_bench " + shlex.join(argv)


def plan_line(args, cfg: dict, trees: int) -> str:
    """What this run measures and, on CPU, how long that takes and the other preset."""
    chosen = config.preset(args, cfg["device"] == "cuda")
    points = len(cfg["contexts"]) * len(cfg["batch_sizes"])
    what = f"{chosen} sizes, {trees} trees x {points} points, {cfg['repeats']} repeats"
    if cfg["device"] == "cuda":
        return f"[bench] {what} on CUDA"
    why = "" if args.full or args.quick else " (the CPU default)"
    other = "full" if chosen == "quick" else "quick"
    return (
        f"[bench] {what} on CPU{why}: {config.CPU_TIME[chosen]} for 2 trees on 2 cores;"
        f' BENCH_ARGS="--{other}" for the {other} sizes ({config.CPU_TIME[other]})'
    )


def hidden_line(runs: dict) -> str:
    """One line for the upstream warnings the workers hid, or ''."""
    counts = Counter(what for run in runs.values() for what in run.get("hidden_warnings", []))
    if not counts:
        return ""
    kinds = ", ".join(sorted(counts))
    return (
        f"[bench] hid {sum(counts.values())} UserWarnings of SGLang's imports over"
        f" {len(runs)} trees (that this machine has no CUDA for {kinds}; no effect on"
        " the figures)"
    )


def runner_cpus() -> frozenset:
    """The CPUs every ``--runners`` process is pinned to, the same for both
    trees: the last two this process may run on. Pinned, the processes still
    spread (a runner row's process medians up to 3.3x apart, H200, 2026-12-01):
    the report's shares are measured inside each process."""
    return frozenset(sorted(os.sched_getaffinity(0))[-2:])


def runner_times(
    trees: list, cfg: dict, rounds: int, loop: int = 0, sizes=None, store=None
) -> dict:
    """``--runners``: ``rounds`` processes of ``mla_harness.runner_check
    --time`` (and ``--loop``, ``--sizes``) per tree of ``trees`` ([(name, path)]; two trees
    cannot share a process: each is ``sglang``), the trees' order reversed
    every other round (``runner_rounds.order``), each pinned to ``runner_cpus``;
    per tree, the rounds' reports (``report.runner_rounds`` joins them). Each
    report goes to ``store`` (a ``runner_rounds.Store``) as its process ends;
    the processes it already holds are not run again."""
    done = store.done() if store else {}
    plan = runner_rounds.order([name for name, _ in trees], rounds)
    missing = [pair for pair in plan if pair not in done]
    if len(missing) < len(plan):
        progress(
            f"[bench] runners' execute: {len(plan) - len(missing)} of {len(plan)} processes"
            f" kept in {shown_path(store.folder.resolve())}, {len(missing)} to run"
        )
    paths, cpus = dict(trees), runner_cpus()
    for number, name in missing:
        progress(f"[bench] runners' execute, round {number}/{rounds}, {name}: {paths[name]}")
        stdout = run_child(
            "mla_harness.runner_check",
            paths[name],
            "cuda",
            "--time",
            str(cfg["repeats"]),
            *(["--loop", str(loop)] if loop else []),
            *(["--sizes", ",".join(map(str, sizes))] if sizes else []),
            cpus=cpus,
        )
        done[number, name] = json.loads(stdout.strip().splitlines()[-1])
        if store:
            store.save(number, name, done[number, name])
    return {tree: [done[n, t] for n, t in plan if t == tree] for tree, _ in trees}


def metadata(args, cfg: dict, trees: list, runs: dict) -> tuple[dict, list[str]]:
    """The metadata benchmark: each tree in a process of its own (into
    ``runs``), the first against the last; (the comparison, its tables)."""
    progress(plan_line(args, cfg, len(trees)))
    start = time.monotonic()
    for number, (name, path) in enumerate(trees, 1):
        spent, done = time.monotonic() - start, number - 1
        ahead = time_left(spent / done * (len(trees) - done), "") if done else ""
        progress(f"[bench] tree {number}/{len(trees)} {name}: {path}{ahead}")
        runs[name] = run_tree(path, cfg)
    labels = list(runs)
    result = report.compare(runs[labels[0]], runs[labels[-1]])
    tables = [report.markdown(result, cfg)]
    if args.ladder:
        steps = [
            (labels[i], report.compare(runs[labels[i - 1]], runs[labels[i]]))
            for i in range(1, len(labels))
        ]
        tables.append(
            "Per patch (each against the tree before it):\n\n" + report.ladder_markdown(steps, cfg)
        )
    return result, tables


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = config.parser().parse_args(argv)
    cuda = False
    if args.device != "cpu":  # torch only where it decides: a bad flag is refused at once
        import torch

        cuda = torch.cuda.is_available()
        if args.device == "cuda" and not cuda:
            raise UserError("--device cuda but no CUDA device is visible")
    layout = Layout.create(args.build, base=args.base)
    cfg = config.from_args(args, cuda).to_json()
    if cfg["extend_mode"] is None:  # v0.5.13+ has DRAFT_EXTEND_V2 only
        from mla_harness import phases

        has_v1 = any(phase.name == "extend_v1" for phase in phases.on_base(layout.name))
        cfg["extend_mode"] = "v1" if has_v1 else "v2"
    base_tree, patched_tree = tree_paths(args.build, layout.name)
    for name, path in (("base", base_tree), ("patched", patched_tree)):
        if not (path / "sglang" / "__init__.py").is_file():
            raise UserError(f"{name} tree missing at {path}: run `make apply` first")
    trees = [("base", base_tree), ("patched", patched_tree)]
    if args.ladder:
        ladder.ensure(layout)
        trees = [("base", base_tree), *ladder.trees(layout, base_tree)]
    out_dir = Path(args.out_dir or layout.build / "bench")
    timed, store = [], None
    if args.runners:  # first, so that a refused --resume costs no measuring
        timed = [trees[0], ("patched", trees[-1][1])]
        if args.without_last:
            timed.insert(1, ("without-last", ladder.without_last(layout, trees[-1][1])))
        wanted = runner_rounds.settings(
            timed, cfg, args.runner_rounds, args.runner_loop, args.runner_batch_sizes, runner_cpus()
        )
        store = runner_rounds.Store(out_dir, wanted, args.resume, invocation(argv))
    runs, result, tables = {}, None, []
    if not args.runners_only:
        result, tables = metadata(args, cfg, trees, runs)
    timed_runners = {}
    if args.runners:
        timed_runners = runner_times(
            timed, cfg, args.runner_rounds, args.runner_loop, args.runner_batch_sizes, store
        )
        tables.append(report.runner_report(timed_runners, sorted(runner_cpus())))
    table = "\n\n".join(tables)
    print(table)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    record = {
        "date": stamp,
        "command": invocation(argv),
        "config": cfg,
        "machine": runs[list(runs)[-1]]["machine"] if runs else store.settings["machine"],
        "trees": [str(p) for _, p in trees],
        "result": result,
        "runs": runs,
        "runners": timed_runners,
        "runner_cpus": sorted(runner_cpus()) if args.runners else [],
        "runner_processes": store.dates() if store else [],
        "table": table,
    }
    written = [f"bench-{stamp}.json"]
    for name in (f"bench-{stamp}.json", "latest.json"):
        (out_dir / name).write_text(json.dumps(record, indent=1))
    (out_dir / "latest.md").write_text(table + "\n")
    if store:
        store.remove()  # every process is in the record now
    chart = not args.no_chart and result is not None
    if chart:
        base_name = f"base {layout.name}"
        report.chart(result, out_dir / f"bench-{stamp}.png", cfg["device"], base_name)
        shutil.copyfile(out_dir / f"bench-{stamp}.png", out_dir / CHART)
        written.append(f"bench-{stamp}.png")
    hidden = hidden_line(runs)
    if hidden:
        progress(hidden)
    latest = ", ".join(["latest.json", "latest.md", *([CHART] if chart else [])])
    progress(
        f"[bench] wrote {shown_path(out_dir.resolve())}/: {', '.join(written)} (this run),"
        f" {latest} (the latest run)"
    )
    bad = report.regressions(result) if result else []  # --check needs the metadata
    if args.check and bad:
        print("make bench: patched exceeds base:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("make bench", main))
