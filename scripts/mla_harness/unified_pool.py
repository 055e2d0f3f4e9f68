"""SGLang's translating KV pool: the unified memory pool of an MLA hybrid-Mamba model.

With ``--enable-unified-memory`` a hybrid-Mamba model's target worker builds
its pools with ``init_unified_mamba_pools`` (v0.5.23's ``kv_cache_configurator
._init_pools``, 596-624, then ``_init_unified_mamba_pools`` 865-946): one byte
buffer split between the full-attention KV sub-pool (MLA rows when the model
uses the MLA backend, ``unified_memory_pool.py:1638-1656``) and the Mamba
state, a ``UnifiedMambaTokenToKVPoolAllocator`` whose ids are VIRTUAL (what
``req_to_token`` stores) and map to physical pages through its
``full_v2p_page_table``. ``ModelRunner.init_kv_index_translator``
(``model_runner.py:950-961``) then builds the ``KVIndexTranslator`` over that
allocator and pool, which is translating (``kv_index_translator.py:136-147``).
trtllm_mla is an allowed backend there (``arg_groups/kv_cache_hook.py``:
``_SPEC_VERIFY_AUDITED_BACKENDS`` 479-488 for EAGLE's verify, the
page-major allow-list for MLA models 801-809, and under ``--dcp-size > 1``
748-762).

``build`` makes that stack on the harness's device with the real
``init_unified_mamba_pools`` (one full-attention layer and one Mamba layer, as
SGLang's own CPU fixture ``sglang/test/unified_allocator_fixtures.py`` builds
its pools), allocates every request's pages from the real allocator (in
chunks, freeing some and allocating again, so that the virtual pages of a
request map to physical pages out of order) and writes ``req_to_token`` with
the virtual ids: the harness's shuffled layout (``standin.req_to_token_pool``)
with each of its pages replaced by an allocated virtual page. Under DCP the
allocator's pages are widened (``page_size * dcp_size`` tokens,
``unified_mamba.py:61-74``), which is the harness layout's page too.

The reference (``physical_pages``) is the allocator's documented rule,
``physical(t) = v2p[t // ps] * ps + t % ps`` (``MultiEndedAllocator.
translate_kv_loc``): a virtual page's physical page is its entry of
``full_v2p_page_table``, read from the allocator, not through the translator.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from .attention import KV_DIM, V_DIM


def build(setup, device: str, harness_pool) -> SimpleNamespace:
    """The unified pool stack for ``setup`` (its req_to_token pool, KV pool,
    allocator and the fillers of ``allocate_pages``), with ``req_to_token`` written from
    ``harness_pool`` (``standin.req_to_token_pool``) as virtual ids; call it
    after the server args and parallel state are published
    (``sglang_api.V0523.configure``: the allocator reads the DCP size)."""
    from sglang.srt.mem_cache.unified_memory_pool import init_unified_mamba_pools

    m = setup.model
    dcp, page = setup.dcp_size, setup.page_size
    wide = page * dcp  # the allocator's (widened) page
    layout = harness_pool.req_to_token.long().cpu()
    pages = int((layout // wide).max())  # the harness layout's pages are 1..pages
    mamba = SimpleNamespace(  # as unified_allocator_fixtures.build_tri_pool's
        shape=SimpleNamespace(conv=[(3, 8)], temporal=(1, 4, 8)),
        dtype=SimpleNamespace(conv=torch.bfloat16, temporal=torch.float32),
        layers=[1],
    )
    bundle = init_unified_mamba_pools(
        device=device,
        kv_cache_dtype=setup.kv_dtype,
        head_num=1,
        head_dim=KV_DIM,
        v_head_dim=V_DIM,
        page_size=page,
        start_layer=0,
        end_layer=2,
        is_draft_worker=False,
        use_mla_backend=True,
        kv_lora_rank=m.kv_lora_rank,
        qk_rope_head_dim=m.qk_rope_head_dim,
        mamba_layer_ids=[1],
        full_attention_layer_ids=[0],
        mamba2_cache_params=mamba,
        model_context_len=setup.context_len,
        # kv_cache_configurator._init_unified_mamba_pools: 4 + draft tokens.
        extra_max_context_len=4 + setup.draft_tokens,
        # The layout's pages and the fillers (``allocate_pages``), rank-local rows.
        max_total_num_tokens=(2 * pages + 16) * page,
        max_mamba_cache_size=setup.rows,
        max_num_reqs=setup.rows,
        enable_memory_saver=False,
        enable_mamba_extra_buffer=False,
        enable_mamba_extra_buffer_lazy=False,
        speculative_num_draft_tokens=setup.draft_tokens,
        disable_overlap_schedule=True,
        need_sort=False,
    )
    allocator = bundle.token_to_kv_pool_allocator
    assert allocator.page_size == wide, (allocator.page_size, wide)
    virtual, fillers = allocate_pages(allocator, pages, seed=setup.page_size + dcp)
    # Harness page p (1-based) becomes the p-th allocated virtual page.
    ids = virtual[layout // wide - 1] * wide + layout % wide
    req_to_token = bundle.req_to_token_pool.req_to_token
    rows, width = layout.shape
    assert req_to_token.shape[0] >= rows and req_to_token.shape[1] >= width, req_to_token.shape
    req_to_token[:rows, :width] = ids.to(req_to_token.dtype).to(req_to_token.device)
    return SimpleNamespace(
        req_to_token_pool=bundle.req_to_token_pool,
        token_to_kv_pool=bundle.token_to_kv_pool,
        allocator=allocator,
        fillers=fillers,  # pages still held between the layout's (``release``)
    )


def allocate_pages(allocator, n: int, seed: int) -> tuple[torch.Tensor, list]:
    """``n`` virtual pages from the real allocator, in six chunks with a
    filler of the chunk's size allocated after each; the fillers of three chunks (chosen
    by ``seed``) are freed at once, so the allocator compacts (moves the live
    pages above each hole down and rebinds their ``full_v2p_page_table``
    entries). Returns the pages in allocation order (int64, on the host) and
    the fillers still held (``release`` moves live pages again)."""
    wide = allocator.page_size
    chunks = [n // 6 + (i < n % 6) for i in range(6)]
    pages, fillers = [], []
    for size in chunks:
        ids = allocator.alloc(size * wide) if size else None
        filler = allocator.alloc(max(size, 1) * wide)
        assert filler is not None and (ids is not None or not size), "unified pool too small"
        if size:
            pages.append(ids.cpu().view(-1, wide)[:, 0] // wide)
        fillers.append(filler)
    order = torch.randperm(6, generator=torch.Generator().manual_seed(seed)).tolist()
    release(allocator, [fillers[i] for i in order[:3]])
    return torch.cat(pages).long(), [fillers[i] for i in order[3:]]


def release(allocator, fillers: list) -> None:
    """Free ``fillers`` (from ``allocate_pages``): the live pages above them
    move, their ``full_v2p_page_table`` entries rebound in place."""
    for ids in fillers:
        allocator.free(ids)


def physical_pages(allocator, virtual_pages: torch.Tensor) -> torch.Tensor:
    """The physical pages of ``virtual_pages`` (rank-local, collapsed), by the
    allocator's rule: their entries of ``full_v2p_page_table``."""
    v2p = allocator.full_v2p_page_table
    return v2p[virtual_pages.to(v2p.device).long()].to(virtual_pages.device)


def kv_pages(allocator) -> int:
    """Pages a KV buffer indexed by physical or virtual page ids needs."""
    a = allocator.full_attn_allocator
    return max(a.num_pages, a.num_virtual_ids) + 1
