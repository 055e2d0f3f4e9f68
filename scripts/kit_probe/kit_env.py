"""Load one SGLang tree's upstream attention test kit on CPU, with the harness's stand-ins.

``enter(tree)`` must run before anything imports sglang / triton:
- replacements 1, 3, 5 (``mla_harness.replacements.prepare_environment``:
  no FlashInfer, CUDA-only packages absent, TRITON_INTERPRET=1);
- ``uvicorn`` / ``fastapi`` stubbed (only ModelRunner's import chain needs them);
- the tree first on ``sys.path``.
``install()`` then applies replacement 2 (FlashInfer wrappers) and 9-11
(construction stand-ins) and swaps ``TRTLLMMLABackend._run_decode_kernel`` for
a float32 paged MLA decode (``paged_decode``) that records each call.
``device_ctx()``: replacements 4 and 12 for the kit's run (on CPU only).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parent

CALLS: list[dict] = []


def enter(tree: str, use_cuda: bool = False) -> None:
    sys.path.insert(0, str(SCRIPTS))
    from mla_harness import replacements

    replacements.prepare_environment(use_cuda)
    assert use_cuda or os.environ["TRITON_INTERPRET"] == "1"
    replacements.install_inert_modules(("uvicorn", "fastapi"), only_absent=False)
    sys.path.insert(0, str(Path(tree).resolve()))


def paged_decode(query, kv_cache, block_tables, seq_lens, scaling, v_dim=512):
    """softmax(q k^T * scaling) v, float32, over ``block_tables``' pages up to
    ``seq_lens``; query token i of a q_len-token request sees keys
    [0, seq_lens - q_len + i]. query (bs, q_len, H, D) or (bs, H, D);
    kv_cache (pages, 1, page, D). Static shapes and no host reads, so it can
    be captured in a CUDA graph (the kit's runners capture the kernel call)."""
    import torch

    squeeze = query.dim() == 3
    q = query.unsqueeze(1) if squeeze else query
    bs, q_len = q.shape[:2]
    kv = kv_cache.squeeze(1)
    page, width = kv.shape[1], block_tables.shape[1]
    keys = kv[block_tables.clamp(min=0).long()].reshape(bs, width * page, -1).float()
    pos = torch.arange(width * page, device=q.device)
    last = seq_lens[:, None].long() - q_len + torch.arange(q_len, device=q.device)
    mask = pos[None, None, :] <= last[:, :, None]  # (bs, q_len, keys)
    scores = torch.einsum("bqhd,bkd->bqhk", q.float(), keys) * scaling
    scores = scores.masked_fill(~mask[:, :, None, :], float("-inf"))
    out = torch.einsum("bqhk,bkd->bqhd", scores.softmax(-1).nan_to_num(0.0), keys[..., :v_dim])
    out = out.to(query.dtype)
    return out.squeeze(1) if squeeze else out


def install(use_cuda: bool = False) -> None:
    from sglang.srt.layers.attention import trtllm_mla_backend as module

    from mla_harness import replacements

    replacements.install_flashinfer_wrappers()
    replacements.install_construction_stand_ins(module, use_cuda)

    def run(self, query, kv_cache, block_tables, seq_lens, max_seq_len, layer, **options):
        CALLS.append(
            dict(
                q_shape=tuple(query.shape),
                table=block_tables.clone(),
                seq_lens=seq_lens.clone(),
                max_seq_len=int(max_seq_len),
                options=dict(options),
                kv_cache=kv_cache,
            )
        )
        assert not options, options
        return paged_decode(query, kv_cache, block_tables, seq_lens, layer.scaling)

    module.TRTLLMMLABackend._run_decode_kernel = run


@contextlib.contextmanager
def device_ctx(use_cuda: bool = False):
    from mla_harness import replacements

    with (
        replacements.cuda_factories_on_cpu(use_cuda),
        replacements.unpinned_host_on_cpu(use_cuda),
    ):
        yield
