"""Ragged target verify through v0.5.23's real forward, eager and as a CUDA graph.

DSpark's compact verify hands the target model a ``RaggedVerifyLayout``
(``spec_info.ragged_verify_layout``): each request verifies 1 to ``W`` tokens
(``W``: draft tokens), packed, and the batch's rows are rounded up to a token
tier. ``forward_extend`` pads the query to ``(bs, W)`` by the layout, runs the
kernel, then unpads the output (``unpad_draft_extend_output(...,
zero_uncovered=True)``): the path whose output buffer patches/v0.5.23 0006
moves. The target backend is built and given CUDA-graph state as
``DecodeCudaGraphRunner`` gives it in ragged mode (``decode_cuda_graph_runner.py``:
tiers ``bs * W`` per captured bs, 699-702; ``max_num_token``, the largest
tier, to ``init_cuda_graph_state``, 424-429; ``min(tokens, max_bs)`` slots
per tier, 791-794; a capture layout per tier, 796-820; before each replay the
live layout padded to the tier's slots and copied into the captured one,
822-834). The kernel is ``consumer.paged_mla_decode`` (``_run_decode_kernel``,
the backend's hook) over a random KV cache; like the trtllm-gen kernel it
returns bf16.

Per case: ``eager`` (``init_forward_metadata`` then the forward, with and
without graph state) and ``graph`` (each tier captured with the backend's
out-of-graph call and, in the graph, its in-graph step and the forward; then
replays of new layouts, padded). Two attention layers run per forward and each
output is consumed (cloned) right after its layer, as ``o_proj`` reads it.
Every live output row is compared with the reference run on the padded query
the layout defines, the lengths and the table of ``req_to_token`` alone
(``Check.oracle``); the rows the layout does not cover (past its
``qo_indptr[-1]``; in a graph, the staged layout's) must be zero, and those of
padding requests finite. Each raw output (before its copy) is also checked
against the tensors the backend holds: its storage being one of theirs counts
as a persistent output (of those, views of ``unpad_output_buffer`` counted
apart).
The outputs are written to ``--out`` for the parent to compare trees.

``--kv-dtype float8_e4m3fn``: an FP8 KV cache (``--kv-cache-dtype
fp8_e4m3``). The backend is built with that dtype, the pool holds FP8, and
each layer passes q_nope / q_rope and k / k_rope as an MLA layer does, so
the forward quantizes the query itself (``mla_quantize_without_rope_for_fp8``)
and pads the FP8 query; the kernel asserts its query and KV are FP8, and the
reference reads the same KV and the padded query cast to FP8 (replacement 21
on CUDA). ``--setup I`` runs one entry of ``SETUPS`` (repeatable).

``python -m mla_harness.ragged_verify_check --tree DIR --replays N --out FILE``
prints a JSON summary.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

from . import child

LAYERS = (0, 1)


class Ragged:
    """One setup's target backend, driven as the ragged-mode graph runner drives it."""

    def __init__(self, setup, device: str, seed: int, graph_state: bool):
        import torch
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        from . import attention, sglang_api
        from .batches import StaticInputs
        from .consumer import Check

        self.check = Check(setup, device=device, seed=seed)
        self.fp8 = setup.kv_dtype == torch.float8_e4m3fn
        if self.fp8:  # the pool and the reference read the same FP8 KV
            self.check.kv_cache = self.check.kv_cache.to(setup.kv_dtype)
        self.setup, self.device, self.api = setup, device, sglang_api.current()
        self.width, self.heads = setup.draft_tokens, setup.model.q_heads
        self.mode = ForwardMode.TARGET_VERIFY
        self.backend = self.check.backends.target
        self.pool = attention.KVPool(self.check.kv_cache.view(-1, 1, attention.KV_DIM))
        self.api.attach_kv_pool([self.backend], self.pool)
        # The runner's token tiers (bs * W per captured bs) and max_num_token.
        self.grid = [bs * self.width for bs in range(1, setup.max_bs + 1)]
        if graph_state:
            self.backend.init_cuda_graph_state(setup.max_bs, self.grid[-1])
        fill = self.backend.get_cuda_graph_seq_len_fill_value()
        self.static = StaticInputs(setup.max_bs, fill, device)
        self.graphs = {}  # tier -> (graph, query buffer, capture layout, capture batch)
        self.calls = 0  # seeds each call's query
        self.outputs = 0  # raw outputs the forward returned
        self.persistent = 0  # ... in the storage of a tensor the backend holds
        self.unpad_views = 0  # ... in unpad_output_buffer's

    def slots(self, tokens: int) -> int:
        return min(tokens, self.setup.max_bs)

    def layout(self, verify_lens):
        from sglang.srt.speculative.ragged_verify import RaggedVerifyLayout

        return RaggedVerifyLayout.from_verify_lens(
            verify_lens_cpu=list(verify_lens), device=self.device, grid=self.grid
        )

    def spec_info(self, layout):
        from .batches import verify_spec_info

        return SimpleNamespace(**vars(verify_spec_info(self.width)), ragged_verify_layout=layout)

    def query(self, tokens: int):
        """A new random query of ``tokens`` rows (each call its own seed)."""
        import torch

        from .attention import KV_DIM

        self.calls += 1
        gen = torch.Generator(device=self.device).manual_seed(self.calls)
        shape = (tokens, self.heads * KV_DIM)
        return torch.randn(shape, device=self.device, generator=gen).to(torch.bfloat16)

    def forward(self, fb, q) -> list:
        """Both layers' forward; each output consumed as ``o_proj`` would."""
        import torch

        from . import attention

        def consume(query, kv, block_tables, kv_lens):
            from .consumer import paged_mla_decode

            if self.fp8:  # what the kernel receives: the FP8 query (padded) and pool
                assert query.dtype == kv.dtype == torch.float8_e4m3fn, (query.dtype, kv.dtype)
            out = paged_mla_decode(query, kv, block_tables, kv_lens, self.setup.page_size)
            return out.to(torch.bfloat16).contiguous()

        outs = []
        with attention.kernel_sink(self.backend, consume):
            for layer_id in LAYERS:
                layer = attention.layer(layer_id, self.heads)
                if self.fp8:  # as an MLA layer calls it: the backend quantizes
                    k, k_rope = self.latent(q.shape[0])
                    raw = attention.attend_split(self.backend, fb, layer, q, k, k_rope)
                else:
                    raw = attention.attend(self.backend, fb, layer, q)
                held = self.held_storage(raw)
                self.outputs += 1
                self.persistent += int(held is not None)
                self.unpad_views += int(held == "unpad_output_buffer")
                outs.append(raw.clone())
        return outs

    def latent(self, tokens: int):
        """The layer's latent KV rows (k_nope, k_rope) for an FP8 forward: it
        quantizes them with the query (not written: save_kv_cache=False)."""
        import torch

        from .attention import KV_DIM, V_DIM

        return tuple(
            torch.zeros(tokens, 1, dim, dtype=torch.bfloat16, device=self.device)
            for dim in (V_DIM, KV_DIM - V_DIM)
        )

    def held_storage(self, out):
        """The name of the backend's tensor attribute whose storage ``out``
        lies in (None: a tensor of its own)."""
        import torch

        ptr = out.untyped_storage().data_ptr()
        for name, value in vars(self.backend).items():
            if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() == ptr:
                return name
        return None

    def eager(self, batch, verify_lens):
        from .batches import forward_batch

        layout = self.layout(verify_lens)
        fb = forward_batch(batch, self.mode, self.check.backends.runner, self.device)
        fb.spec_info = self.spec_info(layout)
        fb = self.api.complete_batch(fb)
        q = self.query(layout.graph_num_tokens)
        self.backend.init_forward_metadata(fb)
        return q, self.forward(fb, q), layout.total_verify_tokens

    def capture(self) -> None:
        from sglang.srt.speculative.ragged_verify import build_capture_verify_lens

        from . import attention
        from .driver import ForwardGraph

        for tokens in self.grid:
            bs = self.slots(tokens)
            lens = build_capture_verify_lens(
                num_tokens=tokens, num_slots=bs, num_draft_tokens=self.width
            )
            layout = self.layout(lens)
            rpi, seq_lens = self.static.capture_inputs(bs)
            fb = attention.graph_batch(
                self.mode, bs, rpi, seq_lens, self.spec_info(layout), self.pool
            )
            fb = self.api.capture_batch(fb, self.static, tokens)
            self.api.capture_call(self.backend, fb)()
            q = self.query(tokens)

            def step(fb=fb, q=q):
                self.api.in_graph_call(self.backend, fb)()
                return self.forward(fb, q)

            self.graphs[tokens] = (ForwardGraph(step, self.device), q, layout, fb)

    def replay(self, batch, verify_lens):
        """As the runner's replay: tier, slots, batch into the static buffers,
        the live layout staged into the captured one, the out-of-graph call on
        the runner's view, then the graph."""
        from .batches import forward_batch

        live = self.layout(verify_lens)
        tokens = live.graph_num_tokens
        graph, q, captured, _ = self.graphs[tokens]
        bs = self.slots(tokens)
        staged = live.padded_to_bucket(padded_bs=bs, cap=self.width)
        captured.verify_lens.copy_(staged.verify_lens)
        captured.qo_indptr_device.copy_(staged.qo_indptr_device)
        q.copy_(self.query(tokens))  # new values in the captured query buffer
        real = forward_batch(batch, self.mode, self.check.backends.runner, self.device)
        real = self.api.complete_batch(real)
        view = self.api.replay_view(real, self.static, bs, spec_info=self.spec_info(live))
        self.api.replay_call(self.backend, view)()
        covered = int(staged.qo_indptr_device[-1])  # rows the staged layout writes
        return q, graph.replay(), covered

    def expected(self, batch, verify_lens, q):
        """The live rows' output from the reference on the padded query the
        layout defines, with the oracle's lengths and table."""
        import torch

        from .attention import KV_DIM
        from .consumer import paged_mla_decode

        padded = q.new_zeros(batch.size, self.width, self.heads, KV_DIM)
        start = 0
        for i, n in enumerate(verify_lens):
            padded[i, :n] = q[start : start + n].view(n, self.heads, KV_DIM)
            start += n
        kv_lens, table = self.check.oracle(batch, self.width)
        if self.fp8:  # the query rounded by a cast here, not by the backend
            padded = padded.to(self.check.kv_cache.dtype)
        ref = paged_mla_decode(padded, self.check.kv_cache, table, kv_lens, self.setup.page_size)
        rows = [ref[i, :n] for i, n in enumerate(verify_lens)]
        return torch.cat(rows).to(q.dtype)

    def compare(self, batch, verify_lens, q, outs, covered: int) -> dict:
        """Live rows against the reference; rows ``[live, covered)`` (padding
        requests) finite; rows from ``covered`` on zero."""
        import torch

        from .attention import V_DIM
        from .consumer import rel_err

        want = self.expected(batch, verify_lens, q).double()
        live = want.shape[0]
        worst, bad_tail = 0.0, 0
        for out in outs:
            out = out.view(q.shape[0], self.heads, V_DIM)
            got = out[:live].double()
            worst = max(worst, rel_err(got, want))
            padding_ok = bool(torch.isfinite(out[live:covered]).all())
            bad_tail += int(not (padding_ok and bool((out[covered:] == 0).all())))
        zero_rows = (q.shape[0] - covered) * len(outs)
        return {"max_rel_err": worst, "bad_tails": bad_tail, "zero_rows": zero_rows}


def verify_lens(rng, size: int, width: int) -> tuple[int, ...]:
    """1 to ``width`` tokens per request, the edges often."""
    return tuple(rng.choice((1, width, rng.randint(1, width))) for _ in range(size))


def run(setup, device: str, replays: int, seed: int) -> tuple[dict, list]:
    """Returns the summary and every output (numpy, in order) for the parent."""
    summary = {"eager": 0, "graph": 0, "max_rel_err": 0.0, "bad_tails": 0}
    summary.update({"zero_rows": {"eager": 0, "graph": 0}})
    summary.update({"outputs": {}, "persistent": {}, "unpad_views": {}})

    def held(name, ragged):
        for key in ("outputs", "persistent", "unpad_views"):
            summary[key][name] = getattr(ragged, key)

    outputs = []

    def record(kind, batch, lens, q, outs, covered, ragged):
        r = ragged.compare(batch, lens, q, outs, covered)
        summary[kind] += 1
        summary["max_rel_err"] = max(summary["max_rel_err"], r["max_rel_err"])
        summary["bad_tails"] += r["bad_tails"]
        summary["zero_rows"][kind] += r["zero_rows"]
        outputs.append([o.float().cpu().numpy() for o in outs])

    for graph_state in (False, True):
        ragged = Ragged(setup, device, seed, graph_state)
        for _ in range(max(4, replays // 4)):
            batch = ragged.check.batch(ragged.check.rng.randint(1, setup.max_bs))
            lens = verify_lens(ragged.check.rng, batch.size, setup.draft_tokens)
            q, outs, covered = ragged.eager(batch, lens)
            record("eager", batch, lens, q, outs, covered, ragged)
        name = "eager_graph_state" if graph_state else "eager_no_graph_state"
        held(name, ragged)
    ragged = Ragged(setup, device, seed, graph_state=True)
    ragged.capture()
    # The captured outputs: what every replay of the graphs writes.
    held("graph", ragged)
    rng = ragged.check.rng
    for _ in range(replays):
        # Full batches half the time: the staged layout's last row then takes
        # the tier's leftover tokens, capped, which leaves rows uncovered.
        size = rng.choice((setup.max_bs, rng.randint(1, setup.max_bs)))
        batch = ragged.check.batch(size)
        lens = verify_lens(rng, batch.size, setup.draft_tokens)
        q, outs, covered = ragged.replay(batch, lens)
        record("graph", batch, lens, q, outs, covered, ragged)
    return summary, outputs


SETUPS = (
    {"page_size": 64, "context_len": 2048, "max_bs": 4},
    {"page_size": 32, "context_len": 1024, "max_bs": 3, "steps": 4, "draft_tokens": 5},
)


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--replays", type=int, default=8)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--kv-dtype",
        default="bfloat16",
        choices=("bfloat16", "float8_e4m3fn"),
        help="the KV cache dtype (float8_e4m3fn: --kv-cache-dtype fp8_e4m3)",
    )
    parser.add_argument(
        "--setup",
        type=int,
        action="append",
        choices=range(len(SETUPS)),
        help="run only this index of SETUPS (repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    child.enter(args)
    import torch

    from . import replacements
    from .sglang_api import current
    from .standin import Setup

    report, outputs = [], []
    fp8 = args.kv_dtype == "float8_e4m3fn"
    for i, fields in enumerate(SETUPS):
        if args.setup and i not in args.setup:
            continue
        with (
            current().device_calls(args.device == "cuda"),
            replacements.absorb_q_concat(fp8 and args.device == "cuda"),
        ):
            setup = Setup(**fields, kv_dtype=getattr(torch, args.kv_dtype))
            summary, outs = run(setup, args.device, args.replays, seed=i)
        report.append({"setup": i, **summary})
        outputs.append(outs)
    args.out.write_bytes(pickle.dumps(outputs))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.ragged_verify_check", main))
