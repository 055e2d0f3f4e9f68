"""The v0.5.23 series' fixes 0002-0004 and 0005's step-backend guard, on one tree.

Each check drives the tree's real backends (or, for the unpad bound, its
real Triton wrapper) and reports what it observed; the parent
(``tests/v0_5_23/test_fix_patches23.py``) states what each tree must show.

- ``rerun``: every batch size of every phase captured, then each smaller
  size replayed through ``init_forward_metadata_out_graph``; the captured
  forward is then run eagerly, as ``--debug-cuda-graph`` / breakable graphs
  re-run it (the capture batch carries no ``decode_trtllm_mla_metadata``, so
  the forward reads ``forward_decode_metadata``). Reported: the kernel calls
  whose block table or lengths are not the replayed size's (rows != bs).
- ``uneven_extend``: eager ``DRAFT_EXTEND_V2`` with uneven extend lengths on
  the draft-extend backend, with and without CUDA-graph state; the query the
  kernel receives must hold request ``b``'s tokens in row ``b``, zeros after.
  Reported: the calls whose query differs.
- ``unpad_bound``: ``unpad_draft_extend_output`` (the Triton wrapper) with a
  layout whose offsets run past the output's rows, into a larger buffer:
  reported, whether rows past the output were written.
- ``fp4_rows``: a target backend whose KV cache is FP4
  (``float4_e2m1fn_x2``), given graph state for ``max_num_tokens`` tokens,
  unpads ragged verify's output of more than half of them: reported, the
  rows of the output returned (each must be a request token's).
- ``step_guard``: a draft step backend other than the first, given no graph
  state of its own, captured directly: reported, the error's message (None:
  no error).

``python -m mla_harness.fix_check --tree DIR --check NAME [--check NAME ...]``
prints one JSON object, each check's report under its name.
"""

from __future__ import annotations

import json
import sys

from . import child

SETUP = {"page_size": 32, "context_len": 1024, "max_bs": 4}


def _setup(**fields):
    from .standin import Setup

    return Setup(**{**SETUP, **fields})


def rerun(device: str) -> dict:
    from . import attention
    from .consumer import Check
    from .driver import PhaseDriver
    from .phases import on_base

    setup = _setup()
    stale, calls = {}, 0
    for phase in on_base("v0.5.23"):
        check = Check(setup, device=device, seed=0)
        driver = PhaseDriver(phase, check.backends, setup, device)
        driver.init_state()()
        for bs in range(1, setup.max_bs + 1):
            driver.capture(bs)()
        wrong = 0
        for bs in range(1, setup.max_bs):  # smaller than the last size captured
            driver.replay(check.batch(bs, driver.q_len), bs)()
            q = driver.query(bs)
            for backend in driver.steps:  # as a re-run of the graph: no re-pointing
                with attention.kernel_sink(backend) as seen:
                    layer = attention.layer(phase.layers[0], driver.heads)
                    attention.attend(backend, driver.graph_batches[bs], layer, q)
                for call in seen:
                    calls += 1
                    rows = {call["block_tables"].shape[0], call["seq_lens"].shape[0]}
                    wrong += rows != {bs}
        stale[phase.name] = wrong
    return {"calls": calls, "stale": stale}


def uneven_extend(device: str) -> dict:
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    from . import attention, sglang_api
    from .batches import Batch, draft_spec_info, forward_batch
    from .consumer import Check

    setup, api = _setup(), sglang_api.current()
    heads, report = setup.model.q_heads, {}
    for graph_state in (False, True):
        check = Check(setup, device=device, seed=1)
        backend = check.backends.draft_extend
        api.attach_kv_pool([backend], attention.zero_kv_pool(setup.page_size, device))
        if graph_state:  # as the draft-extend runner sizes it
            backend.init_cuda_graph_state(setup.max_bs, setup.max_bs * setup.draft_tokens)
        wrong = 0
        for lens in ((1, 3), (2, 1, 4), (3, 1, 1, 2)):
            base = check.batch(len(lens))
            batch = Batch(base.req_pool_indices, base.seq_lens, lens)
            mode, runner = ForwardMode.DRAFT_EXTEND_V2, check.backends.runner
            fb = api.complete_batch(forward_batch(batch, mode, runner, device, draft_spec_info()))
            backend.init_forward_metadata(fb)
            tokens = sum(lens)
            # Token i's row holds i + 1: what reaches the kernel shows its slot.
            q = torch.arange(1, tokens + 1, dtype=torch.bfloat16, device=device)[:, None]
            q = q.expand(tokens, heads * attention.KV_DIM).contiguous()
            with attention.kernel_sink(backend) as seen:
                attention.attend(backend, fb, attention.layer(0, heads), q)
            want = torch.zeros(len(lens), max(lens), heads, attention.KV_DIM, dtype=q.dtype)
            start = 0
            for b, n in enumerate(lens):
                want[b, :n] = q[start : start + n].view(n, heads, attention.KV_DIM).cpu()
                start += n
            got = seen[0]["query"].cpu()
            wrong += not (got.shape == want.shape and torch.equal(got, want))
        report["graph_state" if graph_state else "no_graph_state"] = wrong
    return report


def unpad_bound(device: str) -> dict:
    import torch
    from sglang.kernels.ops.attention.pad import unpad_draft_extend_output

    bs, width, heads, dim = 2, 4, 2, 64
    raw = torch.randn(bs, width, heads, dim, device=device)
    lens = torch.tensor([4, 4], dtype=torch.int32, device=device)
    cu = torch.tensor([0, 4, 8], dtype=torch.int32, device=device)  # 8 > the 6 rows below
    buffer = torch.full((8, heads, dim), 7.0, device=device)
    out = unpad_draft_extend_output(raw, cu, lens, 6, buffer)
    past = buffer[6:]
    return {
        "rows": int(out.shape[0]),
        "live_ok": bool(torch.equal(out[:4], raw[0]) and torch.equal(out[4:6], raw[1, :2])),
        "written_past": bool((past != 7.0).any()),
    }


def fp4_rows(device: str) -> dict:
    import torch

    from .consumer import Check

    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    if fp4 is None:
        return {"skipped": "this torch has no float4_e2m1fn_x2"}
    setup = _setup(kv_dtype=fp4)
    backend = Check(setup, device=device, seed=2).backends.target
    max_bs, width = setup.max_bs, setup.draft_tokens
    backend.init_cuda_graph_state(max_bs, max_bs * width)  # the runner's max_num_token
    heads, dim = setup.model.q_heads, 512
    raw = torch.randn(max_bs, width, heads, dim, device=device).to(torch.bfloat16)
    lens = torch.full((max_bs,), width, dtype=torch.int32, device=device)
    cu = torch.arange(0, max_bs * width + 1, width, dtype=torch.int32, device=device)
    tokens = max_bs * width  # every token of the largest tier: more than half
    out = backend.unpad_draft_extend_output(raw, cu, lens, tokens, zero_uncovered=True)
    return {
        "tokens": tokens,
        "rows": int(out.shape[0]),
        "equal": bool(out.shape[0] == tokens and torch.equal(out, raw.reshape(tokens, heads, dim))),
    }


def step_guard(device: str) -> dict:
    from .consumer import Check
    from .driver import PhaseDriver
    from .phases import BY_NAME

    setup = _setup(steps=3)  # two step backends
    check = Check(setup, device=device, seed=3)
    draft = check.backends.draft
    driver = PhaseDriver(BY_NAME["draft"], check.backends, setup, device)
    driver.init_state()()  # as the draft runner: the multi-step backend's state
    fb = driver.api.capture_batch(driver.capture_batch(1, driver.spec_info()), driver.static, 1)
    fb.forward_mode = driver.mode
    try:
        draft.attn_backends[1].init_forward_metadata_out_graph(fb, in_capture=True)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"error": None}


CHECKS = {f.__name__: f for f in (rerun, uneven_extend, unpad_bound, fp4_rows, step_guard)}


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--check", required=True, action="append", choices=sorted(CHECKS))
    args = parser.parse_args(argv)
    child.enter(args)
    from .sglang_api import current

    report = {}
    for name in args.check:
        with current().device_calls(args.device == "cuda"):
            report[name] = CHECKS[name](args.device)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.fix_check", main))
