"""Benchmark settings: defaults follow the seed PRs' setup (Kimi-K2.5, EAGLE3 3/1/4)."""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict, dataclass, field, fields

from sglpatch.errors import UserError

ACCEPT_LENGTH = 3.94  # seed PR #26241: accept length with EAGLE3 3 steps / topk 1
SEED_TPOT_SAVING_MS = 0.06  # seed PR #26241: mean TPOT 2.47 ms -> 2.41 ms (B200, TP 4)
USAGE = 'make bench BENCH_ARGS="[options]"  (or: PYTHONPATH=scripts python -m mla_bench [options])'


@dataclass
class BenchConfig:
    steps: int = 3
    draft_tokens: int = 4
    topk: int = 1
    page_size: int = 64
    # Kimi-K2.5 / DeepSeek-V3 attention: 64 query heads per rank (TP 4 with DP
    # attention, i.e. attention TP size 1); sizes the padded-query buffers.
    num_heads: int = 64
    attn_tp_size: int = 1
    # Decode context parallelism (v0.5.23): the group's size, measured on rank 0
    # (only the group's size and rank are set: no communicator runs here).
    dcp_size: int = 1
    contexts: list[int] = field(default_factory=lambda: [80 * 1024, 160 * 1024])
    batch_sizes: list[int] = field(default_factory=lambda: [1, 8, 32, 64])
    cuda_graph_max_bs: int = 64
    memory_max_bs: list[int] = field(default_factory=lambda: [64, 256])
    memory_context: int = 160 * 1024
    extend_mode: str = "v1"
    repeats: int = 200
    warmup: int = 20
    device: str = "auto"

    def to_json(self) -> dict:
        return asdict(self)


# The sizes of a run. "full" is the seed PR's setup (the README's GPU tables);
# "quick" is what a CPU, where the Triton interpreter runs every kernel, gets
# through in seconds. Without --full or --quick: full where CUDA is visible,
# quick on CPU. A flag given explicitly wins over its preset's value; repeats
# and warmup are (CUDA, CPU).
PRESETS = {
    "full": {
        "contexts": [80 * 1024, 160 * 1024],
        "batch_sizes": [1, 8, 32, 64],
        "cuda_graph_max_bs": 64,
        "memory_max_bs": [64, 256],
        "memory_context": 160 * 1024,
        "repeats": (200, 3),
        "warmup": (20, 1),
    },
    "quick": {
        "contexts": [4096],
        "batch_sizes": [1, 4],
        "cuda_graph_max_bs": 4,
        "memory_max_bs": [8],
        "memory_context": 8192,
        "repeats": (2, 2),
        "warmup": (0, 0),
    },
}
SIZED = tuple(PRESETS["full"])
# What the CPU runs take on a 2-core machine (measured: scripts/mla_bench/README.md).
CPU_TIME = {"full": "about 32 min", "quick": "about 24 s"}


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _shown(value) -> str:
    """A preset value as it would be typed: 1,8,32 / 64 / 200 with CUDA, 3 on CPU."""
    if isinstance(value, tuple):
        return str(value[0]) if value[0] == value[1] else f"{value[0]} with CUDA, {value[1]} on CPU"
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _preset_default(name: str) -> str:
    """``(default: --full 81920,163840, --quick 4096)`` for a sized flag's help."""
    full, quick = (_shown(PRESETS[p][name]) for p in ("full", "quick"))
    return f"(default: --full {full}; --quick {quick})"


def quick_summary() -> str:
    """What --quick sets, in words."""
    q = PRESETS["quick"]
    return (
        f"contexts {_shown(q['contexts'])}, batch sizes {_shown(q['batch_sizes'])}, CUDA-graph"
        f" max bs {q['cuda_graph_max_bs']}, memory at max bs {_shown(q['memory_max_bs'])} and"
        f" context {q['memory_context']}, {_shown(q['repeats'])} repeats,"
        f" {_shown(q['warmup'])} warmup"
    )


class _Parser(argparse.ArgumentParser):
    """A parser whose errors are one-line UserErrors (no usage dump), naming the help."""

    def error(self, message: str) -> None:  # type: ignore[override]
        made = "SGLPATCH_MK_BENCH_ARGS" in os.environ
        help_flag = 'BENCH_ARGS="--help"' if made else "--help"
        raise UserError(f"{message} ({help_flag} lists the flags)")


class _Help(argparse.HelpFormatter):
    """Help that shows the default of every flag that takes a value (switches
    are off unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.nargs == 0 or "(default" in text:
            return text
        return f"{text} (default: %(default)s)"


def parser() -> argparse.ArgumentParser:
    d = BenchConfig()
    p = _Parser(
        prog="make bench",
        usage=USAGE,
        description=(
            "EAGLE metadata benchmark, base vs patched. Without --full or --quick it runs the"
            " seed PR's sizes where CUDA is visible and --quick on CPU, where --full takes"
            f" {CPU_TIME['full']} on 2 cores (--quick: {CPU_TIME['quick']})."
        ),
        formatter_class=_Help,
    )
    p.add_argument(
        "--build",
        default="build",
        help="build root of `make apply`: a base's trees are <build>/<base>/base and"
        " <build>/<base>/sglang",
    )
    p.add_argument(
        "--base", default=None, help="the base whose trees to measure (default: the default base)"
    )
    p.add_argument("--steps", type=int, default=d.steps, help="speculative_num_steps")
    p.add_argument(
        "--draft-tokens", type=int, default=d.draft_tokens, help="speculative_num_draft_tokens"
    )
    p.add_argument(
        "--topk",
        type=int,
        default=d.topk,
        choices=(1,),
        help="speculative_eagle_topk (trtllm_mla: 1)",
    )
    p.add_argument("--page-size", type=int, default=d.page_size, choices=(32, 64), help="page size")
    p.add_argument(
        "--num-heads", type=int, default=d.num_heads, help="num_attention_heads of the model"
    )
    p.add_argument("--attn-tp-size", type=int, default=d.attn_tp_size, help="attention TP size")
    p.add_argument(
        "--dcp-size",
        type=int,
        default=d.dcp_size,
        choices=(1, 2, 4, 8),
        help="decode context parallel size (v0.5.23; rank 0 is measured)",
    )
    sized = {
        "contexts": ("--contexts", _ints, "context lengths, comma-separated"),
        "batch_sizes": ("--batch-sizes", _ints, "batch sizes, comma-separated"),
        "cuda_graph_max_bs": ("--cuda-graph-max-bs", int, "largest captured batch size"),
        "memory_max_bs": ("--memory-max-bs", _ints, "max bs of the graph-state memory figure"),
        "memory_context": ("--memory-context", int, "context of the memory figure"),
        "repeats": ("--repeats", int, "timed calls per figure (median)"),
        "warmup": ("--warmup", int, "untimed calls first"),
    }
    for name, (flag, kind, text) in sized.items():
        p.add_argument(flag, type=kind, default=None, help=f"{text} {_preset_default(name)}")
    p.add_argument(
        "--extend-mode",
        choices=("v1", "v2"),
        default=None,
        help="DRAFT_EXTEND or DRAFT_EXTEND_V2 (default: v1 where the base has it, else v2)",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d.device, help="device")
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--full",
        action="store_true",
        help=f"the seed PR's sizes (default with CUDA; CPU: {CPU_TIME['full']})",
    )
    size.add_argument(
        "--quick",
        action="store_true",
        help=f"small sizes (default on CPU; CI): {quick_summary()}",
    )
    p.add_argument(
        "--check", action="store_true", help="exit 1 unless patched <= base in launches and memory"
    )
    p.add_argument("--out-dir", default=None, help="results folder (default: <build>/<base>/bench)")
    p.add_argument("--no-chart", action="store_true", help="write no PNG chart")
    p.add_argument(
        "--ladder",
        action="store_true",
        help="also measure base + each prefix of the series (trees in <build>/<base>/ladder)",
    )
    p.add_argument(
        "--runners",
        action="store_true",
        help="also time the host side of v0.5.23's real graph runners' execute, on"
        " runner_check's own setups (v0.5.23; GPU)",
    )
    p.add_argument(
        "--without-last",
        action="store_true",
        help="--runners: also time the patched tree less the series' last pull request"
        " (the patches the last of patches/<base>/prs/ lists, else the last patch; a"
        " third tree, <build>/<base>/without-last)",
    )
    p.add_argument(
        "--runner-loop",
        type=int,
        default=0,
        metavar="N",
        help="--runners: also N back-to-back EAGLE iterations per size and round: host µs"
        " per iteration, and the GPU's time between its graphs",
    )
    p.add_argument(
        "--runner-batch-sizes",
        type=_ints,
        default=None,
        metavar="BS,BS",
        help="--runners: capture these batch sizes in runner_check's first setup (page 64,"
        " context 2K) instead of its own setups (default: its setups, bs 1-4)",
    )
    p.add_argument(
        "--runner-rounds",
        type=int,
        default=6,
        metavar="N",
        help="--runners: processes per tree, base and patched alternating (default: 6)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="--runners: keep the processes an unfinished run of the same settings left in"
        " <out-dir>/runner-rounds and run only the missing ones",
    )
    p.add_argument(
        "--runners-only",
        action="store_true",
        help="--runners without the metadata benchmark (implies --runners; no chart)",
    )
    return p


def preset(args: argparse.Namespace, cuda: bool) -> str:
    """The preset a run uses: --full or --quick, else by device."""
    if args.full or args.quick:
        return "full" if args.full else "quick"
    return "full" if cuda else "quick"


def from_args(args: argparse.Namespace, cuda: bool) -> BenchConfig:
    """The run's settings, checked; ``--runners-only`` sets ``args.runners``."""
    if args.runners_only:
        if args.ladder or args.check:
            raise UserError("--runners-only measures no metadata, which --ladder and --check need")
        args.runners = True
    runner_flags = (args.without_last, args.runner_loop, args.runner_batch_sizes, args.resume)
    if any(runner_flags) and not args.runners:
        raise UserError(
            "--without-last, --runner-loop, --runner-batch-sizes and --resume go with --runners"
        )
    if args.runner_rounds < 1:
        raise UserError("--runner-rounds must be >= 1")
    if args.runner_loop < 0:
        raise UserError("--runner-loop must be >= 0")
    if args.runner_batch_sizes is not None and (
        not args.runner_batch_sizes or min(args.runner_batch_sizes) < 1
    ):
        raise UserError("--runner-batch-sizes needs batch sizes >= 1")
    if args.runners and not cuda:
        raise UserError("--runners times real CUDA graphs: it needs a GPU")
    sizes = {}
    for name, value in PRESETS[preset(args, cuda)].items():
        given = getattr(args, name)
        if given is not None:
            sizes[name] = given
        else:
            sizes[name] = value[0 if cuda else 1] if isinstance(value, tuple) else value
    for name in ("steps", "draft_tokens", "num_heads", "attn_tp_size"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("cuda_graph_max_bs", "memory_context", "repeats"):
        if sizes[name] < 1:
            raise UserError(f"--{name.replace('_', '-')} must be >= 1")
    if sizes["warmup"] < 0:
        raise UserError("--warmup must be >= 0")
    if not sizes["contexts"] or not sizes["batch_sizes"] or not sizes["memory_max_bs"]:
        raise UserError("--contexts, --batch-sizes and --memory-max-bs need at least one value")
    if max(sizes["batch_sizes"]) > sizes["cuda_graph_max_bs"]:
        raise UserError("--batch-sizes must not exceed --cuda-graph-max-bs")
    same_name = {f.name for f in fields(BenchConfig)} - set(SIZED) - {"device"}
    return BenchConfig(
        **{name: getattr(args, name) for name in same_name},
        **sizes,
        device="cuda" if cuda else "cpu",
    )
