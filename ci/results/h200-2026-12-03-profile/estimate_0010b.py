"""estimate_0010b.py [DIR]: what 0010's second round takes out of each runner's
execute, estimated from this H200 profile as the first round estimated:
each removed function's cumulative profiled µs per execute call, times the
runner's unprofiled median over its profiled total (the profiler's inflation,
per runner and size; verify: the mean of its two paths).

Removed: the draft runner's probes (maybe_detect_nan, maybe_detect_oob);
model_context and its override (a no-op where an equal layout is selected);
build_replay_fb_view's buffer slices (an upper bound: the whole call, whose
SimpleNamespace stays); the section timers' own frames (runner_check.py
call, self time only: a lower bound of what they cost).
"""

import json
import os
import pstats
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
CALLS = 54  # profiled execute calls per runner and size (README)
FILES = {
    "draft": "EAGLEDraftCudaGraphRunner",
    "verify": "DecodeCudaGraphRunner_target_verify",
    "draft extend": "EAGLEDraftExtendCudaGraphRunner",
    "decode": "DecodeCudaGraphRunner_decode",
}
LABELS = {
    "draft": "EAGLEDraftCudaGraphRunner",
    "verify": "DecodeCudaGraphRunner (target verify)",
    "draft extend": "EAGLEDraftExtendCudaGraphRunner",
    "decode": "DecodeCudaGraphRunner (decode)",
}
rows = json.load(open(os.path.join(DIR, "time-patched-noprof.json")))
median = {(r["runner"], r["bs"], r["path"]): r["execute_us"] for r in rows if not r.get("loop")}
for bs in (1, 32):
    print(f"bs {bs}: estimated real µs per execute call")
    for name, stem in FILES.items():
        stats = pstats.Stats(os.path.join(DIR, f"bs{bs}", f"{stem}.prof")).stats
        profiled = sum(v[2] for v in stats.values()) / CALLS * 1e6
        label = LABELS[name]
        paths = [p for (r, b, p) in median if r == label and b == bs]
        real = sum(median[label, bs, p] for p in paths) / len(paths)
        scale = real / profiled

        def cum(file, func, own=False, stats=stats, scale=scale):
            keys = [k for k in stats if k[0].endswith(file) and k[2] == func]
            return sum(stats[k][2 if own else 3] for k in keys) / CALLS * 1e6 * scale

        parts = {
            "probes": cum("async_probe.py", "maybe_detect_nan")
            + cum("async_probe.py", "maybe_detect_oob"),
            "model_context": cum("base_runner.py", "model_context")
            + cum("runtime_context.py", "override"),
            "fb_view (bound)": cum("decode_cuda_graph_runner.py", "build_replay_fb_view"),
            "timers (self)": cum("runner_check.py", "call", own=True),
        }
        cells = "  ".join(f"{k} {v:5.1f}" for k, v in parts.items())
        print(f"  {name:13s} execute {real:6.1f} (profiled {profiled:6.1f}): {cells}")
