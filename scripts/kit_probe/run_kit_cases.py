"""Run upstream's attention-kit trtllm_mla cases on one v0.5.23 tree.

    python scripts/kit_probe/run_kit_cases.py --tree /work/main/build/v0.5.23/base/python \
        [--only verify|decode] [--case NAME] [--fixed-kit]

Shapes as upstream's registered test_trtllm_mla.py (page 64, 4 heads,
kv_lora_rank 512, rope 64, hidden 1024, max context 256, topk 1), dtype
float16 (the kit's default), ``--device`` cpu (default) or cuda (real CUDA
graphs), ``_run_decode_kernel`` replaced by a float32 paged MLA decode
(kit_env.paged_decode). ``--fixed-kit``: the kit's ``prepare_mla_runner_inputs``
is made to write the prefix KV where the forward batch's ``req_to_token`` says
it is (see kit_fix.py). Prints one JSON line per case.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kit_env  # noqa: E402

SHAPE = dict(kv_lora_rank=512, qk_rope_head_dim=64, hidden_size=1024, max_context_len=256)

VERIFY = [  # (prefix_lens, draft tokens per request)
    ((4, 7), 3),
    ((4,), 3),
    ((4, 7), 2),
    ((60, 63, 64), 4),
    ((60,), 2),
    ((62,), 2),  # seq 64: last draft at the page's end
    ((63,), 2),  # drafts straddle the page edge
    ((64,), 2),  # drafts open page 1
    ((65,), 2),  # first prefix token in page 1
    ((100,), 1),
    ((100,), 2),
    ((100,), 3),
    ((100,), 4),
    ((100, 100), 2),
    ((130,), 2),  # three pages
    ((190, 30), 3),
]
DECODE = [(61, 62, 63), (1, 64, 65), (127, 128, 129, 130), (100,), (200, 10)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", required=True)
    p.add_argument("--only", choices=("verify", "decode"))
    p.add_argument("--case", action="append", help="e.g. verify:100:2 or decode:100")
    p.add_argument("--fixed-kit", action="store_true")
    p.add_argument("--layout", default=None, help="loc_layout for build_mla_attention_fixture")
    p.add_argument(
        "--name",
        default=None,
        help="case name (the kit seeds the page shuffle with 3090 + len(name)); default:"
        " upstream's registered names",
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args()
    cuda = args.device == "cuda"
    kit_env.enter(args.tree, cuda)
    kit_env.install(cuda)

    import unittest

    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.test.kits.attention_unittest.attention_methods import mla_attention as mla
    from sglang.test.kits.attention_unittest.runner_modes import (
        speculative_target_verify_runner as stv,
    )
    from sglang.test.kits.attention_unittest.runner_modes.cuda_graph_decode_runner import (
        run_mla_cuda_graph_decode_case,
    )

    if args.fixed_kit:
        import kit_fix

        kit_fix.apply()
    if args.layout:
        real = mla.build_mla_attention_fixture

        def build(*a, **k):
            k.setdefault("loc_layout", args.layout)
            return real(*a, **k)

        mla.build_mla_attention_fixture = build
        stv.build_mla_attention_fixture = build
        import sglang.test.kits.attention_unittest.runner_modes.cuda_graph_decode_runner as cgd

        cgd.build_mla_attention_fixture = build

    tc = unittest.TestCase()
    todo = []
    if args.case:
        for c in args.case:
            kind, *nums = c.split(":")
            if kind == "verify":
                todo.append(("verify", tuple(int(x) for x in nums[0].split(",")), int(nums[1])))
            else:
                todo.append(("decode", tuple(int(x) for x in nums[0].split(",")), None))
    else:
        if args.only in (None, "decode"):
            todo += [("decode", d, None) for d in DECODE]
        if args.only in (None, "verify"):
            todo += [("verify", pl, n) for pl, n in VERIFY]

    failures = 0
    for kind, prefix_lens, n in todo:
        kit_env.CALLS.clear()
        t0 = time.time()
        # Upstream's registered case names (their length seeds the page shuffle).
        verify = kind == "verify"
        default_name = (
            "runner_cuda_graph_eagle_verify_trtllm_mla_chain"
            if verify
            else "runner_cuda_graph_decode_trtllm_mla_page_boundary"
        )
        case = mla.MLAAttentionCase(
            name=args.name or default_name,
            backend="trtllm_mla",
            forward_mode=ForwardMode.TARGET_VERIFY if verify else ForwardMode.DECODE,
            num_heads=4,
            page_size=64,
            prefix_lens=prefix_lens,
            **({"extend_lens": (n,) * len(prefix_lens)} if verify else {}),
        )
        if verify:
            run_case = partial(stv.run_mla_eagle_verify_cuda_graph_case, topk=1)
        else:
            run_case = run_mla_cuda_graph_decode_case
        fn = partial(run_case, tc, case, device=args.device, **SHAPE)
        err = None
        try:
            with kit_env.device_ctx(cuda), torch.no_grad():
                fn()
        except AssertionError as exc:
            err = str(exc).strip().splitlines()
            err = " | ".join(line.strip() for line in err[:4])
            failures += 1
        first = kit_env.CALLS[0] if kit_env.CALLS else None
        rec = {
            "kind": kind,
            "prefix_lens": prefix_lens,
            "draft_tokens": n,
            "ok": err is None,
            "calls": len(kit_env.CALLS),
            "s": round(time.time() - t0, 1),
        }
        if first is not None:
            w = -(-int(first["seq_lens"].max()) // 64)
            rec["first_call"] = {
                "table": first["table"][:, : w + 1].tolist(),
                "seq_lens": first["seq_lens"].tolist(),
                "max_seq_len": first["max_seq_len"],
                "q_shape": first["q_shape"],
            }
        if err:
            rec["error"] = err
        print(json.dumps(rec), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
