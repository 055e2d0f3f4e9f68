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
from .backends import Backends
from .batches import Batch, StaticInputs, forward_batch
from .launches import count_launches
from .phases import Phase
from .standin import Setup


class PhaseDriver:
    def __init__(self, phase: Phase, backends: Backends, setup: Setup, device: str, kv_pool=None):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        from . import sglang_api

        self.api = sglang_api.current()
        if self.api.base not in phase.bases:
            raise ValueError(f"phase {phase.name} does not exist on {self.api.base}")
        self.phase, self.setup, self.device, self.runner = phase, setup, device, backends.runner
        self.mode = ForwardMode[phase.mode]
        self.backend = getattr(backends, phase.role)
        # The backends whose forward a captured graph runs: each draft step's, or the one.
        self.steps = list(self.backend.attn_backends) if phase.multi_step else [self.backend]
        self.q_len, self.heads = phase.tokens(setup), setup.model.q_heads
        self.kv_pool = kv_pool or attention.zero_kv_pool(setup.page_size, device)
        self.api.attach_kv_pool(self.steps, self.kv_pool)
        fill = self.steps[0].get_cuda_graph_seq_len_fill_value()
        self.static = StaticInputs(setup.max_bs, fill, device)
        self.graph_batches = {}  # bs -> the batch its graph's forward was captured with

    def spec_info(self):
        return self.api.spec_info(self.phase.spec_info(self.setup))

    def forward_batch(self, batch: Batch):
        if self.phase.fixed_extend:
            batch = replace(batch, extend_lens=(self.q_len,) * batch.size)
        fb = forward_batch(batch, self.mode, self.runner, self.device, self.spec_info())
        return self.api.complete_batch(fb)

    def eager(self, fb):
        return partial(self.backend.init_forward_metadata, fb)

    def eager_metadata(self, fb) -> list:
        """What ``eager(fb)`` left for the kernel, per step backend."""
        if self.phase.multi_step:
            return [b.forward_decode_metadata for b in self.steps]
        return [fb.decode_trtllm_mla_metadata]

    def kernel_lens(self, fb, metadata):
        """The KV lengths the kernel is given (``sglang_api``)."""
        return self.api.kernel_lens(self.phase, fb, metadata)

    def device_calls(self):
        """The replacements a backend call runs under (``sglang_api``)."""
        return self.api.device_calls(self.device.startswith("cuda"))

    def init_state(self):
        max_bs = self.setup.max_bs
        return partial(self.backend.init_cuda_graph_state, max_bs, max_bs * self.q_len)

    def capture_batch(self, bs: int, spec_info):
        """The forward batch a runner captures ``bs`` with: its static buffers."""
        rpi, lens = self.static.capture_inputs(bs)
        extend_len = self.q_len if self.phase.role == "draft_extend" else None
        return attention.graph_batch(self.mode, bs, rpi, lens, spec_info, self.kv_pool, extend_len)

    def capture(self, bs: int):
        """The metadata call a runner makes before capturing ``bs``."""
        return self.api.capture(self, bs)

    def in_graph(self, bs: int):
        """The metadata step a runner records into the graph of ``bs`` ahead of
        its forward (None where the SGLang generation has none): called after
        ``capture`` and, replaying, after ``replay`` (off CUDA the emulated
        graph replay; on CUDA it belongs inside the captured graph)."""
        return self.api.in_graph(self, bs)

    def replay(self, batch: Batch, bs: int):
        """Copies ``batch`` into the static buffers (padded to ``bs``) now;
        returns the metadata call a runner makes before replaying."""
        return self.api.replay(self, batch, bs)

    def graph_metadata(self, bs: int) -> list:
        return [b.decode_cuda_graph_metadata[bs] for b in self.steps]

    def query(self, bs: int) -> torch.Tensor:
        """The absorbed query, each token's row filled with its index + 1
        (exact in bf16 up to 256 tokens), so what reaches the kernel shows
        which token sits in each slot (``visible.kernel_call_view``)."""
        tokens = bs * self.q_len
        q = torch.arange(1, tokens + 1, dtype=torch.bfloat16)[:, None]
        return q.expand(tokens, self.heads * attention.KV_DIM).contiguous().to(self.device)

    def layers(self, bs: int):
        return attention.each_layer(self.steps, bs, self.phase.layers, self.heads)

    def forward(self, bs: int, q: torch.Tensor, consume=None) -> list:
        fb = self.graph_batches[bs]
        return attention.run_layers(self.steps, fb, q, self.phase.layers, self.heads, consume)

    def graph_step(self, bs: int, q: torch.Tensor, consume=None) -> list:
        """What a runner's graph of ``bs`` runs: the in-graph metadata step,
        then the forward."""
        step = self.in_graph(bs)
        if step is not None:
            step()
        return self.forward(bs, q, consume)


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
