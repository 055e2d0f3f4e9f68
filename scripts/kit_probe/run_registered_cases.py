"""Run the case tables of upstream's kit-fix test file on one tree's kit, on CPU or GPU.

    T=build/v0.5.23/sglang/test/registered/attention/unittests/test_runner_prefix_past_page.py
    python scripts/kit_probe/run_registered_cases.py --tree build/v0.5.23/base/python --test-file $T

The test file (the kit-fix patch's ``test_runner_prefix_past_page.py``) skips
without CUDA and its kit entry points default to ``device="cuda"``, so its
test methods do not run here. This imports the file with ``--tree``'s sglang
first on the path and calls the same kit entry points on each entry of its
``MLA_CASES`` and ``DENSE_CASES`` with the same arguments plus ``device``
(``run_mla_eagle_verify_cuda_graph_case(tc, case, topk=1, **shape_kwargs)``,
``run_dense_spec_verify_cuda_graph_case(tc, case, topk=1)``; the split-op
class's ``run_mla_split_op_extend_case(tc, case, breakable=b)`` and
``run_dense_split_op_extend_case``, b False then True), each after the
file's own premise check on the case's fixture
(``contiguous_rewrite_misplaces_prefix``, reported as ``premise``). The test file
can come from another tree than the kit: the kit-fix tree's file on the base
tree's kit is the as-shipped run. Stand-ins: kit_env's (the trtllm_mla
kernel, ``_run_decode_kernel``, by a float32 paged decode; the triton
backends run their real kernels, under TRITON_INTERPRET=1 on CPU) and
replacement 20 (``datasets``, which ``CustomTestCase``'s module imports, served
as an absent module where it is not installed). Prints one JSON line per case.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kit_env  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tree", required=True, help="python/ root whose sglang (and kit) runs")
    p.add_argument("--test-file", required=True)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args()
    cuda = args.device == "cuda"
    kit_env.enter(args.tree, cuda)
    kit_env.install(cuda)
    if importlib.util.find_spec("datasets") is None:
        from mla_harness import replacements

        sys.meta_path.insert(0, replacements._AbsentFinder(["datasets"]))

    import torch
    from sglang.test.kits.attention_unittest.runner_modes import (
        speculative_target_verify_runner as stv,
    )
    from sglang.test.kits.attention_unittest.runner_modes import split_op_runner as so

    spec = importlib.util.spec_from_file_location("kit_fix_test", args.test_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = module.TestSpecVerifyCudaGraphPrefixPastPage
    mla = (stv.run_mla_eagle_verify_cuda_graph_case, module.build_mla_attention_fixture)
    dense = (stv.run_dense_spec_verify_cuda_graph_case, module.build_dense_attention_fixture)
    verify = {"topk": 1}
    # (case, runner, its kit entry point, the fixture builder, its arguments)
    todo = [(c, "verify", *mla, {**verify, **kw}) for c, kw in cls.MLA_CASES]
    todo += [(c, "verify", *dense, verify) for c in cls.DENSE_CASES]
    split = module.TestSplitOpExtendPrefixPastPage
    split_mla = (so.run_mla_split_op_extend_case, module.build_mla_attention_fixture)
    split_dense = (so.run_dense_split_op_extend_case, module.build_dense_attention_fixture)
    for cases, entry in ((split.MLA_CASES, split_mla), (split.DENSE_CASES, split_dense)):
        for case in cases:
            for breakable in (False, True):
                todo.append((case, "split_op", *entry, {"breakable": breakable}))

    tc = unittest.TestCase()
    failures = 0
    for case, runner, run, build, kwargs in todo:
        shape_kwargs = {k: v for k, v in kwargs.items() if k not in ("topk", "breakable")}
        t0 = time.time()
        err = None
        with kit_env.device_ctx(cuda), torch.no_grad():
            fixture = build(tc, case, device=args.device, **shape_kwargs)
            premise = module.contiguous_rewrite_misplaces_prefix(fixture)
        del fixture
        kit_env.CALLS.clear()
        try:
            with kit_env.device_ctx(cuda), torch.no_grad():
                run(tc, case, device=args.device, **kwargs)
        except AssertionError as exc:
            err = " | ".join(line.strip() for line in str(exc).strip().splitlines()[:4])
            kit = [f for f in traceback.extract_tb(exc.__traceback__) if "/kits/" in f.filename]
            err = f"{Path(kit[-1].filename).name}:{kit[-1].lineno}: {err}" if kit else err
            failures += 1
        rec = {
            "case": case.name,
            "runner": runner,
            "breakable": kwargs.get("breakable"),
            "backend": case.backend,
            "prefix_lens": case.prefix_lens,
            "page_size": case.page_size,
            "premise": premise,
            "ok": err is None,
            "trtllm_kernel_calls": len(kit_env.CALLS),
            "s": round(time.time() - t0, 1),
        }
        if err:
            rec["error"] = err
        print(json.dumps(rec), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
