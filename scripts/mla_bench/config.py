"""Benchmark settings: defaults follow the seed PRs' setup (Kimi-K2.5, EAGLE3 3/1/4)."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field, fields

from sglpatch.errors import UserError

ACCEPT_LENGTH = 3.94  # seed PR #26241: accept length with EAGLE3 3 steps / topk 1
SEED_TPOT_SAVING_MS = 0.06  # seed PR #26241: mean TPOT 2.47 ms -> 2.41 ms (B200, TP 4)


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


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def parser() -> argparse.ArgumentParser:
    d = BenchConfig()
    p = argparse.ArgumentParser(
        prog="make bench", description="EAGLE metadata benchmark, base vs patched"
    )
    p.add_argument("--build", default="build", help="build directory of `make apply`")
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
    p.add_argument("--page-size", type=int, default=d.page_size, choices=(32, 64))
    p.add_argument(
        "--num-heads", type=int, default=d.num_heads, help="num_attention_heads of the model"
    )
    p.add_argument("--attn-tp-size", type=int, default=d.attn_tp_size, help="attention TP size")
    p.add_argument(
        "--contexts", type=_ints, default=d.contexts, help="context lengths, e.g. 81920,163840"
    )
    p.add_argument("--batch-sizes", type=_ints, default=d.batch_sizes, help="e.g. 1,8,32,64")
    p.add_argument("--cuda-graph-max-bs", type=int, default=d.cuda_graph_max_bs)
    p.add_argument(
        "--memory-max-bs", type=_ints, default=d.memory_max_bs, help="max bs for the memory figure"
    )
    p.add_argument("--memory-context", type=int, default=d.memory_context)
    p.add_argument(
        "--extend-mode",
        choices=("v1", "v2"),
        default=d.extend_mode,
        help="DRAFT_EXTEND or DRAFT_EXTEND_V2",
    )
    p.add_argument(
        "--repeats", type=int, default=None, help="timed calls per figure (default 200 GPU, 3 CPU)"
    )
    p.add_argument(
        "--warmup", type=int, default=None, help="untimed calls first (default 20 GPU, 1 CPU)"
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d.device)
    p.add_argument("--quick", action="store_true", help="small sizes for CPU smoke runs (CI)")
    p.add_argument(
        "--check", action="store_true", help="exit 1 unless patched <= base in launches and memory"
    )
    p.add_argument("--out-dir", default=None, help="default: <build>/bench")
    p.add_argument("--no-chart", action="store_true")
    p.add_argument(
        "--ladder", action="store_true", help="also measure base + each prefix of the series"
    )
    return p


def from_args(args: argparse.Namespace, cuda: bool) -> BenchConfig:
    for name in (
        "steps",
        "draft_tokens",
        "cuda_graph_max_bs",
        "memory_context",
        "num_heads",
        "attn_tp_size",
    ):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be >= 1")
    if max(args.batch_sizes) > args.cuda_graph_max_bs:
        raise UserError("--batch-sizes must not exceed --cuda-graph-max-bs")
    same_name = {f.name for f in fields(BenchConfig)} - {"repeats", "warmup", "device"}
    cfg = BenchConfig(
        **{name: getattr(args, name) for name in same_name},
        repeats=args.repeats or (200 if cuda else 3),
        warmup=args.warmup if args.warmup is not None else (20 if cuda else 1),
        device="cuda" if cuda else "cpu",
    )
    if args.quick:
        cfg.contexts, cfg.batch_sizes, cfg.cuda_graph_max_bs = [4096], [1, 4], 4
        cfg.memory_max_bs, cfg.memory_context = [8], 8192
        cfg.repeats, cfg.warmup = min(cfg.repeats, 2), 0
    return cfg
