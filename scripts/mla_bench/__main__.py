"""``make bench``: base and patched trees measured in one run, then compared."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from mla_harness import child
from sglpatch.errors import UserError
from sglpatch.layout import Layout
from sglpatch.trees import tree_paths

from . import config, ladder, report
from .worker import progress


def run_tree(tree: Path, cfg: dict) -> dict:
    """One tree measured in a process of its own (``worker``); its progress
    lines pass through."""
    out = child.exchange("mla_bench.worker", tree, cfg["device"], "--config", cfg, live_stderr=True)
    return json.loads(out)


def main(argv=None) -> int:
    args = config.parser().parse_args(argv)
    import torch

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda but no CUDA device is visible")
    cfg = config.from_args(args, cuda).to_json()
    layout = Layout.create(args.build)
    base_tree, patched_tree = tree_paths(layout.build)
    for name, path in (("base", base_tree), ("patched", patched_tree)):
        if not (path / "sglang" / "__init__.py").is_file():
            raise UserError(f"{name} tree missing at {path}: run `make apply` first")
    trees = [("base", base_tree), ("patched", patched_tree)]
    if args.ladder:
        # Rewritten wherever the series' commits are at hand, so it never lags
        # patches/; a GPU host without them uses the ladder copied with the bundle.
        if (layout.sglang / ".git").exists():
            ladder.prepare(layout)
        elif not (layout.ladder / "index.json").exists():
            raise UserError(
                f"--ladder needs the commits in {layout.sglang} (`make apply`) or a "
                f"{layout.ladder} written by `make bench BENCH_ARGS=--ladder` where they are"
            )
        trees = [("base", base_tree), *ladder.trees(layout, base_tree)]
    runs = {}
    for number, (name, path) in enumerate(trees, 1):
        progress(f"[bench] tree {number}/{len(trees)} {name}: {path}")
        runs[name] = run_tree(path, cfg)
    labels = list(runs)
    result = report.compare(runs[labels[0]], runs[labels[-1]])
    table = report.markdown(result, cfg)
    if args.ladder:
        steps = [
            (labels[i], report.compare(runs[labels[i - 1]], runs[labels[i]]))
            for i in range(1, len(labels))
        ]
        table += "\n\nPer patch (each against the tree before it):\n\n" + report.ladder_markdown(
            steps, cfg
        )
    print(table)
    out_dir = Path(args.out_dir or layout.build / "bench")
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    record = {
        "date": stamp,
        "command": "make bench " + " ".join(argv or sys.argv[1:]),
        "config": cfg,
        "machine": runs[labels[-1]]["machine"],
        "trees": [str(p) for _, p in trees],
        "result": result,
        "runs": runs,
        "table": table,
    }
    for name in (f"bench-{stamp}.json", "latest.json"):
        (out_dir / name).write_text(json.dumps(record, indent=1))
    (out_dir / "latest.md").write_text(table + "\n")
    if not args.no_chart:
        report.chart(result, out_dir / "eagle_metadata.png")
    progress(
        f"[bench] wrote {out_dir}/latest.json, latest.md"
        + ("" if args.no_chart else ", eagle_metadata.png")
    )
    bad = report.regressions(result)
    if args.check and bad:
        print("make bench: patched exceeds base:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("make bench", main))
