"""Host µs of each top-level statement of 0014's kept replays, unprofiled:
python3 ci/results/h100-2026-12-05j-kept-lines/kept_lines.py TREE, from the
repository root (TREE: the python/ root holding sglang; CUDA, or
FLOOR_DEVICE=cpu for a dry run).

This runs ../h200-2026-12-04l-floor/lines.py as it is, with changes made
from outside it: the methods it instruments are KEPT below (the kept
replays' methods and some they call), and every verify is planned ahead
(``plan_always``), as v0.5.23's EAGLE worker plans it. Each single call
synchronizes the GPU before each runner's call (verify: before its
``load_batch``). KEPT_SIZES="64,32,1" measures the sizes in that order
(lines.py: 1, 32, 64)."""

import os
import runpy
import sys

sys.path.insert(0, "scripts")
from mla_harness import runner_check  # noqa: E402

DRAFT = "sglang.srt.speculative.eagle_draft_cuda_graph_runner"
EXTEND = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner"
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
KEPT = [
    (DRAFT, "EAGLEDraftCudaGraphRunner", "execute"),
    (DRAFT, "EAGLEDraftCudaGraphRunner", "_replay_kept_draft"),
    (EXTEND, "EAGLEDraftExtendCudaGraphRunner", "execute"),
    (EXTEND, "EAGLEDraftExtendCudaGraphRunner", "_replay_kept_extend"),
    (EXTEND, "EAGLEDraftExtendCudaGraphRunner", "_replay_output"),
    (DECODE, "DecodeCudaGraphRunner", "load_batch"),
    (DECODE, "DecodeCudaGraphRunner", "_load_kept"),
    (DECODE, "DecodeCudaGraphRunner", "execute"),
    (DECODE, "DecodeCudaGraphRunner", "_replay_kept"),
    (DECODE, "DecodeCudaGraphRunner", "_raw_rows"),
    ("sglang.srt.model_executor.cuda_graph_buffer_registry", "CudaGraphBufferRegistry", "fill_from"),
    ("sglang.srt.model_executor.runner_utils.buffers", "RowsCopy", "__call__"),
]

real_enter = runner_check.child.enter


def enter(args):
    real_enter(args)
    # Called from lines.py's own enter, which instruments its METHODS next.
    lines = sys._getframe(1).f_globals
    lines["METHODS"] = KEPT
    if os.environ.get("KEPT_SIZES"):
        lines["SIZES"] = tuple(int(x) for x in os.environ["KEPT_SIZES"].split(","))
    lines_loop = runner_check.RunnerCheck.loop

    def loop(self, iterations, warmup=3):
        for r in self.runners:
            if isinstance(r, runner_check.VerifyRunner):
                r.plan_always = True
        return lines_loop(self, iterations, warmup)

    runner_check.RunnerCheck.loop = loop


runner_check.child.enter = enter
runpy.run_path("ci/results/h200-2026-12-04l-floor/lines.py", run_name="__main__")
