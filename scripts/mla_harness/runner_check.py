"""v0.5.23's real EAGLE CUDA-graph runners over the real backends.

The three graph runners of an EAGLE iteration are built, unmodified, on the
real backends, as the workers build them: ``DecodeCudaGraphRunner``
(``model_executor/runner/decode_cuda_graph_runner.py``) on the target backend,
in TARGET_VERIFY (the target model runner's ``decode_cuda_graph_runner``),
then ``EAGLEDraftCudaGraphRunner`` on the multi-step draft backend and
``EAGLEDraftExtendCudaGraphRunner`` on the draft extend backend
(``eagle_worker_v2.py:519``). Each ``__init__`` sizes its buffers (shared by
name and size across runners, ``input_buffers.py``), calls
``init_cuda_graph_state`` and captures a graph per batch size through the
decode runner's capture loop and ``FullCudaGraphBackend`` (real on a GPU; on
CPU replacement 16 re-runs what it recorded): the capture batch over its
buffers, ``init_forward_metadata_out_graph(in_capture=True)``, then
``run_once`` recorded (``init_forward_metadata_in_graph``, the decode
runner's shared-read marker, and the model's forward). Each replay is the runner's own
``execute`` (verify: every other one after ``load_batch`` and the batch
marked ready, as ``eagle_prepare_for_verify`` plans it, ``eagle_utils.py:
398-409``): it copies the batch into its buffers, pads to a captured size,
makes the out-of-graph call and replays. Each round replays the draft, verify
and draft-extend runners in turn, each with its own new random batch; a
second set of backends serves a ``DecodeCudaGraphRunner`` of a model runner
whose ``spec_algorithm`` is NONE (plain DECODE; the server args stay EAGLE's).
What
each attention layer returned for the batch's requests is compared with a
reference paged MLA decode on lengths (verify: + the draft tokens) and a
block table built from ``req_to_token`` alone (``consumer.Check.oracle``; a
non-finite output counts as infinitely wrong). At every captured size, a
graph replayed without ``execute`` must differ from the new batch's reference
(the control: stale metadata shows). On CPU each re-run must also touch only
the storages its capture touched (replacement 16), and the decode runner's
order must be the table kernel, the marker, then attention
(``check_marker_order``).

Further server configurations are ``VARIANTS`` rows: among them the target's
KV pool as SGLang's translating unified pool ("unified": verify and plain
decode read its physical pages), and the draft worker's other runner classes
(``DRAFT_RUNNERS``: multi-layer EAGLE's per-step draft-extend graphs,
"multi_layer"; Frozen-KV MTP's draft loop, "frozen_kv"). After every replay
the metadata the replayed graph's kernel reads (its size's ``seq_lens_k`` and
block-table rows) is compared with the oracle too (``table_mismatches``).

Replaced (``replacements.py`` 13-16, 22): the models (one attention layer per
forward through the backend's real forward, the kernel being
``attention.kernel_sink``'s reference, replacement 7); the TP group and
``graph_capture`` of a one-process world; the model runner's one-time kernel
warm-up; and on CPU only, the CUDA graphs.

``python -m mla_harness.runner_check --tree DIR --replays N`` prints a JSON
summary per setup and runner.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from dataclasses import dataclass
from types import SimpleNamespace

from sglpatch.errors import UserError

from . import child

DRAFT = "sglang.srt.speculative.eagle_draft_cuda_graph_runner"
DRAFT_EXTEND = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner"
DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"


TABLE_KERNEL = "create_flashmla_kv_indices_triton"  # the in-graph rebuild's one launch
KERNEL_GOT = "the attention kernel got"  # the start of a wrong-size metadata error


@contextlib.contextmanager
def marker_spy():
    """Note each call of the decode runner's in-graph shared-read marker
    (``_record_in_graph_metadata_prep_done``, which then runs as it is) in the
    run's ``launches.trace`` events. Observation only."""
    from sglang.srt.model_executor.runner.decode_cuda_graph_runner import (
        DecodeCudaGraphRunner as cls,
    )

    from . import launches

    real = cls._record_in_graph_metadata_prep_done

    def spied(self):
        launches.note("marker")
        return real(self)

    cls._record_in_graph_metadata_prep_done = spied
    try:
        yield
    finally:
        cls._record_in_graph_metadata_prep_done = real


def check_marker_order(events: list) -> None:
    """A decode-runner graph's order: every table-kernel launch, then the
    shared-read marker (once), then the first attention kernel; the
    scheduler treats reads of ``req_to_token`` after the marker as racing
    with its next writes (``SharedReadEnds.IN_REPLAY``)."""
    assert events.count("marker") == 1, events
    marker = events.index("marker")
    tables = [i for i, e in enumerate(events) if e == TABLE_KERNEL]
    assert all(i < marker for i in tables), events
    assert "attention" in events and marker < events.index("attention"), events


def server_args(
    capture_bs, compile_max_bs: int = 0, breakable_debug: bool = False, cuda: bool = True
):
    """The run's server arguments beyond the backends' (``sglang_api.V0523.
    configure``): graphs for the batch sizes ``capture_bs`` (``--cuda-graph-
    config``; a batch between two is padded up), no FlashInfer autotune (it
    tunes the model's kernels; ``--disable-flashinfer-autotune``); with
    ``compile_max_bs``, ``--enable-torch-compile --torch-compile-max-bs N``;
    with ``breakable_debug``, ``--cuda-graph-backend-decode breakable
    --debug-cuda-graph`` (as ``arg_groups/cuda_graph_hook.py:68-69`` resolves
    the first: the decode phase's backend). Off CUDA also
    ``--enable-cudagraph-gc``: the default freezes the garbage collector for
    each capture, then unfreezes it and collects
    (``base_cuda_graph_runner.py:47-62``), a walk of every object of the
    process, a second or more each on a CPU, where no graph is captured
    (replacement 16) for a collection to break."""
    from sglang.srt.model_executor.cuda_graph_config import CudaGraphConfig
    from sglang.srt.runtime_context import get_exec, get_flags

    stack = contextlib.ExitStack()
    decode = {"bs": list(capture_bs)}
    if breakable_debug:
        decode["backend"] = "breakable"
        stack.enter_context(get_exec().graph.override(debug_cuda_graph=True))
    graphs = CudaGraphConfig.from_dict({"decode": decode})
    stack.enter_context(get_exec().graph.override(cuda_graph_config=graphs))
    stack.enter_context(get_exec().kernel.override(disable_flashinfer_autotune=True))
    if not cuda:
        stack.enter_context(get_exec().graph.override(enable_cudagraph_gc=True))
    if compile_max_bs:
        stack.enter_context(get_exec().graph.override(torch_compile_max_bs=compile_max_bs))
        stack.enter_context(get_flags().capture.override(enable_torch_compile=True))
    return stack


class Runner:
    """One real runner, the backend(s) it drives, its query buffer and its
    draft-model stand-in. ``width``: tokens per request; ``layers``: the
    attention calls per forward (one per draft step, or one)."""

    name = ""
    label = ""  # the name in the report (default: ``name``)
    module = ""  # the runner class's module
    verify = False  # the reference's KV length: seq_lens (+ the draft tokens: verify)
    target_pool = False  # reads the target's KV pool (the unified pool's physical pages)

    def __init__(self, env, backends: list, width: int):
        import torch

        from .attention import KV_DIM, V_DIM

        self.env, self.backends, self.width = env, backends, width
        s = env.setup
        self.query = torch.zeros(
            s.max_bs * width, env.heads * KV_DIM, dtype=torch.bfloat16, device=env.device
        )
        # An FP8 KV cache: the layer's latent KV rows (k_nope, k_rope), which
        # the FP8 forward quantizes with the query (not written: the harness
        # forwards with save_kv_cache=False, replacement 11).
        self.latent = None
        if getattr(env, "fp8", False):
            rows = s.max_bs * width
            self.latent = tuple(
                torch.randn(rows, 1, dim, device=env.device).to(torch.bfloat16)
                for dim in (V_DIM, KV_DIM - V_DIM)
            )
        self.runner = None
        self.path = "execute"  # how the last replay was made
        self.plan_always = False  # verify: plan every batch ahead (``back_to_back``)
        self.plan_idle = False  # verify: the GPU synchronized before planning (``time_execute``)
        self.plan_us = None  # verify: the last batch planned ahead, its load_batch's host µs
        self.orders_checked = 0  # CPU re-runs whose marker order was checked
        self.dynamo = None  # torch.compile: dynamo's counts over this runner's captures
        self.layer = None  # the attention layer's fields (``attention.layer``)

    def build(self, worker) -> None:
        """The real runner, on ``worker``: its ``__init__`` captures."""
        self.runner = getattr(__import__(self.module, fromlist=["x"]), self.name)(worker)

    def attend(self, backend, forward_batch):
        """One attention layer of the draft model, under ``backend``'s forward
        context, on this runner's query rows of ``forward_batch``."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        from . import attention

        tokens = forward_batch.batch_size * self.width
        q = self.query[:tokens]
        if self.layer is None:  # made once: a compiled forward does not trace its making
            self.layer = attention.layer(0, self.env.heads)
        with forward_context(ForwardContext(attn_backend=backend), forward_batch=forward_batch):
            if self.latent is not None:  # FP8: q_nope / q_rope, k / k_rope, as an MLA layer
                k, k_rope = (t[:tokens] for t in self.latent)
                return attention.attend_split(backend, forward_batch, self.layer, q, k, k_rope)
            return attention.attend(backend, forward_batch, self.layer, q)

    def oracle(self, batch):
        """``batch``'s kernel lengths and block table from ``req_to_token``
        alone (``consumer.Check.oracle``); a target-model runner on the
        unified pool reads its physical pages."""
        env = self.env
        offset = env.setup.draft_tokens if self.verify else 0
        return env.check.oracle(batch, offset, self.target_pool and env.setup.unified_pool)

    def reference(self, batch, bs: int):
        """The reference output of the first ``bs`` requests' query rows, on
        ``batch``'s lengths and table from ``req_to_token`` alone."""
        from .attention import KV_DIM
        from .consumer import paged_mla_decode

        env = self.env
        lens, table = self.oracle(batch)
        q4 = self.query[: bs * self.width].view(bs, self.width, env.heads, KV_DIM)
        if self.latent is not None:  # FP8: rounded here by a cast, not by the backend
            q4 = q4.to(env.check.kv_cache.dtype)
        return paged_mla_decode(q4, env.check.kv_cache, table, lens, env.setup.page_size)

    def table_mismatches(self, batch, raw_bs: int) -> int:
        """What the kernel of the graph just replayed reads (the metadata
        captured at that size, ``decode_cuda_graph_metadata[bs]``: its
        ``seq_lens_k`` and the block-table rows over each request's pages)
        against the oracle: the (backend, request) pairs that differ."""
        lens, table = self.oracle(batch)
        page = self.env.setup.page_size
        bad = 0
        for backend in self.backends:
            metadata = backend.decode_cuda_graph_metadata[self.runner.bs]
            for i in range(raw_bs):
                n = int(lens[i])
                pages = -(-n // page)
                row = metadata.block_kv_indices[i, :pages].long().cpu()
                bad += not (
                    int(metadata.seq_lens_k[i]) == n and row.equal(table[i, :pages].long().cpu())
                )
        return bad

    def outputs(self, out, bs: int) -> list:
        """What each attention layer returned, as (bs, width, heads, V_DIM)."""
        raise NotImplementedError

    def replay(self, raw_bs: int):
        """One ``execute`` with a new batch; returns (batch, outputs)."""
        batch, run = self.ready(raw_bs)
        return batch, run()

    def ready(self, raw_bs: int):
        """A new batch and the call that replays it (``execute``, returning the
        outputs): (batch, call)."""
        raise NotImplementedError

    def graph(self) -> str:
        """The variant of the graph the last ``execute`` replayed ("": one per size)."""
        return ""

    def layers(self) -> int:
        """Attention calls per replay: one per backend."""
        return len(self.backends)

    def addresses_checked(self) -> int:
        """CPU: the re-runs whose storages were the capture's (replacement 16)."""
        return getattr(self.runner.backend, "eager_checked", 0)

    def graph_backend(self):
        """The graph backend the runner captured and replays with."""
        return self.runner.backend

    def labels(self) -> tuple:
        """The LoRA variants this runner captured per size (``_make_graph_key``)."""
        return ("lora", "nolora") if getattr(self.runner, "record_nolora_graph", False) else (None,)

    def stale(self, bs: int, label=None):
        """The control: the graph of ``bs`` (variant ``label``) replayed without ``execute``."""
        import torch

        batch, fb = self.batch(bs)
        self.query.copy_(torch.randn(self.query.shape, device=self.env.device))
        if self.env.reruns_eagerly:
            # A real graph of bs reads the metadata tensors it was captured
            # with; an eager re-run (CPU, replacement 16; the debug breakable
            # backend) reads forward_decode_metadata, which only execute's
            # out-of-graph call points at bs: give it that.
            for backend in self.backends:
                backend.forward_decode_metadata = backend.decode_cuda_graph_metadata[bs]
        runner = self.runner  # as its execute replays, less the refill before
        with runner.model_context():
            out = runner.backend.replay(runner._make_graph_key(bs, variant_label=label), fb)
        return batch, self.outputs(out, bs)


class DraftRunner(Runner):
    """``EAGLEDraftCudaGraphRunner`` on the multi-step draft backend."""

    name, module = "EAGLEDraftCudaGraphRunner", DRAFT

    def __init__(self, env):
        draft = env.backends.draft
        super().__init__(env, list(draft.attn_backends)[: env.setup.steps - 1], env.setup.topk)

    def draft_forward(self, forward_batch):
        """Replacement 13: as ``draft_forward`` (``eagle_worker_v2.py:808-849``)
        runs the draft model once per step but the last, under that step
        backend's forward context, then advances positions."""
        outs = []
        for backend in self.backends:
            outs.append(self.attend(backend, forward_batch))
            forward_batch.positions.add_(1)
        return tuple(outs) + (None,) * (4 - len(outs))

    def outputs(self, out, bs: int) -> list:
        from .attention import V_DIM

        heads = self.env.heads
        return [
            o[: bs * self.width].view(bs, self.width, heads, V_DIM)
            for o in out[: len(self.backends)]
        ]

    def batch(self, raw_bs: int):
        """A batch as ``prepare_for_draft`` hands it to ``execute``."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        env, w = self.env, self.width
        batch, fb = env.base_batch(raw_bs, ForwardMode.DECODE)
        fb.out_cache_loc = torch.zeros(
            raw_bs * w * env.setup.steps, dtype=torch.int64, device=env.device
        )
        fb.positions = fb.seq_lens.repeat_interleave(w)
        fb.sampling_info = None
        fb.spec_info = SimpleNamespace(
            topk_p=torch.ones(raw_bs, w, device=env.device),
            topk_index=torch.zeros(raw_bs, w, dtype=torch.int64, device=env.device),
            hidden_states=None,
            draft_probs=None,
            dsa_topk_indices=None,
            num_tokens_per_req=w,
        )
        return batch, fb

    def ready(self, raw_bs: int):
        batch, fb = self.batch(raw_bs)
        assert self.runner.can_run_graph(fb), raw_bs
        return batch, lambda: self.outputs(self.runner.execute(fb), raw_bs)


class DraftExtendRunner(Runner):
    """``EAGLEDraftExtendCudaGraphRunner`` on the draft extend backend
    (``DRAFT_EXTEND_V2``, every request at the runner's full width)."""

    name, module = "EAGLEDraftExtendCudaGraphRunner", DRAFT_EXTEND

    def __init__(self, env):
        super().__init__(env, [env.backends.draft_extend], env.setup.draft_tokens)

    def model_forward(self, input_ids, positions, forward_batch):
        """Replacement 13: the draft model's forward, one attention layer;
        its per-request rows (``execute`` keeps the first ``raw_bs``)."""
        out = self.attend(self.backends[0], forward_batch)
        rows = out.view(forward_batch.batch_size, -1)
        return SimpleNamespace(next_token_logits=rows, hidden_states=rows)

    def outputs(self, out, bs: int) -> list:
        from .attention import V_DIM

        return [out.hidden_states[:bs].view(bs, self.width, self.env.heads, V_DIM)]

    def batch(self, raw_bs: int):
        """A batch as the worker hands the draft extend to ``execute``: every
        request extends by the runner's width (all drafts accepted)."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        env, w = self.env, self.width
        batch, fb = env.base_batch(raw_bs, ForwardMode.DRAFT_EXTEND_V2, extend=w)
        tokens = raw_bs * w
        fb.input_ids = torch.zeros(tokens, dtype=torch.int64, device=env.device)
        fb.out_cache_loc = torch.zeros(tokens, dtype=torch.int64, device=env.device)
        fb.positions = torch.zeros(tokens, dtype=torch.int64, device=env.device)
        fb.extend_seq_lens = torch.full((raw_bs,), w, dtype=torch.int32, device=env.device)
        fb.extend_seq_lens_cpu = [w] * raw_bs
        fb.mamba_track_indices = None
        fb.out_cache_loc_virtual = None
        fb.kv_loc_cols = None
        accepted = torch.full((raw_bs,), w, dtype=torch.int32, device=env.device)
        fb.spec_info = SimpleNamespace(
            hidden_states=None,
            num_correct_drafts=accepted,
            num_accept_tokens=accepted.clone(),
            num_tokens_per_req=w,
        )
        return batch, fb

    def ready(self, raw_bs: int):
        import torch

        batch, fb = self.batch(raw_bs)
        assert self.runner.can_run_graph(fb), raw_bs
        w = self.width
        select_index = torch.arange(raw_bs, device=self.env.device) * w + w - 1
        return batch, lambda: self.outputs(self.runner.execute(fb, select_index), raw_bs)


class MultiLayerDraftExtendRunner(DraftExtendRunner):
    """``MultiLayerEagleMultiStepDraftExtendCudaGraphRunner`` (multi-layer
    EAGLE, ``--enable-multi-layer-eagle``): one draft model runner per MTP
    layer, each with its own draft-extend backend (``DraftBackendFactory.
    create_draft_extend_backend``: ``TRTLLMMLABackend(runner,
    skip_prefill=False)`` for trtllm_mla, ``draft_utils.py:126-144, 512-523``)
    and its own graphs (``MultiLayerEagleDraftExtendCudaGraphRunner``), over
    one shared buffer set. The worker picks these per-step graphs for
    trtllm_mla: the one-graph runner needs every step's backend to rebuild
    its draft-extend metadata in the graph or to stage it
    (``multi_layer_eagle_worker_v2.py:431-452``), and trtllm_mla does neither
    (``draft_extend_metadata_captured_in_graph()`` False, ``supports_draft_
    extend_metadata_staging`` False, ``base_attn_backend.py:153-160``).
    Replayed as the worker does (``multi_layer_eagle_worker_v2.py:897-948``):
    ``prepare`` once, then each step's ``replay``, the input ids rotated
    between steps; each step's attention output against the reference."""

    name = "MultiLayerEagleMultiStepDraftExtendCudaGraphRunner"
    module = "sglang.srt.speculative.multi_layer_eagle_draft_extend_cuda_graph_runner"

    def __init__(self, env):
        from . import sglang_api

        steps = env.setup.steps
        runner = env.backends.draft_runner
        extra = [
            sglang_api.current().draft_backend(runner, env.device, skip_prefill=False)
            for _ in range(steps - 1)
        ]
        Runner.__init__(self, env, [env.backends.draft_extend, *extra], env.setup.draft_tokens)

    def build(self, worker) -> None:
        from . import replacements

        forwards = [self.step_forward(step) for step in range(len(self.backends))]
        self.worker = replacements.multi_layer_draft_worker(worker, self.backends, forwards)
        cls = getattr(__import__(self.module, fromlist=["x"]), self.name)
        self.runner = cls(self.worker)

    def step_forward(self, step: int):
        """Replacement 13: MTP layer ``step``'s forward, one attention layer
        through its backend; its rows, and a zero logit row per request (the
        runner prunes the draft extend's logits to one row per request)."""

        def forward(input_ids, positions, forward_batch):
            import torch
            from sglang.srt.layers.logits_processor import LogitsProcessorOutput

            out = self.attend(self.backends[step], forward_batch)
            logits = torch.zeros(forward_batch.batch_size, 1024, device=out.device)
            return LogitsProcessorOutput(next_token_logits=logits, hidden_states=out)

        return forward

    def batch(self, raw_bs: int):
        """The draft extend's batch as the worker hands it to ``prepare``: the
        window's hidden states, every draft accepted (``num_correct_drafts``
        = accept length - 1, ``multi_layer_eagle_worker_v2.py:883-884``)."""
        import torch

        batch, fb = super().batch(raw_bs)
        w = self.width
        hidden = self.worker.mtp_model_runner(0).model_config.spec_hidden_size
        fb.spec_info.hidden_states = torch.zeros(
            raw_bs * w, hidden, dtype=torch.bfloat16, device=self.env.device
        )
        fb.spec_info.num_correct_drafts = fb.spec_info.num_correct_drafts - 1
        fb.sampling_info = None
        return batch, fb

    def replay(self, raw_bs: int):
        from sglang.srt.speculative.multi_layer_eagle_utils import rotate_input_ids

        batch, fb = self.batch(raw_bs)
        runner = self.runner
        assert runner.can_run_graph(fb), raw_bs
        runner.prepare(fb)
        outs = []
        for step in range(len(self.backends)):
            out, _, topk_index = runner.replay(step)
            outs.append(self.rows(out.hidden_states, raw_bs).clone())  # the graphs share a pool
            if step < len(self.backends) - 1:
                b = runner.buffers
                rotate_input_ids(
                    b.input_ids[: runner.raw_num_tokens],
                    b.extend_start_loc[:raw_bs],
                    b.extend_seq_lens[:raw_bs],
                    topk_index,
                    b.select_index[:raw_bs],
                )
        return batch, outs

    def rows(self, hidden_states, bs: int):
        from .attention import V_DIM

        return hidden_states[: bs * self.width].view(bs, self.width, self.env.heads, V_DIM)

    def stale(self, bs: int, label=None):
        """The control, per step: each step's graph of ``bs`` replayed
        without ``prepare`` or the step's metadata call."""
        import torch

        batch, fb = self.batch(bs)
        self.query.copy_(torch.randn(self.query.shape, device=self.env.device))
        outs = []
        for step, backend in enumerate(self.backends):
            if self.env.reruns_eagerly:  # as Runner.stale
                backend.forward_decode_metadata = backend.decode_cuda_graph_metadata[bs]
            r = self.runner.runners[step]
            with r.model_context():
                out = r.backend.replay(r._make_graph_key(bs), fb)
            outs.append(self.rows(out.hidden_states, bs).clone())
        return batch, outs

    def addresses_checked(self) -> int:
        return sum(getattr(r.backend, "eager_checked", 0) for r in self.runner.runners)

    def graph_backend(self):
        return self.runner.runners[0].backend


class FrozenKVRunner(Runner):
    """``FrozenKVMTPCudaGraphRunner`` (``--speculative-algorithm
    FROZEN_KV_MTP``): the draft loop over the target's frozen KV, plain
    DECODE metadata on the draft model runner's own backend (topk 1,
    ``frozen_kv_mtp_worker_v2.py:259-261``), each forward of the loop (the
    seed and each step but the last) one attention layer.

    Never built with trtllm_mla by v0.5.23: the algorithm is reached for a
    Gemma4 assistant draft (``arg_groups/speculative_hook.py:87-116``), the
    one draft model with the frozen-KV context hooks (``models/gemma4_mtp.py``;
    without them the worker's target view refuses to run,
    ``frozen_kv_mtp_utils.py:44-48``); Gemma4 is not an MLA model, and
    trtllm_mla serves only MLA models (``attention_registry.py:94-97``).
    The backend is driven by it all the same: the runner only calls the
    attention backend API every backend has."""

    name = "FrozenKVMTPCudaGraphRunner"
    module = "sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner"

    def __init__(self, env):
        from . import sglang_api

        # The draft model runner's own backend, as TpModelWorker builds it
        # (attention_registry.create_trtllm_mla_backend: TRTLLMMLABackend(runner)).
        backend = sglang_api.current().draft_backend(env.backends.draft_runner, env.device)
        super().__init__(env, [backend], env.setup.topk)

    def build(self, worker) -> None:
        from . import replacements

        self.worker = replacements.frozen_kv_worker(
            worker, self.backends[0], self.draft_forward, self.env.kv_pool
        )
        cls = getattr(__import__(self.module, fromlist=["x"]), self.name)
        self.runner = cls(self.worker)

    def draft_forward(self, forward_batch):
        """Replacement 13: as ``FrozenKVMTPDraftWorker.draft_forward``
        (``frozen_kv_mtp_worker_v2.py:543-640``) runs the draft model for the
        seed and each step but the last, under the target KV pool's view and
        the backend's forward context, one attention layer each; returns the
        loop's three outputs, the first holding the layers' rows."""
        import torch

        worker, backend = self.worker, self.backends[0]
        if forward_batch.needs_forward_metadata_init():
            worker._init_frozen_kv_metadata(forward_batch)
        outs = []
        for _ in range(self.env.setup.steps):
            with worker._target_kv_pool_view(forward_batch):
                outs.append(self.attend(backend, forward_batch))
        bs = forward_batch.batch_size
        rows = torch.stack([o.view(bs, -1) for o in outs], dim=1)
        zeros = torch.zeros(bs, 1, dtype=torch.int64, device=rows.device)
        return rows, zeros, zeros.clone()

    def layers(self) -> int:
        """The loop's forwards: the seed and each step but the last."""
        return self.env.setup.steps

    def outputs(self, out, bs: int) -> list:
        from .attention import V_DIM

        rows = out[0][:bs]
        return [
            rows[:, i].reshape(bs, self.width, self.env.heads, V_DIM) for i in range(rows.shape[1])
        ]

    def batch(self, raw_bs: int):
        """The draft loop's batch (topk 1: one row per request): positions at
        the last committed token, the seed's bonus token and hidden state."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode
        from sglang.srt.speculative.frozen_kv_mtp_info import FrozenKVMTPDraftInput

        env = self.env
        batch, fb = env.base_batch(raw_bs, ForwardMode.DECODE)
        dev = env.device
        hidden = self.worker._recurrent_hidden_size
        spec_info = FrozenKVMTPDraftInput(
            topk_p=torch.zeros(raw_bs, 1, device=dev),
            topk_index=torch.zeros(raw_bs, 1, dtype=torch.int64, device=dev),
            hidden_states=torch.zeros(raw_bs, hidden, dtype=torch.bfloat16, device=dev),
            bonus_tokens=torch.zeros(raw_bs, dtype=torch.int64, device=dev),
            capture_hidden_mode=CaptureHiddenMode.LAST,
        )
        spec_info.num_tokens_per_req = 1
        fb.spec_info = spec_info
        fb.positions = (fb.seq_lens - 1).clamp(min=0)
        fb.input_ids = None
        fb.out_cache_loc = None
        fb.out_cache_loc_virtual = None
        fb.kv_loc_cols = None
        return batch, fb

    def replay(self, raw_bs: int):
        batch, fb = self.batch(raw_bs)
        assert self.runner.can_run_graph(fb), raw_bs
        return batch, self.outputs(self.runner.execute(fb), raw_bs)


class VerifyRunner(Runner):
    """``DecodeCudaGraphRunner`` of the target worker: TARGET_VERIFY (EAGLE),
    every request at ``num_draft_tokens``. Replayed as v0.5.23's EAGLE worker
    does, which plans every graphed verify ahead (``eagle_utils.py:398-409``:
    ``load_batch``, the batch marked ready, then ``execute``), or as a caller
    that does not (``execute`` alone; DFlash's ``dflash_info.py:125`` plans
    without marking), alternately; with ``plan_always``, every batch planned
    ahead."""

    name, module = "DecodeCudaGraphRunner", DECODE
    label = "DecodeCudaGraphRunner (target verify)"
    verify = True
    target_pool = True

    def __init__(self, env):
        super().__init__(env, [env.backends.target], env.setup.draft_tokens)

    def build(self, worker) -> None:
        from torch._dynamo.utils import counters

        cls = getattr(__import__(self.module, fromlist=["x"]), self.name)
        variant = self.env.variant
        graphs = counters["stats"]["unique_graphs"]
        breaks = sum(counters["graph_break"].values())
        self.runner = cls(self.env.backends.runner, record_nolora_graph=variant.nolora)
        if variant.compile_max_bs:
            self.dynamo = {
                "compile_bs": list(self.runner.compile_bs),
                "graphs": counters["stats"]["unique_graphs"] - graphs,
                "graph_breaks": sum(counters["graph_break"].values()) - breaks,
            }

    def model_forward(self, input_ids, positions, forward_batch, **kwargs):
        """Replacement 13: the target model's forward, one attention layer."""
        from sglang.srt.layers.logits_processor import LogitsProcessorOutput

        out = self.attend(self.backends[0], forward_batch)
        return LogitsProcessorOutput(next_token_logits=out, hidden_states=out)

    def outputs(self, out, bs: int) -> list:
        from .attention import V_DIM

        tokens = out.hidden_states[: bs * self.width]
        return [tokens.view(bs, self.width, self.env.heads, V_DIM)]

    def batch(self, raw_bs: int):
        """A verify ``ForwardBatch`` of ``num_draft_tokens`` tokens per request
        with the fields the decode runner's metadata path reads set as
        ``eagle_prepare_for_verify`` sets them (token ids, positions and cache
        locations zeroed: not read on that path; no KV-location plan)."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import (
            CaptureHiddenMode,
            ForwardMode,
        )
        from sglang.srt.speculative.eagle_info import EagleVerifyInput

        env, w = self.env, self.width
        batch, base = env.base_batch(raw_bs, ForwardMode.TARGET_VERIFY)
        tokens = raw_bs * w
        dev = env.device
        spec_info = EagleVerifyInput(
            draft_token=torch.zeros(tokens, dtype=torch.int64, device=dev),
            custom_mask=None,
            positions=torch.zeros(tokens, dtype=torch.int64, device=dev),
            retrieve_index=None,
            retrieve_next_token=None,
            retrieve_next_sibling=None,
            retrieve_cum_len=None,
            spec_steps=env.setup.steps,
            topk=env.setup.topk,
            draft_token_num=w,
            capture_hidden_mode=CaptureHiddenMode.FULL,
            seq_lens_sum=base.seq_lens_sum,
            seq_lens_cpu=base.seq_lens_cpu,
        )
        fb = self.forward_batch(
            ForwardMode.TARGET_VERIFY,
            base,
            tokens,
            spec_info,
            CaptureHiddenMode.FULL,
            write=self.window(batch, 0, w),
        )
        return batch, fb

    def window(self, batch, start: int, width: int):
        """The virtual KV slots a forward of ``batch`` writes: ``width`` per
        request from ``seq_len + start`` (``req_to_token``), flattened."""
        import torch

        r2t = self.env.backends.runner.req_to_token_pool.req_to_token
        rows = [
            r2t[row, n + start : n + start + width]
            for row, n in zip(batch.req_pool_indices, batch.seq_lens, strict=True)
        ]
        return torch.cat(rows).long()

    def forward_batch(
        self, mode, base, tokens: int, spec_info, hidden_mode, positions=None, write=None
    ):
        """The ``ForwardBatch`` of ``base``'s requests and ``tokens`` tokens
        writing the virtual slots ``write``, bound to a plan of its own as
        ``ForwardBatch.init_new`` binds one (``KVIndexTranslator.own_plan``,
        ``forward_batch_info.py:1139-1142``: the iteration's ids, translated
        once; token ids zeroed: not on the metadata path)."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch

        dev = self.env.device
        fb = ForwardBatch(
            forward_mode=mode,
            batch_size=base.batch_size,
            input_ids=torch.zeros(tokens, dtype=torch.int64, device=dev),
            req_pool_indices=base.req_pool_indices,
            seq_lens=base.seq_lens,
            seq_lens_cpu=base.seq_lens_cpu,
            orig_seq_lens=base.seq_lens,
            out_cache_loc=write,
            seq_lens_sum=base.seq_lens_sum,
            positions=(
                positions
                if positions is not None
                else torch.zeros(tokens, dtype=torch.int64, device=dev)
            ),
            return_logprob=False,
            spec_algorithm=self.env.backends.runner.spec_algorithm,
            spec_info=spec_info,
            capture_hidden_mode=hidden_mode,
            can_run_decode_cuda_graph=True,
        )
        self.env.backends.runner.kv_index_translator.bind_own_plan(fb)
        return fb

    def lora(self, fb) -> None:
        """Two captures per size: every other batch carries an adapter id
        (the "lora" graph), the others none ("nolora")."""
        if self.labels() != (None,):
            self.adapter = not getattr(self, "adapter", False)
            fb.lora_ids = ["adapter"] * fb.batch_size if self.adapter else None

    def ready(self, raw_bs: int):
        import torch

        batch, fb = self.batch(raw_bs)
        self.lora(fb)
        assert self.runner.can_run_graph(fb), raw_bs

        def run():
            # eagle_prepare_for_verify: every other one, or each with plan_always
            if self.path == "execute" or self.plan_always:
                self.path = "load_batch, execute"
                if self.plan_idle:
                    torch.cuda.synchronize()
                start = self.env.clock()
                self.runner.load_batch(fb)
                fb.mark_forward_metadata_ready()
                self.plan_us = (self.env.clock() - start) * 1e6
            else:
                self.path, self.plan_us = "execute", None
            out = self.outputs(self.runner.execute(fb), raw_bs)
            self.check_order()
            return out

        return batch, run

    def graph(self) -> str:
        """The variant of the graph the last ``execute`` replayed."""
        return self.runner._replay_graph_key.variant_label or ""

    def check_order(self) -> None:
        """On CPU (replacement 16): the re-run's order (``check_marker_order``)."""
        events = getattr(self.runner.backend, "eager_events", None)
        if events is not None:
            check_marker_order(events)
            self.orders_checked += 1


class DecodeRunner(VerifyRunner):
    """``DecodeCudaGraphRunner`` of a model runner without speculative
    decoding: plain DECODE, one token per request, ``execute`` alone (the
    target backend, in DECODE as the harness's decode phase drives it)."""

    label = "DecodeCudaGraphRunner (decode)"
    verify = False

    def __init__(self, env):
        Runner.__init__(self, env, [env.backends.target], 1)

    def batch(self, raw_bs: int):
        from sglang.srt.model_executor.forward_batch_info import (
            CaptureHiddenMode,
            ForwardMode,
        )

        batch, base = self.env.base_batch(raw_bs, ForwardMode.DECODE)
        fb = self.forward_batch(
            ForwardMode.DECODE,
            base,
            raw_bs,
            None,
            CaptureHiddenMode.NULL,
            base.seq_lens - 1,
            write=self.window(batch, -1, 1),  # the token at position seq_len - 1
        )
        return batch, fb

    def ready(self, raw_bs: int):
        batch, fb = self.batch(raw_bs)
        self.lora(fb)
        assert self.runner.can_run_graph(fb), raw_bs

        def run():
            out = self.outputs(self.runner.execute(fb), raw_bs)
            self.check_order()
            return out

        return batch, run


class RunnerCheck:
    """One setup: the real backends, and the real runners built on them."""

    def __init__(
        self,
        setup,
        capture_bs,
        device: str,
        seed: int,
        stack: contextlib.ExitStack,
        freeze: bool = False,
        speculative: bool = True,
        variant: Variant | None = None,
        host_only: bool = False,
    ):
        import dataclasses
        import time

        import torch

        from . import attention, replacements, sglang_api
        from .consumer import Check, paged_mla_decode

        self.variant = variant = variant or VARIANTS["default"]
        # The timers' clock: --host-only times the thread's CPU time (the
        # host's work, whatever else runs on a shared machine).
        self.clock = time.thread_time if host_only else time.perf_counter
        # The KV cache dtype the backends are built with (the stand-in model
        # runner's kv_cache_dtype, as --kv-cache-dtype sets ModelRunner's).
        kv_dtype = getattr(torch, variant.kv_dtype)
        setup = dataclasses.replace(setup, kv_dtype=kv_dtype, unified_pool=variant.unified_pool)
        self.fp8 = kv_dtype == torch.float8_e4m3fn
        self.setup, self.device = setup, device
        # A replay runs the captured forward again, eagerly: on CPU (replacement
        # 16) and under the debug breakable backend.
        self.reruns_eagerly = not device.startswith("cuda") or variant.breakable_debug
        self.check = Check(setup, device=device, seed=seed)
        self.concat = None  # FP8 on CUDA: the query concat that ran (replacement 21)
        if self.fp8:
            # The pool holds FP8 (forward_extend asserts it: trtllm_mla_backend.py
            # 1541, base 1629); the reference reads the same rounded values.
            self.check.kv_cache = self.check.kv_cache.to(kv_dtype)
            self.concat = stack.enter_context(
                replacements.absorb_q_concat(device.startswith("cuda"))
            )
        self.backends = self.check.backends
        self.heads = setup.model.q_heads
        page = setup.page_size
        # The runners first (a draft runner may bring backends of its own);
        # their builds, which capture, come last.
        target = DecodeRunner(self) if not speculative else VerifyRunner(self)
        drafts = [DRAFT_RUNNERS[name](self) for name in variant.draft] if speculative else []
        targets = [target] if variant.verify or not speculative else []
        all_backends = [
            *self.backends.draft.attn_backends,
            self.backends.target,
            self.backends.draft_extend,
        ]
        for r in drafts:
            all_backends += [b for b in r.backends if all(b is not x for x in all_backends)]
        pool = attention.KVPool(self.check.kv_cache.view(-1, 1, attention.KV_DIM))
        sglang_api.current().attach_kv_pool(all_backends, pool)
        self.kv_pool = pool

        def consume(query, kv, block_tables, kv_lens):
            if self.fp8:
                # What the kernel receives must be FP8: the query the backend
                # quantized, and the pool's pages. Read as they are: the scales
                # (bmm1_scale, from k_scale, 1.0 for a layer without
                # k_scale_float, trtllm_mla_backend.py:855-866 in the patched
                # tree, 955-966 in v0.5.23's) are computed inside
                # _run_decode_kernel, which this replaces (932; 1032).
                assert query.dtype == torch.float8_e4m3fn, query.dtype
                assert kv.dtype == torch.float8_e4m3fn, kv.dtype
            rows = query.shape[0]  # the batch the graph was captured for
            if block_tables.shape[0] != rows or kv_lens.shape[0] != rows:
                # Another batch size's metadata (v0.5.23's eager re-run).
                raise AssertionError(
                    f"{KERNEL_GOT} {block_tables.shape[0]} block-table rows and"
                    f" {kv_lens.shape[0]} lengths for a batch of {rows}"
                )
            return paged_mla_decode(query, kv, block_tables, kv_lens, page).contiguous()

        for backend in all_backends:
            if backend is not None:
                stack.enter_context(attention.kernel_sink(backend, consume, record=False))
        stack.enter_context(replacements.single_process_graph_capture())
        stack.enter_context(marker_spy())
        if variant.breakable_debug and not device.startswith("cuda"):
            stack.enter_context(replacements.breakable_debug_segments())
        elif not device.startswith("cuda"):
            frozen = tuple(b for b in all_backends if b is not None) if freeze else ()
            stack.enter_context(
                replacements.eager_graph_backend(frozen, rerun_graphs=not host_only)
            )
        stack.enter_context(
            server_args(
                capture_bs,
                variant.compile_max_bs,
                variant.breakable_debug,
                cuda=device.startswith("cuda"),
            )
        )
        replacements.target_runner_fields(
            self.backends,
            target.model_forward,
            eagle=speculative,
            module=variant.compile_max_bs > 0,
        )
        if not drafts:  # the target's runner alone (plain decode: a server without EAGLE)
            target.build(None)
            self.runners = [target]
            return
        named = dict(zip(variant.draft, drafts, strict=True))
        worker = replacements.draft_worker(
            self.backends,
            setup,
            named["draft"].draft_forward if "draft" in named else None,
            named["draft_extend"].model_forward if "draft_extend" in named else None,
        )
        # An EAGLE iteration's order: the draft, verify, then the draft extend.
        first = drafts[:1] if "draft" in named else []
        self.runners = [*first, *targets, *drafts[len(first) :]]
        for runner in (*targets, *drafts):  # the order the workers build them
            runner.build(worker)

    def base_batch(self, raw_bs: int, mode, extend=None):
        """A random batch (``consumer.Check.batch``) and the fields of it
        every runner's ``execute`` reads."""
        import torch

        from .batches import mark_host

        batch = self.check.batch(raw_bs, extend)
        seq_lens = torch.tensor(batch.seq_lens, dtype=torch.int64, device=self.device)
        seq_lens_cpu = torch.tensor(batch.seq_lens, dtype=torch.int64)
        mark_host(seq_lens_cpu)
        fb = SimpleNamespace(
            forward_mode=mode,
            batch_size=raw_bs,
            req_pool_indices=torch.tensor(
                batch.req_pool_indices, dtype=torch.int64, device=self.device
            ),
            seq_lens=seq_lens,
            seq_lens_cpu=seq_lens_cpu,
            seq_lens_sum=sum(batch.seq_lens),
            mrope_positions=None,
            rids_int=None,
            bootstrap_room_ids_int=None,
            kv_loc_plan=None,
        )
        return batch, fb

    def run(self, replays: int) -> list:
        import torch

        from .consumer import rel_err

        rng = self.check.rng
        stats = {
            r.label or r.name: {
                "worst": 0.0,
                "compared": 0,
                "padded": 0,
                "paths": {},
                "graphs": {},
                "graph_err": {},
                "tables": 0,
                "table_mismatches": 0,
            }
            for r in self.runners
        }
        for _ in range(replays):  # the runners in turn, each its own batch
            for r in self.runners:
                raw_bs = rng.randint(1, self.setup.max_bs)
                r.query.copy_(torch.randn(r.query.shape, device=self.device))
                batch, outs = r.replay(raw_bs)
                ref = r.reference(batch, raw_bs)
                st = stats[r.label or r.name]
                st["padded"] += r.runner.bs != raw_bs
                st["paths"][r.path] = st["paths"].get(r.path, 0) + 1
                st["graphs"][r.graph()] = st["graphs"].get(r.graph(), 0) + 1
                label = r.graph()
                st["table_mismatches"] += r.table_mismatches(batch, raw_bs)
                st["tables"] += raw_bs * len(r.backends)
                for got in outs:
                    err = rel_err(got, ref)
                    st["worst"] = max(st["worst"], err)
                    st["graph_err"][label] = max(st["graph_err"].get(label, 0.0), err)
                    st["compared"] += 1
        report = []
        for r in self.runners:
            # The control, at every captured size and variant: without
            # ``execute`` a graph keeps the last batch's requests. inf (a NaN:
            # a padded row of the last batch, all masked) differs too.
            stale = min(
                rel_err(got, r.reference(batch, bs))
                for bs in r.runner.capture_bs
                for label in r.labels()
                for batch, outs in [r.stale(bs, label)]
                for got in outs
            )
            st = stats[r.label or r.name]
            report.append(
                {
                    "runner": r.label or r.name,
                    "capture_bs": list(r.runner.capture_bs),
                    # the graph backend class, and whether it re-runs eagerly
                    "graph_backend": type(r.graph_backend()).__name__,
                    "debug_eager": getattr(r.graph_backend(), "_debug_eager", False),
                    "layers": r.layers(),
                    "replays": replays,
                    "padded": st["padded"],
                    # the sizes replayed through a kept replay (_kept_sizes)
                    "kept": _kept_sizes(r.runner),
                    "paths": st["paths"],
                    "graphs": st["graphs"],  # replays per LoRA variant ("": one graph per size)
                    "graph_err": st["graph_err"],  # the worst error per variant
                    "dynamo": r.dynamo,
                    "concat": self.concat,
                    # CPU: re-runs whose storages were the capture's (replacement 16)
                    "addresses_checked": r.addresses_checked(),
                    "orders_checked": r.orders_checked,
                    "compared": st["compared"],
                    # (backend, request) pairs whose replayed kernel metadata
                    # was checked against the oracle, and those that differed
                    "tables": st["tables"],
                    "table_mismatches": st["table_mismatches"],
                    "max_rel_err": st["worst"],
                    "stale_rel_err": stale,
                }
            )
        return report

    def time_execute(self, repeats: int, warmup: int = 3) -> list:
        """Host µs of each runner's whole ``execute`` call (the copies into
        its buffers, padding, the out-of-graph metadata call, the graph
        launch), with the GPU idle before each call: per runner, captured
        size and path (verify after ``load_batch``, or alone), the median of
        ``repeats`` unpadded replays after ``warmup`` more. Every other call
        of a path instead times the part spent in each of ``SECTIONS``
        (``sections``' timers wrap methods inside ``execute`` and cost time
        of their own, so the whole-call figures come from calls without
        them): the medians of ``repeats`` such calls, the median of their
        whole time (``sectioned_execute_us``: less ``execute_us``, what the
        timers add) and ``rest_us``, ``execute_us`` less the sections'
        medians. Then, per path, one more ``execute`` under
        ``launches.count_launches`` (what it launches from the host, the
        graph replay included, and its device-to-host reads). Verify planned
        ahead: also ``load_batch_us``, its ``load_batch`` and mark (GPU idle
        before them too), the median over the path's timed calls."""
        import statistics

        import torch

        from . import launches

        cuda, clock = self.device.startswith("cuda"), self.clock
        report = []
        for r in self.runners:
            execute, samples, counted, calls = r.runner.execute, [], [], {}

            def timed(
                *args,
                execute=execute,
                samples=samples,
                counted=counted,
                calls=calls,
                r=r,
                **kwargs,
            ):
                if cuda:
                    torch.cuda.synchronize()
                if counted:  # the counting call: not timed
                    with launches.count_launches() as counts:
                        out = execute(*args, **kwargs)
                    counted[0] = counts
                    return out
                n = calls[r.path] = calls.get(r.path, -1) + 1
                if n % 2 == 0:  # the whole call, nothing else timed inside it
                    start = clock()
                    out = execute(*args, **kwargs)
                    samples.append({"execute": (clock() - start) * 1e6})
                    return out
                spans = dict.fromkeys(SECTION_NAMES, 0.0)
                with sections(r.runner, spans, clock):
                    start = clock()
                    out = execute(*args, **kwargs)
                    total = clock() - start
                samples.append({"sectioned": total * 1e6, **{k: v * 1e6 for k, v in spans.items()}})
                return out

            r.runner.execute, r.plan_idle = timed, cuda
            try:
                for bs in r.runner.capture_bs:
                    by_path, counts, plans = {}, {}, {}
                    calls.clear()
                    for i in range(warmup + 2 * repeats):
                        samples.clear()
                        r.replay(bs)
                        if i >= warmup:
                            by_path.setdefault(r.path, []).extend(samples)
                            if getattr(r, "plan_us", None) is not None:
                                plans.setdefault(r.path, []).append(r.plan_us)
                    while set(counts) != set(by_path):
                        counted[:] = [None]
                        r.replay(bs)
                        counts[r.path] = counted.pop()
                    for path, us in sorted(by_path.items()):
                        whole = [s["execute"] for s in us if "execute" in s]
                        parts = [s for s in us if "sectioned" in s]
                        median = lambda key, parts=parts: statistics.median(  # noqa: E731
                            s[key] for s in parts
                        )
                        execute_us = statistics.median(whole)
                        sections_us = {f"{k}_us": median(k) for k in SECTION_NAMES}
                        report.append(
                            {
                                "runner": r.label or r.name,
                                "bs": bs,
                                "path": path,
                                "samples": len(whole),
                                "execute_us": execute_us,
                                **sections_us,
                                "rest_us": execute_us - sum(sections_us.values()),
                                "sectioned_samples": len(parts),
                                "sectioned_execute_us": median("sectioned"),
                                "launches": counts[path].launches,
                                "syncs": counts[path].syncs,
                                **(
                                    {"load_batch_us": statistics.median(plans[path])}
                                    if path in plans
                                    else {}
                                ),
                            }
                        )
            finally:
                del r.runner.execute
                r.plan_idle = False
        return report

    def loop(self, iterations: int, warmup: int = 3) -> list:
        """Back-to-back EAGLE iterations (the draft, verify and draft-extend
        ``execute`` in turn, each on a batch built beforehand, verify planned
        ahead as v0.5.23's EAGLE worker plans it, nothing waiting for the GPU
        in between), per size all three runners captured: the host
        µs per iteration and, on CUDA, per iteration the GPU time between one
        runner's graph and the next one's (``TRANSITIONS``: the GPU waiting for
        the host, plus the next runner's input copies), each the median over
        ``iterations`` after ``warmup`` more. The host time comes from a run
        of the iterations without CUDA events; the GPU's, on CUDA, from a
        second run with an event recorded around each graph replay. On CPU:
        host time only."""
        import statistics

        cuda = self.device.startswith("cuda")
        sizes = sorted(set.intersection(*(set(r.runner.capture_bs) for r in self.runners)))
        report = []
        per = len(self.runners)
        for bs in sizes:
            host = self.back_to_back(bs, warmup + iterations)
            row = {
                "loop": True,
                "bs": bs,
                "iterations": iterations,
                "host_us": statistics.median(host[warmup:]),
            }
            if cuda:
                marks = []
                self.back_to_back(bs, warmup + iterations, marks)
                marks = marks[warmup * per :]
                for k, name in enumerate(TRANSITIONS):
                    row[f"{name}_us"] = statistics.median(
                        marks[i][1].elapsed_time(marks[i + 1][0]) * 1e3
                        for i in range(k, len(marks) - 1, per)
                    )
                row["idle_us"] = sum(row[f"{name}_us"] for name in TRANSITIONS)
            report.append(row)
        return report

    def back_to_back(self, bs: int, count: int, marks: list | None = None) -> list:
        """Host µs of each of ``count`` EAGLE iterations at ``bs`` run back to
        back (the runners' calls in turn, on batches built beforehand, verify
        planned ahead (``plan_always``; its ``load_batch`` inside the
        iteration's time), nothing waiting for the GPU in between;
        synchronized before and after on CUDA). With ``marks`` (CUDA): each
        graph replay's event pair appended to it (``graph_events``)."""
        import torch

        cuda = self.device.startswith("cuda")
        calls = [[r.ready(bs)[1] for r in self.runners] for _ in range(count)]
        replays = count * len(self.runners) if marks is not None else 0
        host = []
        try:
            for r in self.runners:
                r.plan_always = True
            with graph_events(self.runners, marks, replays):
                if cuda:
                    torch.cuda.synchronize()
                for iteration in calls:
                    start = self.clock()
                    for call in iteration:
                        call()
                    host.append((self.clock() - start) * 1e6)
                if cuda:
                    torch.cuda.synchronize()
        finally:
            for r in self.runners:
                r.plan_always = False
        return host

    def pairs(
        self, iterations: int, warmup: int = 3, blocks: int = 10, block_iterations: int = 30
    ) -> list:
        """The EAGLE iteration with the runners' kept replays (0013's
        ``_keeps_replays``) and with them turned off, which sends every batch
        down the general path, in this one process, per size all three runners
        captured. Single calls: ``iterations`` pairs of iterations, each
        runner's ``execute`` timed alone with the GPU idle before it (as
        ``time_execute``), the iteration's figure the sum of the three. Back to
        back: ``blocks`` pairs of ``loop``'s run of ``block_iterations``
        iterations (after ``warmup`` more; verify planned ahead in each, as
        ``back_to_back`` runs it), a block's figure the median of its
        iterations. Both halves of a single pair start from the same verify
        path (a pre-planned batch every other one, its ``load_batch`` not in
        the figure) and run
        milliseconds apart, kept first in two pairs of four, so a process's
        own speed (up to 2x between processes) cancels in each pair. Both
        modes are warmed up at each size. One row per size, measure and verify
        path (single calls: pre-planned or not; back to back: pre-planned,
        its ``load_batch`` in the figure): the medians per mode and the pairs whose kept half was
        lower. Host time only. Empty on a tree without kept replays; stops
        where a runner turns them off (a backend without ``replayer``); leaves
        out a size a runner keeps none for."""
        import statistics

        cuda = self.device.startswith("cuda")
        runners = [r.runner for r in self.runners]
        if not all(_kept_sizes(runner) is not None and runner._keeps_replays for runner in runners):
            return []
        sizes = sorted(set.intersection(*(set(r.capture_bs) for r in runners)))
        spent, report = [], []

        def verify_path() -> str:
            """The path the last iteration's verify took ("execute" for the others)."""
            return next((r.path for r in self.runners if r.path != "execute"), "execute")

        def single(bs: int) -> tuple:
            calls = [r.ready(bs)[1] for r in self.runners]
            spent.clear()
            for call in calls:
                call()
            return sum(spent), verify_path()

        def block(bs: int) -> tuple:
            host = self.back_to_back(bs, warmup + block_iterations)
            return statistics.median(host[warmup:]), "load_batch, execute"

        def compare(bs: int, count: int, measure) -> dict:
            """``count`` pairs of ``measure(bs)``: {verify path: [(kept, general)]}."""
            by_path = {}
            try:
                for i in range(count):
                    paths, halves = [r.path for r in self.runners], {}
                    for on in (True, False) if i // 2 % 2 == 0 else (False, True):
                        for r, path in zip(self.runners, paths, strict=True):
                            r.path = path
                        _keep_replays(runners, on)
                        halves[on] = measure(bs)
                    (kept, path), (general, _) = halves[True], halves[False]
                    by_path.setdefault(path, []).append((kept, general))
            finally:
                _keep_replays(runners, True)
            return by_path

        for bs in sizes:
            with _timed_executes(runners, spent, self.clock, cuda):
                for _ in range(warmup):
                    single(bs)  # the first batch of a size keeps its replay
                if not all(runner._keeps_replays for runner in runners):
                    break  # turned off for good: nothing to compare
                if any(bs not in runner._kept_replays for runner in runners):
                    continue
                try:
                    _keep_replays(runners, False)
                    for _ in range(warmup):
                        single(bs)
                finally:
                    _keep_replays(runners, True)
                singles = compare(bs, iterations, single)
            loops = compare(bs, blocks, block)
            for measure, n, by_path in (("single", 1, singles), ("loop", block_iterations, loops)):
                for path, figures in sorted(by_path.items()):
                    kept, general = zip(*figures, strict=True)
                    report.append(
                        {
                            "pairs": measure,
                            "bs": bs,
                            "verify": path,
                            "count": len(figures),
                            "iterations": n,
                            "kept_us": statistics.median(kept),
                            "general_us": statistics.median(general),
                            "kept_lower": sum(k < g for k, g in figures),
                        }
                    )
        return report


def _keep_replays(runners: list, on: bool) -> None:
    """Turn the runners' kept replays on or off (0013's ``_keeps_replays``)."""
    for runner in runners:
        runner._keeps_replays = on


@contextlib.contextmanager
def _timed_executes(runners: list, spent: list, clock, cuda: bool):
    """Each of ``runners``' ``execute`` appends its host µs (by ``clock``) to
    ``spent``, the GPU synchronized before each call on CUDA; restored after."""
    import torch

    def timed(*args, execute, **kwargs):
        if cuda:
            torch.cuda.synchronize()
        start = clock()
        out = execute(*args, **kwargs)
        spent.append((clock() - start) * 1e6)
        return out

    wrapped = []
    try:
        for runner in runners:
            runner.execute = functools.partial(timed, execute=runner.execute)
            wrapped.append(runner)
        yield
    finally:
        for runner in wrapped:
            del runner.execute


# ``loop``'s transitions between an iteration's graphs, in the runners' order
# (draft, verify, draft extend), the last one into the next iteration's draft.
TRANSITIONS = ("draft_to_verify", "verify_to_extend", "extend_to_draft")


def _kept_sizes(runner):
    """The captured sizes ``runner`` keeps a replay for (``_kept_replays``);
    None in a tree without, False where it keeps none (``_keeps_replays``)."""
    if not hasattr(runner, "_kept_replays"):
        return None
    return sorted(runner._kept_replays) if runner._keeps_replays else False


@contextlib.contextmanager
def graph_events(runners: list, marks: list, replays: int):
    """With ``replays`` > 0 (CUDA): append to ``marks``, for each of the next
    ``replays`` graph replays (``torch.cuda.CUDAGraph.replay``, whether the
    runner reaches it through its graph backend's ``replay`` or through a
    replay it keeps per size), a CUDA event recorded right before the replay
    and one right after, the events made beforehand. The method is wrapped on
    its class and restored after. With 0: nothing. ``runners``: those whose
    graphs replay meanwhile (the only graphs replayed then)."""
    import torch

    if not replays:
        yield
        return
    pairs = iter(
        [tuple(torch.cuda.Event(enable_timing=True) for _ in range(2)) for _ in range(replays)]
    )
    graph = torch.cuda.CUDAGraph
    own, replay = vars(graph).get("replay"), graph.replay

    def call(self, *args, **kwargs):
        before, after = next(pairs)
        before.record()
        out = replay(self, *args, **kwargs)
        after.record()
        marks.append((before, after))
        return out

    graph.replay = call
    try:
        yield
    finally:
        if own is None:
            del graph.replay
        else:
            graph.replay = own


# What ``time_execute`` attributes an ``execute``'s host time to: (section,
# the runner's attribute holding the object, the method called on it).
# "metadata": the out-of-graph call before the replay (the decode runner's
# ``attn_backend``, ``decode_cuda_graph_runner.py:343, 672-676``; the draft
# runners' own, ``eagle_draft_cuda_graph_runner.py:738``,
# ``eagle_draft_extend_cuda_graph_runner.py:662``); "buffers": the buffer
# registry's copies (``fill_from``, and ``copy_slots`` for an unpadded batch;
# the draft runners copy into their buffers inline: "rest"); "graph": the
# graph backend's replay (the graph launch). "rest" is what is left: padding,
# the forward-batch fields, the runner's own Python.
SECTIONS = (
    ("metadata", "attn_backend", "init_forward_metadata_out_graph"),
    ("metadata", "draft_attn_backend", "init_forward_metadata_out_graph"),
    ("metadata", "draft_extend_attn_backend", "init_forward_metadata_out_graph"),
    ("buffers", "buffer_registry", "fill_from"),
    ("buffers", "buffer_registry", "copy_slots"),
    ("graph", "backend", "replay"),
)
SECTION_NAMES = tuple(dict.fromkeys(name for name, _, _ in SECTIONS))


@contextlib.contextmanager
def sections(runner, spans: dict, clock):
    """Add to ``spans[section]`` the host seconds (by ``clock``) spent in each of
    ``SECTIONS``' methods on ``runner`` while the block runs (a call nested in
    another of the same section counts once); the methods are wrapped on
    their objects, not replaced, and restored after."""
    depth = dict.fromkeys(spans, 0)
    wrapped = []

    def timer(section, method):
        def call(*args, **kwargs):
            depth[section] += 1
            start = clock()
            try:
                return method(*args, **kwargs)
            finally:
                depth[section] -= 1
                if not depth[section]:
                    spans[section] += clock() - start

        return call

    seen = set()
    for section, attr, name in SECTIONS:
        obj = getattr(runner, attr, None)
        if obj is None or (id(obj), name) in seen or not hasattr(obj, name):
            continue
        seen.add((id(obj), name))
        own = name in vars(obj)  # an instance attribute (a harness replacement)
        wrapped.append((obj, name, own, getattr(obj, name)))
        setattr(obj, name, timer(section, getattr(obj, name)))
    try:
        yield spans
    finally:
        for obj, name, own, method in reversed(wrapped):
            if own:
                setattr(obj, name, method)
            else:
                delattr(obj, name)


# The draft worker's runners a variant may build (``Variant.draft``).
DRAFT_RUNNERS = {
    "draft": DraftRunner,
    "draft_extend": DraftExtendRunner,
    "multi_layer": MultiLayerDraftExtendRunner,
    "frozen_kv": FrozenKVRunner,
}

SETUPS = (  # (Setup kwargs, captured batch sizes)
    (dict(page_size=64, context_len=2048, max_bs=4), (1, 2, 4)),
    (dict(page_size=32, context_len=1024, max_bs=3, steps=4, draft_tokens=5), (1, 3)),
)


@dataclass(frozen=True)
class Variant:
    """How the server is configured beyond ``SETUPS``' defaults."""

    setups: tuple = SETUPS
    # The decode runners (verify, plain decode) capture every size twice,
    # "lora" then "nolora" (``record_nolora_graph``, as with a LoRA backend
    # that skips inactive adapters, ``decode_cuda_graph_runner.py:246-248,
    # 1330-1365``), and replays alternate between the two graphs (by
    # ``lora_ids``, ``_resolve_lora_variant`` 755-762). No LoRA manager: in a
    # server one sets the flag (triton_v2's ``skip_inactive_dense_lora``, or
    # UNO), captures with ``lora_ids=[None] * bs`` and turns the metadata glue
    # route off (1749; off by default); trtllm_mla reads neither.
    nolora: bool = False
    # ``--enable-torch-compile --torch-compile-max-bs N``: the decode runners
    # capture the forward compiled by ``torch_compile_decoration.patch_model``
    # for sizes up to N (CUDA only).
    compile_max_bs: int = 0
    # The KV cache dtype (a ``torch`` attribute): "float8_e4m3fn" as with
    # ``--kv-cache-dtype fp8_e4m3``. The layers then pass q_nope / q_rope and
    # k / k_rope, and the backends quantize the query themselves, on the path
    # without rope (no ``cos_sin_cache``) and without writing KV
    # (``save_kv_cache=False``): a DeepSeek layer passes both
    # (``models/deepseek_common/attention_forward_methods/forward_mla.py`` 724,
    # 978-986), so a server's decode and verify take the rope-and-quantize
    # branch instead (trtllm_mla_backend.py:1166, 1375, patched tree; it needs
    # FlashInfer's rope), which the metadata does not reach; draft extend's
    # merge and cast are a server's. The kernel
    # (replacement 7) asserts it receives FP8 query and KV. The reference
    # reads the same FP8 KV and the query rounded to FP8 by a plain cast, in
    # float64 as the consumer: equal inputs, so the tests' 1e-9 (rounding of
    # float64 sums only) holds for FP8 as for bf16.
    kv_dtype: str = "bfloat16"
    # The target's KV pool is SGLang's translating unified pool
    # (``--enable-unified-memory`` on an MLA hybrid-Mamba model,
    # ``unified_pool``): the verify and decode runners' backends translate
    # through the iteration's plan, on the host before each replay on both
    # trees (v0.5.23's ``_apply_cuda_graph_metadata``; the series keeps
    # that path for a translating pool without DCP, ``_copy_plan_graph_
    # metadata``); the reference reads the allocator's v2p table.
    unified_pool: bool = False
    # The draft worker's runners (``DRAFT_RUNNERS``), built after the target's
    # verify runner: EAGLE's multi-step draft and draft extend by default;
    # none: the target's alone (with ``unified_pool``: no server runs an MLA
    # draft on that pool, ``sglang_api.runner_fields``).
    draft: tuple = ("draft", "draft_extend")
    # Also a plain-decode server's ``DecodeCudaGraphRunner`` (spec NONE).
    decode: bool = True
    # The target's verify runner (False: the draft runners alone).
    verify: bool = True
    # ``--cuda-graph-backend-decode breakable --debug-cuda-graph``: every
    # runner's graph backend (``resolve_decode_backend``,
    # ``runner_backend/utils.py:58, 81-86``) is ``BreakableCudaGraphBackend
    # (debug_eager=True)``, which records the whole forward (``run_once``) as
    # one eager break and runs it again at every replay, on the capture batch
    # (``breakable_cuda_graph_backend.py:151-160``): the forward reads the
    # backend's ``forward_decode_metadata`` as the replay left it. On CPU
    # only the empty graph segments around the break are stand-ins
    # (replacement 24); on CUDA they are real.
    breakable_debug: bool = False


VARIANTS = {
    "default": Variant(),
    # EAGLE chains of 2 and 5 steps (1 step builds no draft runner,
    # eagle_worker_v2.py:507): 1 and 4 step backends in the draft graph.
    "steps": Variant(
        (
            (dict(page_size=64, context_len=1024, max_bs=3, steps=2, draft_tokens=3), (1, 3)),
            (dict(page_size=32, context_len=2048, max_bs=3, steps=5, draft_tokens=6), (1, 3)),
        )
    ),
    "double_capture": Variant(SETUPS[:1], nolora=True),
    "compile": Variant(SETUPS[:1], compile_max_bs=2),
    # An FP8 KV cache (--kv-cache-dtype fp8_e4m3).
    "fp8": Variant(SETUPS[:1], kv_dtype="float8_e4m3fn"),
    # --enable-multi-layer-eagle: per-step draft-extend graphs, 3 MTP layers.
    "multi_layer": Variant(
        ((dict(page_size=32, context_len=1024, max_bs=3), (1, 3)),),
        draft=("multi_layer",),
        decode=False,
        verify=False,
    ),
    # --speculative-algorithm FROZEN_KV_MTP (never with trtllm_mla in
    # v0.5.23: FrozenKVRunner), a draft loop of 3 forwards.
    "frozen_kv": Variant(
        ((dict(page_size=32, context_len=1024, max_bs=3), (1, 3)),),
        draft=("frozen_kv",),
        decode=False,
        verify=False,
    ),
    # --cuda-graph-backend-decode breakable --debug-cuda-graph.
    "breakable_debug": Variant(
        SETUPS[:1], breakable_debug=True, draft=("draft",), decode=False, verify=False
    ),
    "breakable_debug_target": Variant(SETUPS[:1], breakable_debug=True, draft=()),
    # --enable-unified-memory: target verify and plain decode on the
    # translating pool.
    "unified": Variant(
        ((dict(page_size=32, context_len=1024, max_bs=3), (1, 3)),),
        unified_pool=True,
        draft=(),
    ),
}


def main(argv=None) -> int:
    parser = child.parser(__doc__, device="cuda")
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument(
        "--freeze-metadata",
        action="store_true",
        help="CPU: each re-run of a graph first restores the metadata objects it was captured with",
    )
    parser.add_argument(
        "--time",
        type=int,
        default=0,
        metavar="N",
        help="instead of the checks: the host µs of each runner's execute, median of N",
    )
    parser.add_argument(
        "--loop",
        type=int,
        default=0,
        metavar="N",
        help="with --time: also N back-to-back EAGLE iterations per size (RunnerCheck.loop)",
    )
    parser.add_argument(
        "--pairs",
        type=int,
        default=0,
        metavar="N",
        help="instead of the checks: per size N pairs of EAGLE iterations with the runners' kept"
        " replays and without them, in this process, and 10 pairs of 30 back to back"
        " (RunnerCheck.pairs); a tree with kept replays",
    )
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="CPU, with --time or --pairs: a graph replay re-runs nothing (replacement 16), so"
        " execute's time is the host's work around the graph launch; times are the thread's"
        " CPU time",
    )
    parser.add_argument(
        "--sizes",
        default="",
        metavar="BS,BS",
        help="instead of the variant's setups: its first setup, capturing these batch sizes",
    )
    parser.add_argument(
        "--variant",
        choices=sorted(VARIANTS),
        default="default",
        help="server configuration beyond the defaults (VARIANTS)",
    )
    args = parser.parse_args(argv)
    if args.host_only and (args.device == "cuda" or not (args.time or args.pairs)):
        raise UserError("--host-only: a CPU measurement, with --time or --pairs")
    if args.pairs and (args.time or args.loop):
        raise UserError("--pairs: a measurement of its own, without --time and --loop")
    child.enter(args)
    from . import replacements
    from .sglang_api import current
    from .standin import MLAModel, Setup

    if current().base != "v0.5.23":
        raise SystemExit(f"runner_check drives v0.5.23's runner classes, not {current().base}'s")
    # A world of one process: TP 1, with the 16 query heads per rank of a
    # 64-head model at TP 4.
    model = MLAModel(num_attention_heads=16, attention_tp_size=1)
    variant = VARIANTS[args.variant]
    if variant.compile_max_bs and args.device != "cuda":
        raise SystemExit("runner_check --variant compile: torch.compile's graphs need CUDA")
    report = []
    setups = variant.setups
    if args.sizes:
        sizes = tuple(sorted({int(x) for x in args.sizes.split(",")}))
        if not sizes or sizes[0] < 1:
            raise UserError(f"--sizes: batch sizes >= 1, got {args.sizes!r}")
        setups = ((dict(setups[0][0], max_bs=sizes[-1]), sizes),)
    for i, (kwargs, capture_bs) in enumerate(setups):
        # An EAGLE server's runners; a plain one's.
        for speculative in (True, False) if variant.decode and not args.pairs else (True,):
            with contextlib.ExitStack() as stack:
                stack.enter_context(replacements.cuda_factories_on_cpu(args.device == "cuda"))
                check = RunnerCheck(
                    Setup(**kwargs, model=model),
                    capture_bs,
                    args.device,
                    i,
                    stack,
                    freeze=args.freeze_metadata,
                    speculative=speculative,
                    variant=variant,
                    host_only=args.host_only,
                )
                if args.pairs:
                    rows = check.pairs(args.pairs)
                else:
                    rows = check.time_execute(args.time) if args.time else check.run(args.replays)
                if args.loop and speculative:
                    rows += check.loop(args.loop)
                report.extend({"setup": i, **r} for r in rows)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.runner_check", main))
