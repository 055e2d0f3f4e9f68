"""One driver for every phase: eager metadata, CUDA-graph capture and replay.

``PhaseDriver`` makes, for a row of ``phases.TABLE``, the calls SGLang's model
runner and graph runners make, with their arguments: ``init_forward_metadata``,
``init_cuda_graph_state``, the capture call per batch size on the runner's
static buffers, and the replay call after a batch is copied into them
(``StaticInputs``). Each is returned as a thunk for the caller to count
(``probe``), time (``mla_bench.worker``) or just run (``consumer``).
``forward`` runs what the graph captured at a batch size runs (its attention
layers, up to the kernel); ``ForwardGraph`` captures it as a runner does.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch

from . import attention
from .batches import Batch, StaticInputs, forward_batch
from .launches import count_launches
from .phases import Phase
from .standin import Backends, Setup


class PhaseDriver:
    def __init__(self, phase: Phase, backends: Backends, setup: Setup, device: str, kv_pool=None):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        self.phase, self.setup, self.device, self.runner = phase, setup, device, backends.runner
        self.mode = ForwardMode[phase.mode]
        self.backend = getattr(backends, phase.role)
        # The backends whose forward a captured graph runs: each draft step's, or the one.
        self.steps = list(self.backend.attn_backends) if phase.multi_step else [self.backend]
        self.q_len, self.heads = phase.tokens(setup), setup.model.q_heads
        self.kv_pool = kv_pool or attention.zero_kv_pool(setup.page_size, device)
        fill = self.steps[0].get_cuda_graph_seq_len_fill_value()
        self.static = StaticInputs(setup.max_bs, fill, device)
        self.graph_batches = {}  # bs -> the batch its graph's forward was captured with

    def forward_batch(self, batch: Batch):
        if self.phase.fixed_extend:
            batch = replace(batch, extend_lens=(self.q_len,) * batch.size)
        spec_info = self.phase.spec_info(self.setup)
        return forward_batch(batch, self.mode, self.runner, self.device, spec_info)

    def eager(self, fb):
        return partial(self.backend.init_forward_metadata, fb)

    def eager_metadata(self, fb) -> list:
        """What ``eager(fb)`` left for the kernel, per step backend."""
        if self.phase.multi_step:
            return [b.forward_decode_metadata for b in self.steps]
        return [fb.decode_trtllm_mla_metadata]

    def kernel_lens(self, fb, metadata):
        """The KV lengths the kernel is given: decode reads the batch's own."""
        return fb.seq_lens if self.phase.mode == "DECODE" else metadata.seq_lens_k

    def init_state(self):
        max_bs = self.setup.max_bs
        return partial(self.backend.init_cuda_graph_state, max_bs, max_bs * self.q_len)

    def capture(self, bs: int):
        rpi, lens = self.static.capture_inputs(bs)
        spec_info = self.phase.spec_info(self.setup)
        extend_len = self.q_len if self.mode.is_draft_extend(include_v2=True) else None
        self.graph_batches[bs] = attention.graph_batch(
            self.mode, bs, rpi, lens, spec_info, self.kv_pool, extend_len
        )
        capture = self.backend.init_forward_metadata_capture_cuda_graph
        if self.phase.multi_step:  # a forward batch on the static buffers
            batch = Batch(tuple(rpi.tolist()), tuple(lens.tolist()))
            fb = forward_batch(batch, self.mode, self.runner, self.device, spec_info)
            fb.req_pool_indices, fb.seq_lens = rpi, lens
            return partial(capture, fb)
        return partial(capture, bs, bs * self.q_len, rpi, lens, None, self.mode, spec_info)

    def replay(self, batch: Batch, bs: int):
        """Copies ``batch`` into the static buffers (padded to ``bs``) now."""
        fb, static = self.forward_batch(batch), self.static
        replay = self.backend.init_forward_metadata_replay_cuda_graph
        if self.phase.multi_step:  # the forward batch, on the buffers only when padded
            return partial(replay, static.padded_draft_batch(fb, bs), bs)
        static.load(fb, bs)
        n = None if self.phase.whole_buffers else bs
        lens_sum = fb.seq_lens_sum + (bs - fb.batch_size) * static.fill_value
        return partial(
            replay,
            bs,
            static.req_pool_indices[:n],
            static.seq_lens[:n],
            lens_sum,
            None,
            self.mode,
            fb.spec_info,
            seq_lens_cpu=static.seq_lens_cpu[:n],
        )

    def graph_metadata(self, bs: int) -> list:
        return [b.decode_cuda_graph_metadata[bs] for b in self.steps]

    def query(self, bs: int) -> torch.Tensor:
        q = torch.zeros(bs * self.q_len, self.heads * attention.KV_DIM, dtype=torch.bfloat16)
        return q.to(self.device)

    def layers(self, bs: int):
        return attention.each_layer(self.steps, bs, self.phase.layers, self.heads)

    def forward(self, bs: int, q: torch.Tensor, consume=None) -> list:
        fb = self.graph_batches[bs]
        return attention.run_layers(self.steps, fb, q, self.phase.layers, self.heads, consume)


def graph_size(raw_bs: int, capture_sizes) -> int:
    """The captured batch size a runner replays ``raw_bs`` requests with."""
    return min(b for b in capture_sizes if b >= raw_bs)


class ForwardGraph:
    """``run`` captured as a runner captures its forward: an eager warm-up (its
    launches counted), then on CUDA a ``torch.cuda.CUDAGraph`` (none with
    ``skip_idle`` where the warm-up launched nothing). Off CUDA (a smoke test of
    the harness) ``replay`` re-runs ``run`` eagerly."""

    def __init__(self, run, device: str, skip_idle: bool = False):
        self.run, self.graph, cuda = run, None, device.startswith("cuda")
        with count_launches() as counts:
            self.outs = run()
            if cuda:
                torch.cuda.synchronize()
        if cuda and not (skip_idle and counts.launches == 0):
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.outs = run()

    def replay(self) -> list:
        if self.graph is None:
            self.outs = self.run()
        else:
            self.graph.replay()
        return self.outs
