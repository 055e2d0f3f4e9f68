"""The metadata the MLA attention kernel reads, and nothing else.

``trtllm_batch_decode_with_kv_cache_mla`` reads, per request ``b``, the first
``ceil(L_b / page_size)`` entries of row ``b`` of ``block_tables``, where
``L_b`` is the ``seq_lens`` it is passed (decode: ``forward_batch.seq_lens``;
target verify / draft extend: ``metadata.seq_lens_k``), plus the scalar
``max_seq_len`` (derived from ``metadata.max_seq_len_k``). Entries past that
prefix are never read, so they are not compared; nor are fields the forward
pass does not read (``cu_seqlens_q``, ``seq_lens_q``, ``max_seq_len_q``,
``sum_seq_lens_q``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import torch


@dataclass(frozen=True)
class KernelView:
    """What the kernel reads of one metadata object, for ``bs`` requests."""

    seq_lens: np.ndarray  # per request: the KV length it is given
    max_seq_len_k: int | None
    block_prefix: list[np.ndarray]  # per request: the table entries it reads
    table_width: int
    # (bs, q_len): which query token (index + 1, see driver.query) the kernel
    # reads in each slot; 0 for a padded slot. None where no forward ran.
    query_tokens: np.ndarray | None = None


def kernel_view(metadata, kernel_seq_lens, bs: int, page_size: int) -> KernelView:
    """Kernel-visible content of ``metadata`` for the first ``bs`` rows."""
    lens = _np(kernel_seq_lens)[:bs]
    table = _np(metadata.block_kv_indices)
    pages = -(-lens // page_size)
    return KernelView(
        seq_lens=lens.astype(np.int64),
        max_seq_len_k=None if metadata.max_seq_len_k is None else int(metadata.max_seq_len_k),
        block_prefix=[table[b, : pages[b]].astype(np.int64) for b in range(bs)],
        table_width=int(table.shape[1]),
    )


def kernel_call_view(call: dict, max_seq_len_k, bs: int, page_size: int) -> KernelView:
    """``kernel_view`` of one recorded kernel call (see ``attention.kernel_sink``)."""
    metadata = SimpleNamespace(block_kv_indices=call["block_tables"], max_seq_len_k=max_seq_len_k)
    view = kernel_view(metadata, call["seq_lens"], bs, page_size)
    query = call.get("query")
    if query is None:
        return view
    # (bs, q_len, heads, dim): every element of a token's row holds its number.
    rows = query.reshape(query.shape[0], -1, query.shape[-2] * query.shape[-1])
    tokens = _np(rows[..., 0].float())
    return replace(view, query_tokens=tokens[:bs].astype(np.int64))


def expected_block_prefix(req_to_token, req_pool_indices, seq_lens, page_size):
    """Independent oracle: first slot of every page a request covers, in pages."""
    pool = _np(req_to_token)
    out = []
    for rpi, length in zip(_np(req_pool_indices), _np(seq_lens), strict=True):
        slots = pool[int(rpi), : -(-int(length) // page_size) * page_size : page_size]
        out.append((slots // page_size).astype(np.int64))
    return out


def buffer_pointers(metadata) -> dict:
    """data_ptr of every tensor field of a captured graph's metadata."""
    return {
        name: value.data_ptr()
        for name, value in vars(metadata).items()
        if isinstance(value, torch.Tensor)
    }


def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
