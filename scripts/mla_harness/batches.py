"""Forward batches as SGLang's EAGLE workers and CUDA-graph runners pass them.

A batch is a ``SimpleNamespace`` holding the ``ForwardBatch`` fields the
metadata path reads (as SGLang's own backend tests do). ``StaticInputs`` copies
a batch into persistent, padded input buffers the way the graph runners'
``replay`` does: real rows first, padded rows with ``seq_len`` = the backend's
fill value and stale ``req_pool_indices`` left from earlier replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch

from .launches import mark_host


@dataclass(frozen=True)
class Batch:
    """One batch of requests: what the scheduler hands the model runner."""

    req_pool_indices: tuple[int, ...]
    seq_lens: tuple[int, ...]
    extend_lens: tuple[int, ...] = ()  # draft extend: tokens per request

    @property
    def size(self) -> int:
        return len(self.seq_lens)


def forward_batch(batch: Batch, mode, runner, device: str, spec_info=None):
    """The ``ForwardBatch`` fields the trtllm metadata path reads."""
    seq_lens = torch.tensor(batch.seq_lens, dtype=torch.int64, device=device)
    seq_lens_cpu = torch.tensor(batch.seq_lens, dtype=torch.int64)
    mark_host(seq_lens_cpu)
    fb = SimpleNamespace(
        forward_mode=mode,
        batch_size=batch.size,
        req_pool_indices=torch.tensor(batch.req_pool_indices, dtype=torch.int64, device=device),
        seq_lens=seq_lens,
        seq_lens_cpu=seq_lens_cpu,
        seq_lens_sum=sum(batch.seq_lens),
        positions=seq_lens.clone(),
        req_to_token_pool=runner.req_to_token_pool,
        spec_info=spec_info,
        extend_seq_lens=None,
        extend_seq_lens_cpu=None,
        extend_prefix_lens_cpu=None,
    )
    if batch.extend_lens:
        fb.extend_seq_lens = torch.tensor(batch.extend_lens, dtype=torch.int32, device=device)
        fb.extend_seq_lens_cpu = list(batch.extend_lens)
    return fb


def draft_spec_info():
    """The EAGLE draft input as ``common_template`` sees it."""
    return SimpleNamespace(
        is_draft_input=lambda: True,
        is_verify_input=lambda: False,
        kv_indptr=None,
        kv_indices=None,
    )


def verify_spec_info(draft_tokens: int):
    return SimpleNamespace(
        is_draft_input=lambda: False,
        is_verify_input=lambda: True,
        draft_token_num=draft_tokens,
    )


class StaticInputs:
    """Persistent graph inputs of one CUDA-graph runner (max_bs rows), with the
    runners' dtypes: int64 ``req_pool_indices``, int32 ``seq_lens`` and
    ``seq_lens_cpu`` (``cuda_graph_runner.py:182-183, 253-258``; the EAGLE
    runners alike), while batches carry int64 ``seq_lens``."""

    def __init__(self, max_bs: int, fill_value: int, device: str):
        self.fill_value = fill_value
        self.req_pool_indices = torch.zeros(max_bs, dtype=torch.int64, device=device)
        self.seq_lens = torch.full((max_bs,), fill_value, dtype=torch.int32, device=device)
        self.seq_lens_cpu = torch.full((max_bs,), fill_value, dtype=torch.int32)
        mark_host(self.seq_lens_cpu)

    def capture_inputs(self, bs: int):
        return self.req_pool_indices[:bs], self.seq_lens[:bs]

    def load(self, fb, bs: int) -> None:
        """Copy a batch in as ``CudaGraphRunner.replay_prepare`` does."""
        raw_bs = fb.batch_size
        if bs != raw_bs:
            self.seq_lens.fill_(self.fill_value)
            self.seq_lens_cpu.fill_(self.fill_value)
        self.seq_lens[:raw_bs].copy_(fb.seq_lens)
        self.seq_lens_cpu[:raw_bs].copy_(fb.seq_lens_cpu)
        self.req_pool_indices[:raw_bs].copy_(fb.req_pool_indices)

    def padded_draft_batch(self, fb, bs: int):
        """``EAGLEDraftCudaGraphRunner.replay``: buffers only when padding."""
        self.load(fb, bs)
        if bs == fb.batch_size:
            return fb
        padded = SimpleNamespace(**vars(fb))
        padded.batch_size = bs
        padded.seq_lens = self.seq_lens[:bs]
        padded.req_pool_indices = self.req_pool_indices[:bs]
        padded.seq_lens_cpu = self.seq_lens_cpu[:bs]
        padded.positions = torch.cat([fb.positions, fb.positions.new_zeros(bs - fb.batch_size)])
        return padded
