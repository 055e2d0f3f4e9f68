"""The backend's real forward, up to the attention kernel it calls.

A CUDA graph runner captures the model's forward, so a graph's attention reads
whatever metadata work the forward itself does, plus what
``init_forward_metadata_replay_cuda_graph`` did before the replay. To see what
the kernel is given, ``attend`` runs ``forward_decode`` / ``forward_extend``
(decode / target verify and draft extend) with the batch the graph was
captured with, and ``kernel_sink`` takes the place of ``_run_decode_kernel``,
the backend's hook for swapping the trtllm-gen kernel (SM100 only): it
records the kernel's arguments and hands them to a consumer.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from . import launches

KV_DIM = 576  # kv_lora_rank + qk_rope_head_dim of the stand-in model
V_DIM = 512  # kv_lora_rank: MLA's absorbed value width


def layer(layer_id: int, heads: int) -> SimpleNamespace:
    """The fields of ``RadixAttention`` the forward reads before the kernel."""
    return SimpleNamespace(
        layer_id=layer_id,
        tp_q_head_num=heads,
        tp_k_head_num=1,
        head_dim=KV_DIM,
        v_head_dim=V_DIM,
    )


class KVPool:
    """``token_to_kv_pool``: one buffer serves every layer."""

    def __init__(self, buffer: torch.Tensor):
        self.buffer = buffer

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.buffer


def zero_kv_pool(page_size: int, device) -> KVPool:
    """One page of zeros: enough where the kernel's output is not looked at."""
    return KVPool(torch.zeros(page_size, 1, KV_DIM, dtype=torch.bfloat16, device=device))


@contextlib.contextmanager
def kernel_sink(backend, consume=None, record: bool = True):
    """Replace ``backend._run_decode_kernel``; yields the list of its calls.

    Each call is recorded as ``{"query", "block_tables", "seq_lens",
    "max_seq_len", "options"}`` (the tensors themselves, as the kernel would
    read them; ``options``: the keyword-only arguments v0.5.23's hook adds,
    ``causal_seqs``, ``cp_world``, ``cp_rank``, ``return_lse``, as passed).
    ``consume`` (query, kv_cache, block_tables, seq_lens, page_size) -> (bs,
    q_len, heads, V_DIM) computes the output; by default it is left
    uninitialized. ``record=False``: nothing is kept (the list stays empty),
    so that a forward compiled by torch.compile does not guard on its length;
    nor are the call's tensors kept alive, as with the real kernel.
    """
    calls = []

    def run(query, kv_cache, block_tables, seq_lens, max_seq_len, layer, **options):
        launches.note("attention")
        if record:
            calls.append(
                {
                    "query": query,
                    "block_tables": block_tables,
                    "seq_lens": seq_lens,
                    "max_seq_len": max_seq_len,
                    "options": options,
                }
            )
        if options.get("return_lse"):
            raise AssertionError("the kernel was asked for its LSE (DCP): not a path under test")
        if consume is not None:
            return consume(query, kv_cache.squeeze(1), block_tables, seq_lens)
        return query.new_empty(*query.shape[:-1], V_DIM)

    backend._run_decode_kernel = run
    try:
        yield calls
    finally:
        del backend._run_decode_kernel


def graph_batch(
    mode, bs: int, req_pool_indices, seq_lens, spec_info, kv_pool: KVPool, extend_len=None
):
    """The ``ForwardBatch`` a graph runner captures with: its static buffers.
    ``extend_len``: draft extend's tokens per request, which the draft-extend
    runner captures as ``extend_seq_lens(_cpu)`` (``eagle_draft_extend_cuda_graph_runner.py:
    120, 289-293, 367``)."""
    fb = SimpleNamespace(
        forward_mode=mode,
        batch_size=bs,
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        spec_info=spec_info,
        token_to_kv_pool=kv_pool,
        decode_trtllm_mla_metadata=None,
        extend_seq_lens=None,
        extend_seq_lens_cpu=None,
        positions=None,
    )
    if extend_len is not None:
        fb.extend_seq_lens_cpu = [extend_len] * bs
        fb.extend_seq_lens = torch.full(
            (bs,), extend_len, dtype=torch.int32, device=req_pool_indices.device
        )
    return fb


def attend(backend, fb, layer_, q: torch.Tensor):
    """One attention layer's forward; returns its output.

    ``q``: (bs * q_len, heads * KV_DIM), the absorbed query (nope and rope
    already merged, as on the FP8 path).
    """
    if fb.forward_mode.is_decode_or_idle():
        fn = backend.forward_decode
    else:
        fn = backend.forward_extend
    return fn(q, None, None, layer_, fb, save_kv_cache=False)


def attend_split(backend, fb, layer_, q: torch.Tensor, k: torch.Tensor, k_rope: torch.Tensor):
    """One attention layer's forward as an MLA layer calls it (DeepSeek's
    ``forward_absorb_core`` through ``RadixAttention``): the absorbed query
    split into ``q_nope`` (its first V_DIM of each head) and ``q_rope``, the
    latent KV row as ``k`` (also passed as ``v``) and ``k_rope``, so the
    backend builds the kernel's query itself (on an FP8 KV cache: its FP8
    quantization, ``mla_quantize_without_rope_for_fp8`` or the cast after the
    merge). ``q``: (tokens, heads * KV_DIM); ``k``: (tokens, 1, V_DIM);
    ``k_rope``: (tokens, 1, KV_DIM - V_DIM). With ``save_kv_cache=False``
    the KV rows are quantized, as the forward does, but not written.
    """
    q3 = q.view(q.shape[0], layer_.tp_q_head_num, KV_DIM)
    if fb.forward_mode.is_decode_or_idle():
        fn = backend.forward_decode
    else:
        fn = backend.forward_extend
    return fn(
        q3[..., :V_DIM],
        k,
        k,
        layer_,
        fb,
        save_kv_cache=False,
        q_rope=q3[..., V_DIM:],
        k_rope=k_rope,
    )


def each_layer(backends, bs: int, layer_ids, heads: int):
    """(backend, layer) for each attention layer a captured forward runs, in order.

    ``backends``: the multi-step draft's step backends, or one backend. Each
    first gets the metadata that capturing ``bs`` left it (a CUDA graph keeps
    reading that object's buffers; an eager re-run must be told, as later
    captures move the attribute on).
    """
    for backend in backends:
        backend.forward_decode_metadata = backend.decode_cuda_graph_metadata[bs]
        for layer_id in layer_ids:
            yield backend, layer(layer_id, heads)


def run_layers(backends, fb, q: torch.Tensor, layer_ids, heads: int, consume=None) -> list:
    """A captured forward's attention layers (``each_layer``) on ``fb``; their outputs."""
    with contextlib.ExitStack() as stack:
        for backend in backends:
            stack.enter_context(kernel_sink(backend, consume))
        return [
            attend(backend, fb, layer_, q)
            for backend, layer_ in each_layer(backends, fb.batch_size, layer_ids, heads)
        ]
