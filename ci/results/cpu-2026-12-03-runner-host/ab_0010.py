"""In one process, v0.5.23 0010's replay-path changes on and off, in turn.

PYTHONPATH=scripts python3 ab_0010.py --tree build/v0.5.23/sglang/python [--blocks N]
[--repeats N] [--sizes BS,BS]: the patched tree's runners (runner_check, CPU,
--host-only: a replay re-runs nothing, times are the thread's CPU time), timed
in blocks, "new" (the tree as it is) and "old" alternating. "old" puts back, on
the same objects, what 0010 took out of each replay: BaseRunner.model_context
overriding the layout on every call; the draft runner's probes called (its
switch True: maybe_detect_nan / maybe_detect_oob read their env switches and
return, as v0.5.23's execute calls them); SGLANG_LOG_DECODE_GRAPH_KEY read per
execute; the replay views made per call (a kept-views dict that keeps nothing:
one SimpleNamespace more per call than v0.5.23's inline slices). Prints JSON:
per mode, per (runner, bs, path) the blocks' execute medians, and per bs the
loop's host µs per EAGLE iteration.
"""

import contextlib
import json
import sys

sys.path.insert(0, "scripts")
from mla_harness import child  # noqa: E402
from mla_harness import runner_check as rc

parser = child.parser(__doc__, device="cpu")
parser.add_argument("--blocks", type=int, default=10)
parser.add_argument("--repeats", type=int, default=40)
parser.add_argument("--sizes", default="1,32")
args = parser.parse_args()
child.enter(args)
from mla_harness import replacements  # noqa: E402
from mla_harness.standin import MLAModel, Setup  # noqa: E402

sizes = tuple(sorted(int(x) for x in args.sizes.split(",")))
kwargs = dict(rc.SETUPS[0][0], max_bs=sizes[-1])
model = MLAModel(num_attention_heads=16, attention_tp_size=1)


class _Forgetful(dict):
    def get(self, key, default=None):
        return default

    def __setitem__(self, key, value):
        pass


with contextlib.ExitStack() as stack:
    stack.enter_context(replacements.cuda_factories_on_cpu(False))
    check = rc.RunnerCheck(Setup(**kwargs, model=model), sizes, "cpu", 0, stack, host_only=True)
    from sglang.srt.environ import envs
    from sglang.srt.model_executor.runner.base_runner import BaseRunner
    from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
    from sglang.srt.runtime_context import get_model

    new_context = BaseRunner.model_context

    def old_context(self):
        return get_model().override(shared_experts=self.model_runner.model.shared_experts_config)

    draft = next(r.runner for r in check.runners if r.name == "EAGLEDraftCudaGraphRunner")
    decode = [r.runner for r in check.runners if r.name == "DecodeCudaGraphRunner"]
    kept = [r._replay_views for r in decode]

    def mode(old: bool):
        BaseRunner.model_context = old_context if old else new_context
        draft._probe_inputs = old
        if old:
            DecodeCudaGraphRunner._log_graph_key = property(
                lambda self: envs.SGLANG_LOG_DECODE_GRAPH_KEY.get()
            )
        else:
            DecodeCudaGraphRunner._log_graph_key = False
        for r, views in zip(decode, kept, strict=True):
            r._replay_views = _Forgetful() if old else views

    for r in decode:  # the instance attribute would hide the class property
        del r._log_graph_key
    out = {"old": [], "new": []}
    for block in range(2 * args.blocks):
        name = ("new", "old")[block % 2] if block // 2 % 2 else ("old", "new")[block % 2]
        mode(name == "old")
        rows = check.time_execute(args.repeats) + check.loop(args.repeats)
        out[name].append(rows)
    mode(False)
    summary = {}
    for name, blocks in out.items():
        per = {}
        for rows in blocks:
            for r in rows:
                if r.get("loop"):
                    key, us = f"loop bs {r['bs']}", r["host_us"]
                else:
                    key, us = f"{r['runner']} bs {r['bs']} {r['path']}", r["execute_us"]
                per.setdefault(key, []).append(us)
        summary[name] = per
    print(json.dumps(summary))
