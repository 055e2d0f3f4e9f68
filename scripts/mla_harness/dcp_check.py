"""Decode context parallelism (DCP): what each rank's kernel receives after every replay.

Under DCP a request's token ``t`` lives on rank ``t % D`` (SGLang's
token-interleaved layout, ``layers/dcp/layout.py``), so each rank's attention
kernel reads its own lengths and page table: ``seq_lens_k`` (the rank-local
lengths), the block table over its cyclic slice, ``max_seq_len_k`` and, for a
kernel that takes a global causal bound (cute-dsl), ``global_seq_lens_k``.
This check builds one tree's real backends at one DCP size and rank (only the
DCP group's size and rank are set, replacement 17), captures every batch size
of every v0.5.23 phase as the runners do, then replays new, partly padded
batches: the out-of-graph call on the runner's view, the graph's in-graph
step (on CUDA a real ``torch.cuda.CUDAGraph`` of it, replayed), then the
captured forward up to the kernel. What the kernel is handed is compared with
a reference built from ``req_to_token`` and the layout's definition alone:
rank ``r``'s local tokens are the global positions ``r, r + D, ...`` below
the request's length (its KV length: seq_len, + draft tokens for verify), its
local slots those positions' ``req_to_token`` entries divided by ``D``, its
page table the pages of every ``page_size``-th local slot. The forward stops
at the kernel (the cross-rank merge and ``fixup_zero_kv_rows`` after it are
not run); the records go to ``--out`` for the parent to compare the trees.

``python -m mla_harness.dcp_check --tree DIR --dcp-size D --replays N --out FILE``
prints a JSON summary, one entry per rank and phase.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

from . import child

SETUP = {"page_size": 32, "context_len": 1024, "max_bs": 4}


class KernelReached(Exception):
    """Raised by the kernel stand-in: the forward's metadata work is done."""


def kernel_args(backend, fb, layer_id: int, heads: int, q_len: int) -> dict:
    """Run one attention layer's real forward up to ``_run_decode_kernel`` and
    return what that call is handed (replacement 7)."""
    import torch

    from . import attention

    seen = {}

    def run(query, kv_cache, block_tables, seq_lens, max_seq_len, layer, **options):
        seen.update(
            block_tables=block_tables.clone(),
            seq_lens=seq_lens.clone(),
            max_seq_len=int(max_seq_len),
            causal_seqs=None
            if options.get("causal_seqs") is None
            else options["causal_seqs"].clone(),
            return_lse=bool(options.get("return_lse")),
        )
        raise KernelReached

    backend._run_decode_kernel = run
    q = torch.zeros(fb.batch_size * q_len, heads * attention.KV_DIM, dtype=torch.bfloat16)
    try:
        attention.attend(backend, fb, attention.layer(layer_id, heads), q.to(fb.seq_lens.device))
    except KernelReached:
        pass
    finally:
        del backend._run_decode_kernel
    if not seen:
        raise AssertionError("the forward never reached the attention kernel")
    return seen


def reference(setup, req_to_token, batch, offset: int, allocator=None) -> dict:
    """Rank ``setup.dcp_rank``'s kernel inputs for ``batch``, by definition;
    with the unified pool's ``allocator`` (a reader of the target's
    translating pool) the local pages are its physical pages
    (``unified_pool.physical_pages``)."""
    import torch

    from .unified_pool import physical_pages

    d, r, page = setup.dcp_size, setup.dcp_rank, setup.page_size
    global_lens = [n + offset for n in batch.seq_lens]
    local_lens, tables = [], []
    for row, n in zip(batch.req_pool_indices, global_lens, strict=True):
        positions = torch.arange(r, n, d)
        slots = req_to_token[row, positions].long().cpu() // d
        local_lens.append(len(positions))
        pages = slots[::page] // page
        if allocator is not None:
            pages = physical_pages(allocator, pages)
        tables.append(pages.tolist())
    return {"global": global_lens, "local": local_lens, "tables": tables}


def compare(got: dict, want: dict, raw_bs: int, max_seq_len: int) -> list[str]:
    """The mismatches of one kernel call against the reference (empty: equal)."""
    bad = []
    local = got["seq_lens"][:raw_bs].tolist()
    if local != want["local"]:
        bad.append(f"seq_lens {local} != {want['local']}")
    for i, pages in enumerate(want["tables"]):
        row = got["block_tables"][i, : len(pages)].tolist()
        if row != pages:
            bad.append(f"row {i} pages {row} != {pages}")
    if got["max_seq_len"] != max_seq_len:
        bad.append(f"max_seq_len {got['max_seq_len']} != {max_seq_len}")
    if got["causal_seqs"] is not None and got["causal_seqs"][:raw_bs].tolist() != want["global"]:
        bad.append(f"causal_seqs {got['causal_seqs'][:raw_bs].tolist()} != {want['global']}")
    return bad


def local_max(setup, n: int) -> int:
    """``max_seq_len_k`` of a DCP graph: the rank's share of the longest
    possible request (``n``), at least 1."""
    d, r = setup.dcp_size, setup.dcp_rank
    return max(len(range(r, n, d)), 1)


def run_rank(setup, device: str, replays: int, seed: int, phases=None) -> tuple[list, list]:
    import torch

    from .consumer import Check
    from .driver import ForwardGraph, PhaseDriver
    from .phases import on_base

    summary, records = [], []
    for phase in on_base("v0.5.23"):
        if phases and phase.name not in phases:
            continue
        # Backends of their own per phase, as a server's runner captures either
        # plain decode or target verify on its target backend.
        check = Check(setup, device=device, seed=seed)
        req_to_token = check.backends.runner.req_to_token_pool.req_to_token
        driver = PhaseDriver(phase, check.backends, setup, device)
        driver.init_state()()
        graphs = {}
        for bs in range(1, setup.max_bs + 1):
            driver.capture(bs)()
            step = driver.in_graph(bs)
            graphs[bs] = ForwardGraph(step, device) if step is not None else None
        # The unified pool: the target's backends read its physical pages (the
        # draft's are not on it, ``sglang_api.runner_fields``). After the
        # captures the allocator moves live pages (``unified_pool.release``),
        # rebinding its v2p table in place: the replays must read the new places.
        unified = getattr(check.backends.runner, "unified_pool", None)
        allocator = unified.allocator if unified is not None and phase.role == "target" else None
        pool_state = {}
        if unified is not None:
            pool_state = after_capture_churn(check.backends.runner, driver.backend, unified)
        offset = setup.draft_tokens if phase.mode == "TARGET_VERIFY" else 0
        uniform = driver.q_len if phase.role == "draft_extend" else None
        # The forward's max_seq_len: the graph's bound, plus the query tokens
        # for draft extend (forward_extend adds them).
        want_max = local_max(setup, setup.context_len + offset)
        if phase.role == "draft_extend":
            want_max += driver.q_len
        calls, bad = 0, []
        for i in range(replays):
            raw_bs = check.rng.randint(1, setup.max_bs)
            bs = raw_bs if i % 2 else check.rng.randint(raw_bs, setup.max_bs)
            batch = check.batch(raw_bs, uniform)
            driver.replay(batch, bs)()
            if graphs[bs] is not None:
                graphs[bs].replay()
            want = reference(setup, req_to_token, batch, offset, allocator)
            if allocator is not None:
                pool_state["moved_reads"] += sum(
                    bool(set(pages) & pool_state["moved"]) for pages in want["tables"]
                )
            fb = driver.graph_batches[bs]
            for layer_id, backend in enumerate(driver.steps):
                # What the captured graph's forward reads: this size's metadata.
                backend.forward_decode_metadata = backend.decode_cuda_graph_metadata[bs]
                got = kernel_args(backend, fb, layer_id, driver.heads, driver.q_len)
                bad += [f"{phase.name} bs {bs}: {m}" for m in compare(got, want, raw_bs, want_max)]
                calls += 1
                records.append(
                    {
                        k: v.cpu().numpy() if isinstance(v, torch.Tensor) else v
                        for k, v in got.items()
                    }
                )
        # Control: at every captured size, a batch loaded into the runner's
        # buffers but replayed with neither the out-of-graph call nor the
        # graph leaves the kernel stale metadata, which the comparison must see.
        stale = 0
        for bs in range(1, setup.max_bs + 1):
            batch = check.batch(bs, uniform)
            driver.replay(batch, bs)  # loads the buffers; its call is not made
            want = reference(setup, req_to_token, batch, offset, allocator)
            backend = driver.steps[0]
            backend.forward_decode_metadata = backend.decode_cuda_graph_metadata[bs]
            got = kernel_args(backend, driver.graph_batches[bs], 0, driver.heads, driver.q_len)
            stale += bool(compare(got, want, bs, want_max))
        summary.append(
            {
                "phase": phase.name,
                "calls": calls,
                "mismatches": len(bad),
                "first": bad[:3],
                "stale_caught": stale,
                **{k: v for k, v in pool_state.items() if k != "moved"},
            }
        )
    return summary, records


def after_capture_churn(runner, backend, unified) -> dict:
    """Move live pages of the unified pool after the captures, through its
    allocator (``unified_pool.release``), and what a graph relies on: the
    table the backend's translator hands the DCP page-table kernel
    (``full_v2p_table``, taken once at the translator's construction,
    ``kv_index_translator.py:152``) is still the allocator's table, at the
    address the captures saw (SGLang's rule: the live v2p table keeps a
    stable address, ``layers/attention/linear/inkling_sconv_backend.py:32``;
    a capacity change keeps its storage, ``unified_sub_pool.py:2069-2080``)."""
    from .unified_pool import release

    allocator = unified.allocator
    v2p = allocator.full_v2p_page_table
    address, before = v2p.data_ptr(), v2p.clone()
    release(allocator, unified.fillers)
    after = allocator.full_v2p_page_table
    # The target's translator, and the backend's (the draft's hands none).
    translator = runner.kv_index_translator
    own = backend_translator(backend).full_v2p_table
    moved = (after != before) & (before >= 0) & (after >= 0)  # live pages, moved
    return {
        "moved_pages": int(moved.sum()),
        "moved": set(after[moved].tolist()),  # their new physical pages
        "moved_reads": 0,  # rows of the replays that read a moved page
        "v2p_stable": bool(
            after.data_ptr() == address
            and translator.full_v2p_table is after
            and (own is None or own is after)
        ),
    }


def backend_translator(backend):
    """The translator a backend (or a multi-step draft's first step) reads."""
    steps = getattr(backend, "attn_backends", None)
    return (steps[0] if steps else backend).kv_index_translator


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--dcp-size", type=int, required=True)
    parser.add_argument("--replays", type=int, default=6)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--phases", nargs="+", metavar="PHASE", help="only these phases (default: every one)"
    )
    parser.add_argument(
        "--unified-pool",
        action="store_true",
        help="the target's KV pool is the translating unified pool (unified_pool)",
    )
    args = parser.parse_args(argv)
    child.enter(args)
    from .sglang_api import current
    from .standin import Setup

    report, records = [], []
    for rank in range(args.dcp_size):
        setup = Setup(
            **SETUP, dcp_size=args.dcp_size, dcp_rank=rank, unified_pool=args.unified_pool
        )
        with current().device_calls(args.device == "cuda"):
            summary, recs = run_rank(setup, args.device, args.replays, rank, args.phases)
        report += [{"rank": rank, **s} for s in summary]
        records.append(recs)
    args.out.write_bytes(pickle.dumps(records))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.dcp_check", main))
