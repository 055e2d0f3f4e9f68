"""Load one SGLang tree's upstream attention test kit on CPU, with the harness's stand-ins.

``enter(tree)`` must run before anything imports sglang / triton:
- replacements 1, 3, 5 (``mla_harness.replacements.prepare_environment``:
  no FlashInfer, CUDA-only packages absent, TRITON_INTERPRET=1);
- ``uvicorn`` / ``fastapi`` stubbed (only ModelRunner's import chain needs them);
- the tree first on ``sys.path``.
``install()`` then applies replacement 2 (FlashInfer wrappers) and 9-11
(construction stand-ins) and swaps ``TRTLLMMLABackend._run_decode_kernel`` for
a float32 paged MLA decode (``paged_decode``) that records each call.
``cpu_ctx()``: replacements 4 and 12 for the kit's run.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parent

CALLS: list[dict] = []


class _Anything:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Anything()

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Anything()


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    roots = ("uvicorn", "fastapi")

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__file__ = f"<stub {spec.name}>"

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return type(attr, (_Anything,), {})

        m.__getattr__ = __getattr__
        return m

    def exec_module(self, module):
        pass


def enter(tree: str) -> None:
    sys.path.insert(0, str(SCRIPTS))
    from mla_harness import replacements

    replacements.prepare_environment(False)
    assert os.environ["TRITON_INTERPRET"] == "1"
    sys.meta_path.insert(0, _StubFinder())
    sys.path.insert(0, str(Path(tree).resolve()))


def paged_decode(query, kv_cache, block_tables, seq_lens, scaling, v_dim=512):
    """softmax(q k^T * scaling) v, float32, over ``block_tables``' pages up to
    ``seq_lens``; query token i of a q_len-token request sees keys
    [0, seq_lens - q_len + i]. query (bs, q_len, H, D) or (bs, H, D);
    kv_cache (pages, 1, page, D)."""
    import torch

    squeeze = query.dim() == 3
    q = query.unsqueeze(1) if squeeze else query
    bs, q_len, heads, _ = q.shape
    kv = kv_cache.squeeze(1)
    page = kv.shape[1]
    out = torch.zeros(bs, q_len, heads, v_dim, dtype=torch.float32)
    for b in range(bs):
        n = int(seq_lens[b])
        npages = -(-n // page)
        pages = block_tables[b, :npages].long()
        assert (pages >= 0).all(), (b, block_tables[b])
        keys = kv[pages].reshape(npages * page, -1)[:n].float()
        for i in range(q_len):
            last = n - q_len + i
            s = torch.einsum("hd,kd->hk", q[b, i].float(), keys[: last + 1]) * scaling
            out[b, i] = s.softmax(-1) @ keys[: last + 1, :v_dim]
    out = out.to(query.dtype)
    return out.squeeze(1) if squeeze else out


def install() -> None:
    from sglang.srt.layers.attention import trtllm_mla_backend as module

    from mla_harness import replacements

    replacements.install_flashinfer_wrappers()
    replacements.install_construction_stand_ins(module, False)

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
def cpu_ctx():
    from mla_harness import replacements

    with replacements.cuda_factories_on_cpu(False), replacements.unpinned_host_on_cpu(False):
        yield
