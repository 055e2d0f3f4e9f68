"""Host µs of each top-level statement of the runners' replay methods, unprofiled:
python3 ci/results/h200-2026-12-04l-floor/lines.py TREE, from the repository root
(TREE: the python/ root holding sglang; CUDA, or FLOOR_DEVICE=cpu for a dry run).

Each method below is compiled again from its own source with one
`time.perf_counter()` mark before its first statement and after each of its
top-level statements (the body in try/finally, so a `return` is marked too),
in its module's namespace, and set on its class in place of the original; the
code it runs is otherwise the tree's own. With runner_check's setup 0 at bs 1,
32 and 64, the three runners' `execute` run in back-to-back iterations (as
`--loop`), then as single calls (the GPU synchronized before each). Printed,
per method, size and measure: each statement's median µs (a statement's time
includes the methods it calls, which have rows of their own; a mark costs
about 0.1 µs) and its first source line."""

import __future__
import ast
import inspect
import json
import os
import statistics
import sys
import textwrap
import time

TREE = sys.argv[1]
DEVICE = os.environ.get("FLOOR_DEVICE", "cuda")
sys.path.insert(0, "scripts")

from mla_harness import runner_check  # noqa: E402

SIZES = (1, 32, 64) if DEVICE == "cuda" else (1, 2)
CALLS = 300 if DEVICE == "cuda" else 2

METHODS = [
    (
        "sglang.srt.speculative.eagle_draft_cuda_graph_runner",
        "EAGLEDraftCudaGraphRunner",
        "execute",
    ),
    (
        "sglang.srt.speculative.eagle_draft_cuda_graph_runner",
        "EAGLEDraftCudaGraphRunner",
        "_copy_inputs",
    ),
    (
        "sglang.srt.speculative.eagle_draft_cuda_graph_runner",
        "EAGLEDraftCudaGraphRunner",
        "_replay_graph",
    ),
    (
        "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner",
        "EAGLEDraftExtendCudaGraphRunner",
        "execute",
    ),
    (
        "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner",
        "EAGLEDraftExtendCudaGraphRunner",
        "_copy_inputs",
    ),
    (
        "sglang.srt.model_executor.runner.decode_cuda_graph_runner",
        "DecodeCudaGraphRunner",
        "execute",
    ),
    (
        "sglang.srt.model_executor.runner.decode_cuda_graph_runner",
        "DecodeCudaGraphRunner",
        "load_batch",
    ),
    (
        "sglang.srt.model_executor.runner.decode_cuda_graph_runner",
        "DecodeCudaGraphRunner",
        "_init_replay_attn_metadata",
    ),
    (
        "sglang.srt.model_executor.runner.decode_cuda_graph_runner",
        "DecodeCudaGraphRunner",
        "_init_replay_attn_metadata_from_view",
    ),
    (
        "sglang.srt.model_executor.cuda_graph_buffer_registry",
        "CudaGraphBufferRegistry",
        "fill_from",
    ),
    (
        "sglang.srt.model_executor.runner_backend.full_cuda_graph_backend",
        "FullCudaGraphBackend",
        "replay",
    ),
    ("sglang.srt.model_executor.runner_utils.buffers", "RowsCopy", "__call__"),
    ("sglang.srt.model_executor.runner_utils.buffers", None, "copy_into_rows"),
]

RECORDS = {}  # "Class.method" -> list of mark lists
SOURCE = {}  # "Class.method" -> first line of each top-level statement


def _record(name, marks):
    marks.append(time.perf_counter())
    RECORDS.setdefault(name, []).append(marks)


def instrument(module_name, cls_name, meth):
    import importlib

    module = importlib.import_module(module_name)
    owner = getattr(module, cls_name) if cls_name else module
    fn = owner.__dict__[meth] if cls_name else getattr(module, meth)
    src = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(src)
    fdef = tree.body[0]
    fdef.decorator_list = []
    name = f"{cls_name or module_name.rsplit('.', 1)[1]}.{meth}"
    lines = src.splitlines()
    SOURCE[name] = [lines[s.lineno - 1].strip()[:90] for s in fdef.body]
    mark = ast.parse("_lt_marks.append(_lt_pc())").body[0]
    body = []
    for stmt in fdef.body:
        body += [stmt, mark]
    wrapped = ast.parse(
        f"def _w():\n    _lt_marks = [_lt_pc()]\n    try:\n        pass\n    finally:\n"
        f"        _lt_record({name!r}, _lt_marks)\n"
    ).body[0]
    first, tryblock = wrapped.body
    tryblock.body = body
    fdef.body = [first, tryblock]
    ast.fix_missing_locations(tree)
    namespace = dict(vars(module))
    namespace.update(_lt_pc=time.perf_counter, _lt_record=_record)
    # As the module's own `from __future__ import annotations` has it.
    flags = __future__.annotations.compiler_flag
    exec(compile(tree, inspect.getsourcefile(fn), "exec", flags, True), namespace)
    new = namespace[fdef.name]
    if cls_name:
        setattr(owner, meth, new)
    else:
        # Module-level function: its callers read it from their own modules.
        for mod in list(sys.modules.values()):
            if getattr(mod, meth, None) is fn:
                setattr(mod, meth, new)


def main_loop(self, iterations, warmup=3):
    import torch

    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    order = list(self.runners)

    def call_for(r, bs):
        _, call = r.ready(bs)

        def run(r=r, call=call):
            if r.path == "execute":  # VerifyRunner.ready: keep the plain execute path
                r.path = "load_batch, execute"
            return call()

        return run

    report = {}
    for bs in SIZES:
        for measure in ("loop", "single"):
            batches = [[call_for(r, bs) for r in order] for _ in range(CALLS + 20)]
            sync()
            RECORDS.clear()
            for i, calls in enumerate(batches):
                if i == 20:
                    RECORDS.clear()
                for call in calls:
                    if measure == "single":
                        sync()
                    call()
            sync()
            rows = {}
            for name, runs in RECORDS.items():
                n = len(SOURCE[name])
                per = [[] for _ in range(n)]
                for marks in runs:
                    for j in range(min(n, len(marks) - 1)):
                        per[j].append((marks[j + 1] - marks[j]) * 1e6)
                whole = statistics.median((m[-1] - m[0]) * 1e6 for m in runs)
                rows[name] = {
                    "calls": len(runs),
                    "whole_us": round(whole, 2),
                    "statements": [
                        [round(statistics.median(p), 2), len(p), SOURCE[name][j]]
                        for j, p in enumerate(per)
                        if p
                    ],
                }
            report[f"{measure} bs {bs}"] = rows
    print("LINES " + json.dumps(report))
    return []


def main():
    from mla_harness import replacements  # noqa: F401  (runner_check sets up the tree)

    real_enter = runner_check.child.enter

    def enter(args):
        real_enter(args)
        for spec in METHODS:
            instrument(*spec)

    runner_check.child.enter = enter
    runner_check.RunnerCheck.loop = main_loop
    runner_check.RunnerCheck.time_execute = lambda self, repeats, warmup=3: []
    return runner_check.main(
        [
            "--tree",
            TREE,
            "--device",
            DEVICE,
            "--time",
            "1",
            "--loop",
            "1",
            "--sizes",
            ",".join(map(str, SIZES)),
        ]
    )


sys.exit(main())
