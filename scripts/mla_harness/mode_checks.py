"""The series in the modes its callers use, run inside one tree, in a process of its own.

``python -m mla_harness.mode_checks --tree DIR [--device cpu|cuda] [--replays N]
[--compile]`` prints JSON, one record per named case (``CASES``,
``CAPTURE_MODES``, ``COMPILE_MODES``):

- ``eager_draft_extend``: hand-written draft-extend batches (uneven accept
  lengths, totals that divide by the batch size, more requests than the
  largest captured batch size, a long request that accepted few tokens)
  through the backend's real ``init_forward_metadata`` and ``forward_extend``,
  with and without the CUDA-graph state the draft-extend runner creates at
  start-up. The kernel hook (replacement 7) records what the attention kernel
  is given, query included, and runs a reference paged MLA attention on it;
  every token's output is compared with an independent oracle that attends
  over the request's ``req_to_token`` row up to the token's own position (no
  block table, no padding).
- ``double_capture``: one batch size captured twice on one backend, as
  ``CudaGraphRunner`` does with ``record_nolora_graph`` ("lora", then
  "nolora"). After the runner's replay call with a new batch, both captures'
  forwards must give the oracle result, and every tensor they read must live
  in a buffer ``init_cuda_graph_state`` made. On CUDA the captures are real
  ``torch.cuda.CUDAGraph``s and sentinel tensors allocated after the captures
  (they take whatever memory a capture freed) must survive the replays.
- ``compiled_capture`` (CUDA only, ``--compile``): ``CudaGraphRunner`` with
  ``--enable-torch-compile``: a forward of attention layers (``RadixAttention``
  calls ``attn_backend.forward``) compiled by SGLang's own ``patch_model`` and
  ``set_torch_compile_config`` for the batch sizes up to ``COMPILE_MAX_BS``,
  each captured as the runner does (capture call, two warm-up runs, then a
  ``torch.cuda.CUDAGraph``, largest batch size first), replayed with new
  batches and compared with the oracle; dynamo's graph and frame counts are
  reported per tree.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

from . import child

SETUP = dict(page_size=64, context_len=8192, max_bs=4, steps=3, draft_tokens=4)
SCALE = 1.0 / 24.0  # the reference kernel's softmax scale (consumer.paged_mla_decode)


@dataclass(frozen=True)
class Case:
    """One eager draft-extend batch (DRAFT_EXTEND: packed accept lengths)."""

    seq_lens: tuple[int, ...]
    extend_lens: tuple[int, ...]
    note: str
    padded_tokens: int = 0  # q's rows when DP attention pads them (0: sum(extend_lens))

    @property
    def tokens(self) -> int:
        """Rows of the query the forward gets."""
        return self.padded_tokens or sum(self.extend_lens)

    @property
    def kv_lens(self) -> list[int]:
        """What each padded row spans: seq_len - extend_len + max(extend_lens)."""
        top = max(self.extend_lens)
        return [s - e + top for s, e in zip(self.seq_lens, self.extend_lens, strict=True)]


CASES = {
    "uneven": Case((100, 137, 174), (1, 2, 2), "5 tokens over 3 requests: padded"),
    "uneven-divisible-2": Case((300, 200), (1, 3), "4 tokens over 2 requests, not 2 + 2"),
    "uneven-divisible-3": Case((90, 140, 250), (3, 1, 2), "6 tokens over 3, not 2 + 2 + 2"),
    "above-graph-bs": Case(
        (70, 80, 90, 100, 110, 120), (2, 1, 1, 2, 1, 1), "6 requests, graphs stop at 4"
    ),
    "long-row-few-accepted": Case(
        (100, 4095, 300), (3, 1, 3), "row 1 spans 4095 - 1 + 3 = 4097 tokens: 65 pages"
    ),
    "uniform": Case((500, 600), (4, 4), "every request 4 tokens: viewed, not padded"),
    # prepare_mlp_sync_batch pads q's tokens to the DP maximum and sets bs to
    # tokens // (steps + 1); extend_seq_lens_cpu keeps the real lengths.
    "dp-padded": Case((300, 200), (1, 4), "5 tokens padded to 8 for DP attention", 8),
}

# Graphs of the double-capture check, and of the torch.compile check (the
# modes CudaGraphRunner captures: decode, or target verify under EAGLE).
CAPTURE_MODES = ("decode", "verify", "extend_v1", "extend_v2")
COMPILE_MODES = ("decode", "verify")
COMPILE_MAX_BS = 2  # --torch-compile-max-bs: larger batch sizes capture eagerly


class Env:
    """The real backends of one tree on the stand-in runner, with a random KV cache."""

    def __init__(self, device: str, seed: int = 0):
        import torch

        from . import standin
        from .attention import KVPool

        self.torch = torch
        self.device = device
        self.setup = standin.Setup(**SETUP)
        self.backends = standin.build_backends(self.setup, device, seed)
        s = self.setup
        pages = s.rows * (s.context_len // s.page_size) + 2
        gen = torch.Generator().manual_seed(seed)
        kv = torch.randn(pages, s.page_size, 576, generator=gen).to(torch.bfloat16)
        self.kv_cache = kv.to(device)
        self.kv_flat = self.kv_cache.view(-1, 576).double()  # the oracle's copy
        self.pool = KVPool(self.kv_cache)
        self.req_to_token = self.backends.runner.req_to_token_pool.req_to_token.clone()
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        self.mode = ForwardMode

    @property
    def heads(self) -> int:
        return self.setup.model.q_heads

    def oracle(self, q_tok, row: int, position: int):
        """Attention of one token at ``position`` of pool row ``row`` over the
        tokens 0..position, read from ``req_to_token`` (heads, 512)."""
        torch = self.torch
        slots = self.req_to_token[row, : position + 1].long()
        kv = self.kv_flat[slots]  # (L, 576)
        scores = torch.einsum("hd,kd->hk", q_tok.double(), kv) * SCALE
        return scores.softmax(-1) @ kv[:, :512]

    def consumer(self, record: list):
        """The kernel hook's consumer: records the kernel's arguments and runs the
        reference paged MLA decode on them."""
        from .consumer import paged_mla_decode

        torch, page = self.torch, self.setup.page_size

        def consume(query, kv, block_tables, kv_lens):
            record.append({"query": query, "block_tables": block_tables, "seq_lens": kv_lens})
            if query.shape[0] != block_tables.shape[0]:  # a query for other requests
                return query.new_zeros(*query.shape[:-1], 512, dtype=torch.float64)
            return paged_mla_decode(query, kv, block_tables, kv_lens, page).contiguous()

        return consume


def _max_err(got, want) -> float:
    from .consumer import rel_err

    return rel_err(got.double(), want)


def eager_draft_extend(env: Env, name: str, case: Case, graph_state: bool) -> dict:
    """One ``CASES`` entry through the eager draft-extend path."""
    torch = env.torch
    from . import attention, replacements
    from .batches import Batch, forward_batch

    s, backend = env.setup, env.backends.draft_extend
    use_cuda = env.device.startswith("cuda")
    if graph_state:
        with replacements.cuda_factories_on_cpu(use_cuda):
            backend.init_cuda_graph_state(s.max_bs, s.max_bs * (s.steps + 1))
    bs = len(case.seq_lens)
    rows = tuple(range(1, bs + 1))
    batch = Batch(rows, case.seq_lens, case.extend_lens)
    fb = forward_batch(batch, env.mode.DRAFT_EXTEND, env.backends.runner, env.device)
    fb.token_to_kv_pool = env.pool
    backend.init_forward_metadata(fb)
    meta = fb.decode_trtllm_mla_metadata
    total = case.tokens
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(total, env.heads * attention.KV_DIM, generator=gen).to(torch.bfloat16)
    q = q.to(env.device)
    calls: list = []
    with attention.kernel_sink(backend, env.consumer(calls)) as kernel_calls:
        out = attention.attend(backend, fb, attention.layer(0, env.heads), q)
    (call,), (kernel_call,) = calls, kernel_calls
    query, table, kv_lens = call["query"], call["block_tables"], call["seq_lens"].cpu()
    q3 = q.view(total, env.heads, attention.KV_DIM)
    out3 = out.view(total, env.heads, attention.V_DIM)
    wrong_query, worst, start = [], 0.0, 0
    for b, (seq_len, ext) in enumerate(zip(case.seq_lens, case.extend_lens, strict=True)):
        for j in range(ext):
            t = start + j
            if b >= query.shape[0] or j >= query.shape[1] or not torch.equal(query[b, j], q3[t]):
                wrong_query.append(t)
            want = env.oracle(q3[t], rows[b], seq_len - ext + j)
            worst = max(worst, _max_err(out3[t], want))
        start += ext
    pages_needed = [-(-int(n) // s.page_size) for n in kv_lens]
    return {
        "case": name,
        "graph_state": graph_state,
        "note": case.note,
        "tokens": total,
        "query_shape": list(query.shape),
        "wrong_query_tokens": wrong_query,
        "max_rel_err": worst,
        "table_width": int(table.shape[1]),
        "pages_needed": pages_needed,
        "seq_lens_k": kv_lens.tolist(),
        "max_seq_len_k": int(meta.max_seq_len_k),
        "kernel_max_seq_len": int(kernel_call["max_seq_len"]),
    }


def _driver(env: Env, phase: str):
    """The harness's driver for a row of the phase table, on ``env``'s backends."""
    from .driver import PhaseDriver
    from .phases import BY_NAME

    return PhaseDriver(BY_NAME[phase], env.backends, env.setup, env.device, kv_pool=env.pool)


class _Replays:
    """New, partly padded batches through a driver's replay call, and every
    real token of a graph's outputs against the oracle."""

    def __init__(self, env: Env, driver, seed: int = 0):
        self.env, self.driver, self.rng = env, driver, random.Random(seed)
        self.offset = env.setup.draft_tokens if driver.phase.mode == "TARGET_VERIFY" else 0
        self.worst, self.compared = 0.0, 0

    def load(self, i: int) -> int:
        """Batch ``i`` into the static buffers and the replay call; its graph bs."""
        from .batches import Batch

        s, q_len, rng = self.env.setup, self.driver.q_len, self.rng
        bs = rng.randint(1, s.max_bs)
        raw_bs = bs if i % 2 else rng.randint(1, bs)  # padded half the time
        self.rows = rng.sample(range(s.rows), raw_bs)
        self.seq_lens = [rng.randint(q_len + 1, s.context_len - q_len - 1) for _ in self.rows]
        batch = Batch(tuple(self.rows), tuple(self.seq_lens), (q_len,) * raw_bs)
        self.driver.replay(batch, bs)()
        return bs

    def query(self, q, i: int):
        gen = self.env.torch.Generator().manual_seed(i)
        q.copy_(self.env.torch.randn(q.shape, generator=gen).to(q.device))

    def compare(self, q, outs, scales=None) -> None:
        from . import attention

        bs, q_len, heads = q.shape[0] // self.driver.q_len, self.driver.q_len, self.env.heads
        q4 = q.view(bs, q_len, heads, attention.KV_DIM)
        for k, out in enumerate(outs):
            scale = 1 if scales is None else scales[k]
            out4 = out.view(bs, q_len, heads, attention.V_DIM)
            for r, (row, seq_len) in enumerate(zip(self.rows, self.seq_lens, strict=True)):
                for j in range(q_len):
                    position = seq_len + self.offset - q_len + j
                    want = self.env.oracle(q4[r, j].double() * scale, row, position)
                    self.worst = max(self.worst, _max_err(out4[r, j], want))
                    self.compared += 1


def double_capture(env: Env, mode: str, replays: int, seed: int = 0) -> dict:
    """``mode``'s graph captured twice per batch size, replayed with new batches."""
    torch = env.torch
    from . import attention, replacements
    from .driver import ForwardGraph

    s, use_cuda = env.setup, env.device.startswith("cuda")
    driver = _driver(env, mode)
    backend = driver.backend
    with replacements.cuda_factories_on_cpu(use_cuda):
        driver.init_state()()
    owned = {v.untyped_storage().data_ptr() for v in vars(backend).values() if torch.is_tensor(v)}
    graphs, foreign = {}, []
    for bs in range(s.max_bs, 0, -1):  # CudaGraphRunner captures the largest first
        for variant in ("lora", "nolora"):
            driver.capture(bs)()
            meta = backend.forward_decode_metadata
            for field in ("block_kv_indices", "seq_lens_k"):
                t = getattr(meta, field)
                if t is not None and t.untyped_storage().data_ptr() not in owned:
                    foreign.append(f"bs {bs} {variant} {field}")
            fb, q = driver.graph_batches[bs], driver.query(bs)

            def forward(fb, q, meta=meta):
                # The captured forward reads the metadata its capture call left.
                backend.forward_decode_metadata = meta
                with attention.kernel_sink(backend, env.consumer([])):
                    return [
                        attention.attend(backend, fb, attention.layer(i, env.heads), q)
                        for i in driver.phase.layers
                    ]

            graphs[bs, variant] = (ForwardGraph(partial(forward, fb, q), env.device), q)
    sentinels = []
    if use_cuda:
        # Take every small block the allocator has free (a capture's freed
        # metadata among them), each holding a known pattern.
        sentinels = [
            torch.full((n,), 0x5A5A5A5A, dtype=torch.int32, device=env.device)
            for n in range(1, 129)
            for _ in range(8)
        ]
    check = _Replays(env, driver, seed)
    for i in range(replays):
        bs = check.load(i)
        graph, q = graphs[bs, ("lora", "nolora")[i % 4 // 2]]
        check.query(q, i)
        check.compare(q, graph.replay())
    clobbered = sum(int((t != 0x5A5A5A5A).any()) for t in sentinels)
    return {
        "mode": mode,
        "replays": replays,
        "compared": check.compared,
        "max_rel_err": check.worst,
        "foreign_buffers": foreign,
        "sentinels": len(sentinels),
        "sentinels_clobbered": clobbered,
    }


def _attention_layers(backend, heads: int, layer_ids=(0, 1)):
    """The model ``CudaGraphRunner`` compiles and captures, reduced to its
    attention layers: each calls ``attn_backend.forward`` (the dispatch
    ``RadixAttention.forward`` uses) on its own query."""
    import torch

    from . import attention

    class AttentionLayers(torch.nn.Module):
        def forward(self, q, positions, forward_batch):
            return torch.stack(
                [
                    backend.forward(q * (i + 1), None, None, layer, forward_batch, False)
                    for i, layer in enumerate(layers)
                ]
            )

    layers = [attention.layer(i, heads) for i in layer_ids]
    return AttentionLayers()


def compiled_capture(env: Env, mode: str, replays: int, seed: int = 0) -> dict:
    """``mode``'s graphs as CudaGraphRunner captures them with torch.compile on."""
    import torch
    import torch._dynamo
    from sglang.srt.model_executor.cuda_graph_runner import patch_model, set_torch_compile_config
    from torch._dynamo.utils import counters

    from .consumer import paged_mla_decode

    s = env.setup
    driver = _driver(env, mode)
    backend = driver.backend

    def kernel(query, kv_cache, block_tables, seq_lens, max_seq_len, layer):
        # The reference paged MLA decode, traced and compiled with the forward.
        return paged_mla_decode(query, kv_cache.squeeze(1), block_tables, seq_lens, s.page_size)

    backend._run_decode_kernel = kernel
    model = _attention_layers(backend, env.heads, driver.phase.layers)
    tp_group = SimpleNamespace(ca_comm=None)  # patch_model saves and restores it
    set_torch_compile_config()
    torch._dynamo.reset()
    counters.clear()
    driver.init_state()()
    pool = torch.cuda.graph_pool_handle()
    graphs, compiled = {}, {}
    for bs in range(s.max_bs, 0, -1):
        driver.capture(bs)()
        fb, q = driver.graph_batches[bs], driver.query(bs)
        graph = torch.cuda.CUDAGraph()
        frames = counters["stats"]["unique_graphs"]
        with patch_model(model, bs <= COMPILE_MAX_BS, bs * driver.q_len, tp_group) as forward:
            for _ in range(2):
                torch.cuda.synchronize()
                forward(q, None, fb)
            with torch.cuda.graph(graph, pool=pool):
                out = forward(q, None, fb)
        compiled[bs] = counters["stats"]["unique_graphs"] - frames
        graphs[bs] = (graph, q, out)
    check = _Replays(env, driver, seed)
    for i in range(replays):
        graph, q, out = graphs[check.load(i)]
        check.query(q, i)
        graph.replay()
        check.compare(q, out, scales=range(1, len(out) + 1))
    return {
        "mode": mode,
        "replays": replays,
        "compared": check.compared,
        "max_rel_err": check.worst,
        "compile_max_bs": COMPILE_MAX_BS,
        "dynamo_graphs_per_bs": {str(k): v for k, v in sorted(compiled.items())},
        "graph_breaks": sum(counters["graph_break"].values()),
    }


def run(device: str, replays: int, compile_: bool = False) -> dict:
    from . import replacements

    use_cuda = device.startswith("cuda")
    out = {"eager_draft_extend": [], "double_capture": []}
    with replacements.cuda_factories_on_cpu(use_cuda):
        for name, case in CASES.items():
            for graph_state in (False, True):
                try:
                    record = eager_draft_extend(Env(device), name, case, graph_state)
                except Exception as exc:  # noqa: BLE001 - reported, and fails the test
                    record = {"case": name, "graph_state": graph_state, "error": repr(exc)}
                out["eager_draft_extend"].append(record)
        for mode in CAPTURE_MODES:
            out["double_capture"].append(double_capture(Env(device), mode, replays))
        if compile_:
            out["compiled_capture"] = [
                compiled_capture(Env(device), mode, replays) for mode in COMPILE_MODES
            ]
    return out


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--replays", type=int, default=8)
    parser.add_argument("--compile", action="store_true", help="torch.compile check (CUDA)")
    args = parser.parse_args(argv)
    child.enter(args)
    print(json.dumps(run(args.device, args.replays, args.compile)))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.mode_checks", main))
