"""plan.py with one of the layers layers.py keeps: KEEP=launch or KEEP=copies
python3 ci/results/h200-2026-12-04m-plan/attribute.py TREE ROUNDS, from the
repository root (TREE: the queue's python/ root; CUDA, or FLOOR_DEVICE=cpu for a
dry run without graphs).

KEEP=launch: the kept replays launch through the graph backend's `replay`
under `model_context` and `device_timer_ctx` (as `execute` and layers.py do),
their copies as in plan.py. KEEP=copies: they copy through the draft runners'
`_copy_inputs` and verify's `fill_from` (as layers.py), and launch as in
plan.py. Printed lines start with KEEP=<value>.

Not a patch: `plan_draft`, `plan_verify` and `plan_extend` below are what each
runner's `execute` does for a batch that needs none of its modes (no padding,
no DP gather, LoRA, TBO, pdmux, ragged or early verify metadata, mrope, DSA,
rejection sampling, DeepEP, probes, pipeline proxies: each is checked once,
per runner, before any is used), with what depends only on the captured size
kept per size: the grouped copy and its rows, the buffers' leading-row views,
the graph key, the graph and its output, the backend's read-ends. Per call
they read the batch's tensors, copy, call the backend's metadata prep and
launch the graph, as `execute` does. runner_check's setup 0 builds the three
runners at bs 1, 32 and 64. Per size: first each runner's plan and its
`execute` run on the same batch, the plan first, and every buffer row they
wrote and every output are compared (equal, or the script stops); then, in
`ROUNDS` rounds, 40 single calls per runner alternating `execute` and the
plan on fresh batches (the GPU synchronized before each call), and 43
back-to-back iterations of each. Printed: per size and measure, the rounds'
medians of host µs per runner and per iteration."""

import contextlib
import dataclasses
import json
import os
import statistics
import sys
import time
from types import SimpleNamespace

TREE, ROUNDS = sys.argv[1], int(sys.argv[2])
DEVICE = os.environ.get("FLOOR_DEVICE", "cuda")
KEEP = os.environ["KEEP"]
assert KEEP in ("launch", "copies"), KEEP
sys.path.insert(0, "scripts")

from mla_harness import runner_check  # noqa: E402

SIZES = (1, 32, 64) if DEVICE == "cuda" else (1, 2)
CALLS = 40 if DEVICE == "cuda" else 2


class Plans:
    """Per runner, what its replay keeps per captured size."""

    def __init__(self, runner):
        self.runner = runner
        self.sizes = {}


def timer(r, category):
    """device_timer_ctx as execute enters it (KEEP=launch); nothing otherwise."""
    if KEEP != "launch":
        return contextlib.nullcontext()
    from sglang.srt.utils.device_timer import device_timer_ctx

    return device_timer_ctx(r.model_runner.device_timer, category)


def launcher(r, key):
    """The graph's launch: its CUDAGraph replayed and its output; on CPU (no
    graphs) the harness's eager re-run through the backend."""
    if DEVICE != "cuda" or KEEP == "launch":
        return lambda fb: r.backend.replay(key, fb)
    graph, out = r.backend._graphs[key], r.backend._outputs[key]

    def launch(fb):
        graph.replay()
        return out

    return launch


def check_draft(r):
    from sglang.srt.runtime_context import get_spec

    b = r.buffers
    assert not r.require_mlp_tp_gather and not r.require_gathered_buffer
    assert not r._probe_inputs and not r.model_runner.model_config.model_is_mrope
    assert b.draft_probs is None and b.dsa_seed_topk is None
    assert not get_spec().speculative_use_rejection_sampling
    assert r.deepep_adapter._captured_deepep_mode is None


def plan_draft(p, fb):
    r = p.runner
    raw_bs = fb.batch_size
    s = p.sizes.get(raw_bs)
    if s is None:
        assert r._pad_to_bucket(raw_bs, r.capture_bs) == raw_bs
        b = r.buffers
        names = (
            "seq_lens",
            "out_cache_loc",
            "positions",
            "topk_p",
            "topk_index",
            "req_pool_indices",
        )
        copy = r._input_copies[names]
        n = raw_bs * r.captured_req_width
        key = r._make_graph_key(raw_bs, variant_label=None)
        s = p.sizes[raw_bs] = SimpleNamespace(
            copy=copy,
            rows=(raw_bs, n * r.speculative_num_steps, n, raw_bs, raw_bs, raw_bs),
            hidden=b.hidden_states[:raw_bs] if b.hidden_states is not None else None,
            seq_cpu=b.seq_lens_cpu[:raw_bs],
            launch=launcher(r, key),
        )
    spec = fb.spec_info
    assert fb.rids_int is None and fb.bootstrap_room_ids_int is None and spec.draft_probs is None
    if KEEP == "copies":
        r._copy_inputs(fb, raw_bs, raw_bs * r.captured_req_width)
    else:
        s.copy(
            [
                fb.seq_lens,
                fb.out_cache_loc,
                fb.positions,
                spec.topk_p,
                spec.topk_index,
                fb.req_pool_indices,
            ],
            s.rows,
        )
    if s.hidden is not None and spec.hidden_states is not None:
        s.hidden.copy_(spec.hidden_states)
    if fb.seq_lens_cpu is not None:
        s.seq_cpu.copy_(fb.seq_lens_cpu)
        fb.seq_lens_cpu = s.seq_cpu
    r.draft_attn_backend.init_forward_metadata_out_graph(SimpleNamespace(**vars(fb), num_padding=0))
    r.raw_bs = r.bs = raw_bs
    with timer(r, "eagle_draft"), r.model_context():
        return s.launch(fb)


def check_verify(r):
    assert not r.ragged_verify_mode and not r.require_mlp_tp_gather
    assert not r.enable_two_batch_overlap and not r.enable_pdmux
    assert r.model_runner.lora_manager is None and r.model_runner.hisparse_coordinator is None
    assert r._early_verify_metadata is None and r.attention_graph_variants is None
    assert r.dllm_input_preparation is None and not r.dllm_uses_input_embeds
    assert r.buffers.num_token_non_padded is None or True
    assert r._metadata_glue is None or r._metadata_glue.disabled
    assert not r._skips_prefilled_inputs and not r.is_dllm
    assert r.deepep_adapter._captured_deepep_mode is None


def plan_verify(p, fb):
    r = p.runner
    raw_bs = fb.batch_size
    s = p.sizes.get(raw_bs)
    w = r.captured_req_width
    if s is None:
        assert r._pad_to_bucket(raw_bs, r.capture_bs) == raw_bs
        reg = r.buffer_registry
        plan = reg._plan or reg._fill_plan()
        names, rows = [], []
        for slot in plan.copied:
            assert slot.source_fn is None
            if getattr(fb, slot.name, None) is None:
                continue
            names.append(slot.name)
            rows.append(slot._raw_n(raw_bs, raw_bs * w))
        copies = reg._fill_copies[tuple(names)]
        key = r._make_graph_key(raw_bs, None, r._resolve_lora_variant(fb), None)
        s = p.sizes[raw_bs] = SimpleNamespace(
            names=names,
            gpu_index=copies.gpu_index,
            gpu=copies.gpu,
            gpu_rows=tuple(rows[i] for i in copies.gpu_index),
            cpu=list(
                zip(copies.cpu.views(tuple(rows[i] for i in copies.cpu_index)), copies.cpu_index)
            )
            if copies.cpu_index
            else [],
            key=key,
            launch=launcher(r, key),
            ends=r._resolve_shared_read_ends(r._replay_attn_backend(), fb.forward_mode),
        )
        from sglang.srt.model_executor.cuda_graph_buffer_registry import FillContext

        # The computed slots' hooks run as fill_from runs them, on a context
        # kept per size (it holds only the sizes).
        s.post_fill = [(slot.post_fill, slot.buffer) for slot in plan.post_fill]
        s.ctx = FillContext(
            raw_bs=raw_bs,
            padded_bs=raw_bs,
            raw_num_tokens=raw_bs * w,
            padded_num_tokens=raw_bs * w,
            pp_proxy_tensors=None,
        )
    assert fb.needs_forward_metadata_init()
    if KEEP == "copies":
        r._validate_capture_hidden_mode(fb)
        n = raw_bs * w
        r.buffer_registry.fill_from(
            fb, raw_bs=raw_bs, padded_bs=raw_bs, raw_num_tokens=n, padded_num_tokens=n
        )
    else:
        srcs = [getattr(fb, name) for name in s.names]
        s.gpu([srcs[i] for i in s.gpu_index], s.gpu_rows)
        for dst, i in s.cpu:
            dst.copy_(srcs[i])
        for hook, buffer in s.post_fill:
            hook(buffer, fb, s.ctx)
    r._init_replay_attn_metadata_from_view(
        fb, raw_bs=raw_bs, bs=raw_bs, num_tokens=raw_bs * w, glue_key=None, attention_variant=None
    )
    r.raw_bs, r.raw_num_token, r.bs = raw_bs, raw_bs * w, raw_bs
    r._replay_graph_key = s.key
    from sglang.srt.layers.attention.base_attn_backend import SharedReadEnds

    with r.model_context(), timer(r, "target_verify"):
        if s.ends is SharedReadEnds.PRE_REPLAY:
            r._publish_read_done(in_graph=False)
        out = s.launch(fb)
        if s.ends is SharedReadEnds.IN_REPLAY:
            r._publish_read_done(in_graph=True)
        if s.ends is SharedReadEnds.POST_REPLAY:
            r._publish_read_done(in_graph=False)
    n = raw_bs * w
    return dataclasses.replace(
        out,
        next_token_logits=out.next_token_logits[:n] if out.next_token_logits is not None else None,
        full_logits=None,
        hidden_states=out.hidden_states[:n] if out.hidden_states is not None else None,
        last_hidden_states=out.last_hidden_states[:n]
        if out.last_hidden_states is not None
        else None,
    )


def check_extend(r):
    assert not r.require_mlp_tp_gather and not r.require_gathered_buffer
    assert not r.model_runner.model_config.model_is_mrope
    assert r.deepep_adapter._captured_deepep_mode is None


def plan_extend(p, fb, select_index):
    from sglang.srt.layers.attention.base_attn_backend import SharedReadEnds
    from sglang.srt.layers.logits_processor import LogitsProcessorOutput

    r = p.runner
    raw_bs = fb.batch_size
    w = r.captured_req_width
    s = p.sizes.get(raw_bs)
    b = r.buffers
    if s is None:
        assert r._pad_to_bucket(raw_bs, r.capture_bs) == raw_bs
        names = (
            "input_ids",
            "seq_lens",
            "out_cache_loc",
            "positions",
            "req_pool_indices",
            "extend_seq_lens",
            "num_correct_drafts",
            "num_accept_tokens",
            "select_index",
        )
        key = r._make_graph_key(raw_bs)
        n = raw_bs * w
        s = p.sizes[raw_bs] = SimpleNamespace(
            copy=r._input_copies[names],
            rows=(n, raw_bs, n, n, raw_bs, raw_bs, raw_bs, raw_bs, raw_bs),
            seq_cpu=b.seq_lens_cpu[:raw_bs],
            ext=b.extend_seq_lens[:raw_bs],
            loc=b.out_cache_loc[:n],
            hidden=b.hidden_states[:n] if b.hidden_states is not None else None,
            key=key,
            launch=launcher(r, key),
            ends=r.draft_extend_attn_backend.shared_read_ends(r.forward_mode),
            rows_out=None,
        )
    spec = fb.spec_info
    assert fb.input_ids.shape[0] == raw_bs * w and fb.mamba_track_indices is None
    assert fb.extend_seq_lens is not None and spec.num_correct_drafts is not None
    if KEEP == "copies":
        r._copy_inputs(fb, select_index, raw_bs, raw_bs, raw_bs * w)
    else:
        s.copy(
            [
                fb.input_ids,
                fb.seq_lens,
                fb.out_cache_loc,
                fb.positions,
                fb.req_pool_indices,
                fb.extend_seq_lens,
                spec.num_correct_drafts,
                spec.num_accept_tokens,
                select_index,
            ],
            s.rows,
        )
    if (
        s.hidden is not None
        and spec.hidden_states is not None
        and spec.hidden_states.shape[1] == b.hidden_states.shape[1]
    ):
        s.hidden.copy_(spec.hidden_states)
    if fb.seq_lens_cpu is not None:
        s.seq_cpu.copy_(fb.seq_lens_cpu)
    if fb.extend_seq_lens_cpu is not None:
        r.extend_seq_lens_cpu[:raw_bs] = fb.extend_seq_lens_cpu
    else:
        r.extend_seq_lens_cpu[:raw_bs] = [w] * raw_bs
    spec.extend_seq_lens_cpu = list(r.extend_seq_lens_cpu[:raw_bs])
    spec.extend_seq_lens_tensor = s.ext
    fb_view = SimpleNamespace(
        batch_size=raw_bs,
        forward_mode=r.forward_mode,
        input_ids=getattr(fb, "input_ids", None),
        req_pool_indices=b.req_pool_indices,
        seq_lens=b.seq_lens,
        seq_lens_sum=fb.seq_lens_sum,
        seq_lens_cpu=None if fb.seq_lens_cpu is None else b.seq_lens_cpu,
        max_seq_len_host=getattr(fb, "max_seq_len_host", None),
        encoder_lens=None,
        out_cache_loc=s.loc,
        out_cache_loc_virtual=fb.out_cache_loc_virtual,
        kv_loc_plan=fb.kv_loc_plan,
        kv_loc_cols=fb.kv_loc_cols,
        out_cache_loc_dsv4=getattr(fb, "out_cache_loc_dsv4", None),
        mamba_track_indices=None,
        spec_info=spec,
    )
    r.draft_extend_attn_backend.init_forward_metadata_out_graph(fb_view)
    r.model_runner.shared_read_done_event = None
    if s.ends is SharedReadEnds.PRE_REPLAY:
        r._publish_read_done(in_graph=False)
    r.raw_bs = r.bs = raw_bs
    with timer(r, "eagle_draft_extend"), r.model_context():
        out = s.launch(fb)
    if s.ends in (SharedReadEnds.IN_REPLAY, SharedReadEnds.POST_REPLAY):
        r._publish_read_done(in_graph=False)
    if s.rows_out is None or s.rows_out[0] is not out:
        s.rows_out = (out, out.next_token_logits[:raw_bs], out.hidden_states[:raw_bs])
    return LogitsProcessorOutput(
        next_token_logits=s.rows_out[1], hidden_states=s.rows_out[2].clone()
    )


def main_loop(self, iterations, warmup=3):
    import torch

    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    order = list(self.runners)  # draft, verify, draft extend
    names = [r.label or r.name for r in order]
    runners = [r.runner for r in order]
    check_draft(runners[0])
    check_verify(runners[1])
    check_extend(runners[2])
    plans = [Plans(x) for x in runners]

    def calls(r, bs, plan):
        """A fresh batch and the call that replays it (execute, or the plan)."""
        batch, fb = r.batch(bs)
        if r is order[2]:
            w = r.width
            select_index = torch.arange(bs, device=r.env.device) * w + w - 1
            if plan:
                return fb, lambda: plan_extend(plans[2], fb, select_index)
            return fb, lambda: r.runner.execute(fb, select_index)
        if r is order[1]:
            r.lora(fb)
            if plan:
                return fb, lambda: plan_verify(plans[1], fb)
            return fb, lambda: r.runner.execute(fb)
        if plan:
            return fb, lambda: plan_draft(plans[0], fb)
        return fb, lambda: r.runner.execute(fb)

    def written(i):
        """Every buffer row the runner's replay wrote, and its backend's metadata."""
        x = runners[i]
        out = {}
        for k, v in vars(x.buffers).items():
            if isinstance(v, torch.Tensor):
                out[k] = v.clone()
        return out

    def same(a, b, what):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), what
        elif isinstance(a, (list, tuple)):
            for k, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{what}[{k}]")
        elif dataclasses.is_dataclass(a):
            for f in dataclasses.fields(a):
                same(getattr(a, f.name), getattr(b, f.name), f"{what}.{f.name}")
        elif isinstance(a, dict):
            for k in a:
                same(a[k], b[k], f"{what}.{k}")

    def tensors_of(out):
        if isinstance(out, tuple):
            return [o.clone() if o is not None else None for o in out]
        return {
            f.name: getattr(out, f.name).clone()
            for f in dataclasses.fields(out)
            if isinstance(getattr(out, f.name), torch.Tensor)
        }

    report = {"checked": [], "sizes": {}}
    for bs in SIZES:
        for i, r in enumerate(order):
            for _ in range(2):  # warm: execute keeps its copies and views
                calls(r, bs, False)[1]()
            fb, plan_call = calls(r, bs, True)
            sync()
            out_plan = tensors_of(plan_call())
            sync()
            bufs_plan = written(i)
            fb2 = fb
            if i == 0:
                run = lambda fb2=fb2: runners[0].execute(fb2)  # noqa: E731
            elif i == 1:
                run = lambda fb2=fb2: runners[1].execute(fb2)  # noqa: E731
            else:
                w = r.width
                sel = torch.arange(bs, device=r.env.device) * w + w - 1
                run = lambda fb2=fb2, sel=sel: runners[2].execute(fb2, sel)  # noqa: E731
            # The same batch again through execute (a row the plan left unwritten
            # would hold the warm-up batches' values, another batch's).
            out_exec = tensors_of(run())
            sync()
            bufs_exec = written(i)
            same(out_plan, out_exec, f"{names[i]} bs {bs} output")
            same(bufs_plan, bufs_exec, f"{names[i]} bs {bs} buffers")
            report["checked"].append([names[i], bs, len(bufs_plan)])

        rounds = {m: {n: [] for n in names} for m in ("single_execute", "single_plan")}
        loops = {"loop_execute": [], "loop_plan": []}
        for _ in range(ROUNDS):
            for plan in (False, True):
                per = [[] for _ in order]
                for _ in range(CALLS):
                    batch = [calls(r, bs, plan)[1] for r in order]
                    for i, call in enumerate(batch):
                        sync()
                        start = time.perf_counter()
                        call()
                        per[i].append((time.perf_counter() - start) * 1e6)
                key = "single_plan" if plan else "single_execute"
                for i, n in enumerate(names):
                    rounds[key][n].append(statistics.median(per[i]))
                iters = [[calls(r, bs, plan)[1] for r in order] for _ in range(CALLS + 3)]
                sync()
                host = []
                for batch in iters:
                    start = time.perf_counter()
                    for call in batch:
                        call()
                    host.append((time.perf_counter() - start) * 1e6)
                sync()
                loops["loop_plan" if plan else "loop_execute"].append(statistics.median(host[3:]))
        report["sizes"][bs] = {"single": rounds, "loop": loops}
    print(f"KEEP={KEEP} " + json.dumps(report))
    return []


runner_check.RunnerCheck.loop = main_loop
runner_check.RunnerCheck.time_execute = lambda self, repeats, warmup=3: []
sys.exit(
    runner_check.main(
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
)
