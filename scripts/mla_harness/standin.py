"""A minimal ModelRunner stand-in and the real backends built on it.

Modelled on SGLang's own backend tests: a ``SimpleNamespace`` runner that holds
what the backends' constructors read (model config, KV-cache dtype, page size,
``req_to_token`` pool, server args). The backends themselves are SGLang's.
"""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from . import sglang_api
from .backends import Backends


@dataclass(frozen=True)
class MLAModel:
    """Attention shape of an MLA model (defaults: DeepSeek-V3 / Kimi-K2 at TP 4)."""

    num_attention_heads: int = 64
    attention_tp_size: int = 4
    kv_lora_rank: int = 512
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128

    @property
    def q_heads(self) -> int:
        """Query heads per attention-TP rank (RadixAttention.tp_q_head_num)."""
        return self.num_attention_heads // self.attention_tp_size


@dataclass(frozen=True)
class Setup:
    """What one set of backends is built for."""

    page_size: int = 64
    context_len: int = 4096
    max_bs: int = 8
    steps: int = 3
    topk: int = 1
    draft_tokens: int = 4
    pool_size: int = 0  # req_to_token rows; 0: max_bs + 4
    kv_dtype: torch.dtype = torch.bfloat16
    model: MLAModel = MLAModel()
    # Decode context parallelism: the DCP group's size and this process's rank
    # (replacement 17; v0.5.23 only). Token t of a request lives on rank t % dcp_size.
    dcp_size: int = 1
    dcp_rank: int = 0
    # The target's KV pool is SGLang's translating unified pool
    # (``--enable-unified-memory``, ``unified_pool``; v0.5.23 only):
    # req_to_token holds virtual ids, the kernel reads physical pages.
    unified_pool: bool = False

    @property
    def rows(self) -> int:
        return self.pool_size or self.max_bs + 4

    @property
    def reserve(self) -> int:
        """Tokens kept free at the end of the context: the most one EAGLE
        iteration appends to a request (draft tokens, or steps + 1), plus one."""
        return max(self.draft_tokens, self.steps + 1) + 1


def model_config(setup: Setup) -> SimpleNamespace:
    m = setup.model
    return SimpleNamespace(
        context_len=setup.context_len,
        num_attention_heads=m.num_attention_heads,
        get_num_kv_heads=lambda tp_size: 1,
        kv_lora_rank=m.kv_lora_rank,
        qk_nope_head_dim=m.qk_nope_head_dim,
        qk_rope_head_dim=m.qk_rope_head_dim,
        v_head_dim=m.v_head_dim,
        scaling=1.0 / math.sqrt(m.qk_nope_head_dim + m.qk_rope_head_dim),
    )


def server_args(setup: Setup) -> SimpleNamespace:
    return SimpleNamespace(
        page_size=setup.page_size,
        speculative_num_steps=setup.steps,
        speculative_eagle_topk=setup.topk,
        speculative_num_draft_tokens=setup.draft_tokens,
        disable_chunked_prefix_cache=True,
        disaggregation_mode="null",
        flashinfer_mla_disable_ragged=False,
        use_mla_backend=True,
    )


def req_to_token_pool(setup: Setup, device: str, seed: int) -> SimpleNamespace:
    """A pool whose rows map token positions to shuffled, page-aligned KV slots.

    Like SGLang's paged allocator, each request owns whole pages, in no order,
    so a block table built from it is a permutation a wrong index would expose.
    """
    dcp = setup.dcp_size
    pages_per_row = math.ceil(setup.context_len / (setup.page_size * dcp))
    gen = torch.Generator().manual_seed(seed)
    pages = torch.randperm(setup.rows * pages_per_row, generator=gen) + 1
    pages = pages.view(setup.rows, pages_per_row)
    offsets = torch.arange(setup.page_size)
    local = (pages[:, :, None] * setup.page_size + offsets).flatten(1)  # rank-local slots
    # Under DCP (SGLang's token-interleaved layout) token t is rank t % dcp's
    # local token t // dcp, and its slot keeps the owner: local_slot * dcp + rank.
    t = torch.arange(setup.context_len)
    slots = local[:, t // dcp] * dcp + t % dcp
    return SimpleNamespace(size=setup.rows, req_to_token=slots.to(torch.int32).to(device))


def model_runner(setup: Setup, device: str, seed: int = 0) -> SimpleNamespace:
    return SimpleNamespace(
        model_config=model_config(setup),
        kv_cache_dtype=setup.kv_dtype,
        dtype=torch.bfloat16,
        page_size=setup.page_size,
        device=device,
        req_to_token_pool=req_to_token_pool(setup, device, seed),
        server_args=server_args(setup),
    )


def build_backends(setup: Setup, device: str, seed: int = 0) -> Backends:
    """Construct the real backends (sglang must already be importable), the
    way the imported SGLang generation builds them (``sglang_api``)."""
    # Free earlier backends now: a CUDA graph destroyed by the garbage
    # collector while another is being captured invalidates that capture
    # (SGLang's runners freeze the GC around capture for the same reason).
    # Off CUDA there is no graph to free, and a full collection walks every
    # object of the imports (0.2-0.7 s each backend set).
    if device.startswith("cuda"):
        gc.collect()
    runner = model_runner(setup, device, seed)
    return sglang_api.current().build_backends(setup, runner, device)
