"""The SGLang API generations the harness drives: one class per generation.

The phase table (``phases``) and the driver (``driver.PhaseDriver``) are the
same for every base; what an SGLang release changed in how a runner drives an
attention backend is here, and only here:

- ``V0512`` (v0.5.12): server args published with
  ``set_global_server_args_for_scheduler``, the attention TP group replaced
  (replacement 6); a graph captures with
  ``init_forward_metadata_capture_cuda_graph`` and refreshes with
  ``init_forward_metadata_replay_cuda_graph`` before each replay.
- ``V0523`` (v0.5.23, whose runners call the out-of-graph / in-graph pair):
  config through ``get_context().override_server_args(...)`` and
  ``get_parallel().override(...)``, as upstream's attention test kit does
  (``test/kits/attention_unittest/attention_methods/mla_attention.py``); the
  runner stand-in also carries ``token_to_kv_pool``, ``kv_index_translator``,
  ``max_running_requests`` and ``is_draft_worker``; a graph runner calls
  ``init_forward_metadata_out_graph(fb, in_capture=True)`` before capture and
  records ``init_forward_metadata_in_graph(fb)`` into the graph ahead of the
  forward; before each replay it calls ``init_forward_metadata_out_graph``
  on its replay view, and the replay re-runs the recorded in-graph step
  (``in_graph``). No ``DRAFT_EXTEND`` (v1) forward mode.

``current()`` picks the generation of the imported ``sglang`` by feature, not
by version string: the v0.5.23 ABC has ``init_forward_metadata_in_graph``.
"""

from __future__ import annotations

import contextlib
import functools
from functools import partial
from types import SimpleNamespace

import torch

from . import replacements
from .backends import Backends


class V0512:
    """v0.5.12: capture / replay calls with positional batch arguments."""

    base = "v0.5.12"

    def build_backends(self, setup, runner, device: str):
        from sglang.srt.layers.attention.trtllm_mla_backend import (
            TRTLLMMLABackend,
            TRTLLMMLAMultiStepDraftBackend,
        )
        from sglang.srt.server_args import set_global_server_args_for_scheduler

        if setup.dcp_size > 1:
            from sglpatch.errors import UserError

            raise UserError("DCP is a v0.5.23 mode: v0.5.12's trtllm_mla has none")
        if setup.unified_pool:
            from sglpatch.errors import UserError

            raise UserError("the unified memory pool is a v0.5.23 pool: v0.5.12 has none")
        set_global_server_args_for_scheduler(runner.server_args)
        replacements.install_attention_tp(setup.model.attention_tp_size)
        replacements.install_flashinfer_wrappers()
        with self.device_calls(torch.device(device).type == "cuda"):
            draft = TRTLLMMLAMultiStepDraftBackend(runner, setup.topk, setup.steps)
            target = TRTLLMMLABackend(runner)
            draft_extend = TRTLLMMLABackend(runner, skip_prefill=False)
        return Backends(runner, draft, target, draft_extend)

    def device_calls(self, use_cuda: bool):
        """The replacements every backend call runs under (replacement 4)."""
        return replacements.cuda_factories_on_cpu(use_cuda)

    def attach_kv_pool(self, backends, kv_pool) -> None:
        """v0.5.12's forward reads the KV pool of the forward batch."""

    def spec_info(self, spec_info):
        return spec_info

    def complete_batch(self, fb):
        """A forward batch with the fields this generation's backend reads."""
        return fb

    def kernel_lens(self, phase, fb, metadata):
        """The KV lengths the kernel is given: decode reads the batch's own."""
        return fb.seq_lens if phase.mode == "DECODE" else metadata.seq_lens_k

    def capture(self, d, bs: int):
        rpi, lens = d.static.capture_inputs(bs)
        spec_info = d.spec_info()
        d.graph_batches[bs] = d.capture_batch(bs, spec_info)
        capture = d.backend.init_forward_metadata_capture_cuda_graph
        if d.phase.multi_step:  # a forward batch on the static buffers
            from .batches import Batch, forward_batch

            batch = Batch(tuple(rpi.tolist()), tuple(lens.tolist()))
            fb = forward_batch(batch, d.mode, d.runner, d.device, spec_info)
            fb.req_pool_indices, fb.seq_lens = rpi, lens
            return partial(capture, fb)
        return partial(capture, bs, bs * d.q_len, rpi, lens, None, d.mode, spec_info)

    def in_graph(self, d, bs: int):
        """v0.5.12 records no metadata step of its own into the graph."""
        return None

    def replay(self, d, batch, bs: int):
        fb, static = d.forward_batch(batch), d.static
        replay = d.backend.init_forward_metadata_replay_cuda_graph
        if d.phase.multi_step:  # the forward batch, on the buffers only when padded
            return partial(replay, static.padded_draft_batch(fb, bs), bs)
        static.load(fb, bs)
        n = None if d.phase.whole_buffers else bs
        lens_sum = fb.seq_lens_sum + (bs - fb.batch_size) * static.fill_value
        return partial(
            replay,
            bs,
            static.req_pool_indices[:n],
            static.seq_lens[:n],
            lens_sum,
            None,
            d.mode,
            fb.spec_info,
            seq_lens_cpu=static.seq_lens_cpu[:n],
        )


class V0523:
    """v0.5.23: ``init_forward_metadata_out_graph`` / ``_in_graph``."""

    base = "v0.5.23"

    def build_backends(self, setup, runner, device: str):
        from sglang.srt.layers.attention import trtllm_mla_backend as module

        self.configure(setup)
        use_cuda = torch.device(device).type == "cuda"
        if setup.unified_pool:  # the target's pool stack, built as a server builds it
            from . import unified_pool

            with self.device_calls(use_cuda):
                stack = unified_pool.build(setup, device, runner.req_to_token_pool)
            runner.req_to_token_pool = stack.req_to_token_pool
            runner.token_to_kv_pool = stack.token_to_kv_pool
            runner.token_to_kv_pool_allocator = stack.allocator
            runner.unified_pool = stack
        replacements.install_construction_stand_ins(module, use_cuda)
        replacements.install_flashinfer_wrappers()
        target_runner = runner_fields(runner, setup, device, is_draft_worker=False)
        # The draft worker's runner: same req_to_token pool, its own translator.
        draft_runner = runner_fields(
            SimpleNamespace(**vars(runner)), setup, device, is_draft_worker=True
        )
        with self.device_calls(use_cuda):
            draft = module.TRTLLMMLAMultiStepDraftBackend(draft_runner, setup.topk, setup.steps)
            target = module.TRTLLMMLABackend(target_runner)
            draft_extend = module.TRTLLMMLABackend(draft_runner, skip_prefill=False)
        return Backends(target_runner, draft, target, draft_extend, draft_runner)

    def draft_backend(self, runner, device: str, **kwargs):
        """One more ``TRTLLMMLABackend`` on the draft worker's ``runner``, as
        a draft worker with a runner per MTP layer, or one using its model
        runner's own backend, builds it (``skip_prefill`` as given)."""
        from sglang.srt.layers.attention import trtllm_mla_backend as module

        with self.device_calls(torch.device(device).type == "cuda"):
            return module.TRTLLMMLABackend(runner, **kwargs)

    @staticmethod
    def configure(setup) -> None:
        """Publish the server args and parallel state the backends read."""
        from sglang.srt.runtime_context import get_context, get_parallel

        while _installed:
            _installed.pop().restore()
        override = get_context().override_server_args(
            page_size=setup.page_size,
            speculative_num_draft_tokens=setup.draft_tokens,
            speculative_num_steps=setup.steps,
            speculative_eagle_topk=setup.topk,
            disable_chunked_prefix_cache=True,
            flashinfer_mla_disable_ragged=True,
            disaggregation_mode=None,
        )
        override.install()
        _installed.append(override)
        tp = setup.model.attention_tp_size  # tp = attn_tp (no DP attention)
        dcp = {}
        if setup.dcp_size > 1:  # replacement 17: the DCP group's size and rank only
            size, rank = setup.dcp_size, setup.dcp_rank
            dcp = dict(dcp_size=size, attn_dcp_size=size, dcp_rank=rank, attn_dcp_rank=rank)
            dcp["dcp_enabled"] = True
        elif setup.unified_pool:
            # The unified allocator reads the (attention) DCP rank, which the
            # rank bundle of a world without DCP holds as 0 (size 1).
            dcp = dict(dcp_size=1, attn_dcp_size=1, dcp_rank=0, attn_dcp_rank=0)
        parallel = get_parallel().override(tp_size=tp, attn_tp_size=tp, moe_tp_size=tp, **dcp)
        parallel.__enter__()
        _installed.append(SimpleNamespace(restore=lambda: parallel.__exit__(None, None, None)))

    def device_calls(self, use_cuda: bool):
        stack = contextlib.ExitStack()
        stack.enter_context(replacements.cuda_factories_on_cpu(use_cuda))
        stack.enter_context(replacements.unpinned_host_on_cpu(use_cuda))
        return stack

    def attach_kv_pool(self, backends, kv_pool) -> None:
        """v0.5.23's forward reads the pool the backend took from its runner
        (``self.token_to_kv_pool``): the runner's pool is the driver's."""
        for backend in backends:
            backend.token_to_kv_pool = kv_pool

    def spec_info(self, spec_info):
        """v0.5.23's forward reads ``ragged_verify_layout`` (None: the dense
        layout the EAGLE worker builds without compact verify)."""
        if spec_info is None:  # plain decode
            return None
        return SimpleNamespace(**vars(spec_info), ragged_verify_layout=None)

    def complete_batch(self, fb):
        """Fields v0.5.23 reads that v0.5.12 did not: ``kv_loc_plan`` (None:
        a static KV pool) and the ``ForwardBatch`` defaults the multi-step
        backend's view (``build_inner_fb_view``) copies."""
        for name in ("kv_loc_plan", "input_ids", "out_cache_loc", "decode_trtllm_mla_metadata"):
            if not hasattr(fb, name):
                setattr(fb, name, None)
        return fb

    def kernel_lens(self, phase, fb, metadata):
        """v0.5.23's forward reads ``metadata.seq_lens_k`` in every mode,
        the batch's ``seq_lens`` only where the metadata has none."""
        return fb.seq_lens if metadata.seq_lens_k is None else metadata.seq_lens_k

    def capture(self, d, bs: int):
        fb = self.capture_batch(d.capture_batch(bs, d.spec_info()), d.static, bs * d.q_len)
        d.graph_batches[bs] = fb
        return self.capture_call(d.backend, fb)

    @staticmethod
    def capture_call(backend, fb):
        """The metadata call a runner makes before capturing a graph of ``fb``
        (a capture batch, ``capture_batch``)."""
        return partial(backend.init_forward_metadata_out_graph, fb, in_capture=True)

    @staticmethod
    def in_graph_call(backend, fb):
        """The metadata step a runner records into the graph of ``fb``."""
        return partial(backend.init_forward_metadata_in_graph, fb)

    @staticmethod
    def replay_call(backend, view):
        """The metadata call a runner makes on its replay ``view`` before replaying."""
        return partial(backend.init_forward_metadata_out_graph, view)

    def capture_batch(self, fb, static, tokens: int):
        """``fb`` (on the static buffers) as v0.5.23's runners capture it:
        completed, with the buffers' host lengths and ``tokens`` positions."""
        fb = self.complete_batch(fb)
        fb.seq_lens_cpu = static.seq_lens_cpu[: fb.batch_size]
        fb.seq_lens_sum = int(fb.seq_lens_cpu.sum())
        fb.positions = torch.zeros(tokens, dtype=torch.int64, device=fb.seq_lens.device)
        return fb

    def in_graph(self, d, bs: int):
        """The step every v0.5.23 runner records into its graph ahead of the
        forward, over the capture batch (the runner's static buffers)."""
        return self.in_graph_call(d.backend, d.graph_batches[bs])

    def replay(self, d, batch, bs: int):
        """The runner's view: the draft runner passes the batch itself unless
        padded; the decode runner its buffers ``[:bs]``; the draft-extend
        runner its whole buffers."""
        fb, static = d.forward_batch(batch), d.static
        if d.phase.multi_step:
            view = static.padded_draft_batch(fb, bs)
        else:
            view = self.replay_view(fb, static, bs, whole=d.phase.whole_buffers)
        return self.replay_call(d.backend, view)

    @staticmethod
    def replay_view(fb, static, bs: int, whole: bool = False, **fields):
        """``fb`` copied into the static buffers, padded to ``bs``, and the
        runner's view of them (``[:bs]``, or ``whole`` buffers); ``fields``
        change more of the view."""
        static.load(fb, bs)
        n = None if whole else bs
        return replace_batch(
            fb,
            batch_size=bs,
            req_pool_indices=static.req_pool_indices[:n],
            seq_lens=static.seq_lens[:n],
            seq_lens_cpu=static.seq_lens_cpu[:n],
            seq_lens_sum=fb.seq_lens_sum + (bs - fb.batch_size) * static.fill_value,
            **fields,
        )


_installed: list = []  # the config overrides V0523.configure holds, newest last


def runner_fields(runner, setup, device: str, is_draft_worker: bool):
    """The ModelRunner fields v0.5.23's backends read beyond v0.5.12's."""
    from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator

    pool = runner.req_to_token_pool
    allocator = getattr(runner, "token_to_kv_pool_allocator", None)
    if allocator is None or is_draft_worker:
        # Any pool that is not a PageInterleaveKVPoolMixin: no KV sharding. The
        # forward reads the KV buffer through the backend's own pool attribute,
        # which attention.kernel_sink points at the harness's KV pool. With the
        # unified pool (``unified_pool``) the draft's backends keep this one,
        # not translating: no server runs an MLA draft on it (EAGLE on a
        # hybrid-Mamba unified target needs the draft's KV fused into the
        # target's pages, and only an MHA draft fuses: kv_cache_configurator.
        # py:1111-1117, 1385-1405), so the unified checks drive the target's.
        runner.token_to_kv_pool = SimpleNamespace()
    if allocator is None:  # a static pool: an allocator the translator reads the page size of
        allocator = SimpleNamespace(page_size=setup.page_size)
    # SGLang's own translator, as ModelRunner.init_kv_index_translator builds
    # it: over a static pool reads stay in req_to_token; over the unified
    # pool's (the target's) it translates.
    runner.kv_index_translator = KVIndexTranslator(
        req_to_token=pool.req_to_token,
        token_to_kv_pool_allocator=allocator,
        token_to_kv_pool=runner.token_to_kv_pool,
        page_size=setup.page_size,
        device=device,
        is_draft_worker=is_draft_worker,
    )
    runner.max_running_requests = pool.size
    # Draft and draft-extend backends are built on the draft worker's runner:
    # no verify mask, no unpad buffer.
    runner.is_draft_worker = is_draft_worker
    runner.model_config = SimpleNamespace(
        **{**vars(runner.model_config), "get_num_kv_heads": lambda tp_size, dcp_size=1: 1}
    )
    return runner


def replace_batch(fb, **fields):
    """A copy of the namespace ``fb`` with ``fields`` changed."""
    return SimpleNamespace(**{**vars(fb), **fields})


GENERATIONS = (V0512, V0523)
BASES = tuple(g.base for g in GENERATIONS)


@functools.cache
def current():
    """The generation of the imported ``sglang`` (import it from the tree first)."""
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

    if hasattr(AttentionBackend, "init_forward_metadata_in_graph"):
        return V0523()
    return V0512()
