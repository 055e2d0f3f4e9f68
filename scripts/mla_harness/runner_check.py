"""GPU check: v0.5.23's real EAGLE draft CUDA-graph runner over the real backend.

``EAGLEDraftCudaGraphRunner`` (``speculative/eagle_draft_cuda_graph_runner.py``)
is built, unmodified, on the multi-step draft backend, the way the EAGLE
worker builds it (``eagle_worker_v2.py:519``): its own ``__init__`` sizes its
buffers, calls ``init_cuda_graph_state`` and captures a graph per batch size
through its parent's capture loop and the real ``FullCudaGraphBackend``
(capture batch over its buffers, ``init_forward_metadata_out_graph(in_capture=
True)``, then ``run_once`` recorded: ``init_forward_metadata_in_graph`` and
the worker's ``draft_forward``). Each replay is its own ``execute`` (as
``eagle_worker_v2.py:695`` calls it): it copies the batch into its buffers,
pads, makes the out-of-graph call and replays. What the graph's attention read
is compared with a reference paged MLA decode on lengths and a block table
built from ``req_to_token`` alone (``consumer.Check.oracle``).

Replaced (``replacements.py``, 13-15): the draft model, i.e. the worker's
``draft_forward``, by one attention layer per draft step through each step
backend's real ``forward_decode`` (kernel: ``attention.kernel_sink`` with the
reference, replacement 7); the single process's TP group (``barrier``) and
``graph_capture`` (a world of one: enter the capture stream); the model
runner's one-time kernel warm-up (the model's kernels; there is no model).

``python -m mla_harness.runner_check --tree DIR --replays N`` prints a JSON
summary per setup.
"""

from __future__ import annotations

import contextlib
import json
import sys
from types import SimpleNamespace

from . import child

RUNNER_MODULE = "sglang.srt.speculative.eagle_draft_cuda_graph_runner"


def server_args(capture_bs):
    """The run's server arguments beyond the backends' (``sglang_api.V0523.
    configure``): graphs for the batch sizes ``capture_bs`` (``--cuda-graph-
    config``; a batch between two is padded up), no FlashInfer autotune (it
    tunes the model's kernels; ``--disable-flashinfer-autotune``)."""
    from sglang.srt.model_executor.cuda_graph_config import CudaGraphConfig
    from sglang.srt.runtime_context import get_exec

    stack = contextlib.ExitStack()
    graphs = CudaGraphConfig.from_dict({"decode": {"bs": list(capture_bs)}})
    stack.enter_context(get_exec().graph.override(cuda_graph_config=graphs))
    stack.enter_context(get_exec().kernel.override(disable_flashinfer_autotune=True))
    return stack


class DraftRunnerCheck:
    """One setup: the real backends and the real draft runner built on them."""

    def __init__(self, setup, capture_bs, device: str, seed: int, stack: contextlib.ExitStack):
        import torch

        from . import attention, replacements, sglang_api
        from .consumer import Check, paged_mla_decode

        self.setup, self.device = setup, device
        self.check = Check(setup, device=device, seed=seed)
        backends = self.check.backends
        self.draft = backends.draft
        self.steps = list(self.draft.attn_backends)
        self.heads = setup.model.q_heads
        page = setup.page_size
        pool = attention.KVPool(self.check.kv_cache.view(-1, 1, attention.KV_DIM))
        sglang_api.current().attach_kv_pool(self.steps, pool)

        def consume(query, kv, block_tables, kv_lens):
            return paged_mla_decode(query, kv, block_tables, kv_lens, page).contiguous()

        for backend in self.steps:
            stack.enter_context(attention.kernel_sink(backend, consume))
        width = setup.topk
        self.query = torch.zeros(
            setup.max_bs * width, self.heads * attention.KV_DIM, dtype=torch.bfloat16, device=device
        )
        stack.enter_context(replacements.single_process_graph_capture())
        if not device.startswith("cuda"):
            stack.enter_context(replacements.eager_graph_backend())
        stack.enter_context(server_args(capture_bs))
        runner_cls = __import__(RUNNER_MODULE, fromlist=["x"]).EAGLEDraftCudaGraphRunner
        worker = replacements.draft_worker(
            backends.draft_runner, self.draft, setup, self.draft_forward
        )
        self.runner = runner_cls(worker)
        self.capture_bs = list(self.runner.capture_bs)

    def draft_forward(self, forward_batch):
        """Replacement 13: one attention layer per draft step but the last, as
        ``draft_forward`` runs the draft model (``eagle_worker_v2.py:808-849``):
        under the step backend's forward context, then positions + 1."""
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        from . import attention

        q = self.query[: forward_batch.batch_size * self.setup.topk]
        outs = []
        for i in range(self.setup.steps - 1):
            backend = self.steps[i]
            with forward_context(ForwardContext(attn_backend=backend), forward_batch=forward_batch):
                outs.append(
                    attention.attend(backend, forward_batch, attention.layer(0, self.heads), q)
                )
            forward_batch.positions.add_(1)
        return tuple(outs) + (None,) * (4 - len(outs))

    def batch(self, raw_bs: int):
        """A batch as the worker hands it to ``execute`` (``prepare_for_draft``)."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        from .batches import mark_host

        s, dev = self.setup, self.device
        batch = self.check.batch(raw_bs)
        seq_lens = torch.tensor(batch.seq_lens, dtype=torch.int64, device=dev)
        seq_lens_cpu = torch.tensor(batch.seq_lens, dtype=torch.int64)
        mark_host(seq_lens_cpu)
        tokens = raw_bs * s.topk
        fb = SimpleNamespace(
            forward_mode=ForwardMode.DECODE,
            batch_size=raw_bs,
            req_pool_indices=torch.tensor(batch.req_pool_indices, dtype=torch.int64, device=dev),
            seq_lens=seq_lens,
            seq_lens_cpu=seq_lens_cpu,
            seq_lens_sum=sum(batch.seq_lens),
            out_cache_loc=torch.zeros(tokens * s.steps, dtype=torch.int64, device=dev),
            positions=seq_lens.repeat_interleave(s.topk),
            mrope_positions=None,
            rids_int=None,
            bootstrap_room_ids_int=None,
            sampling_info=None,
            kv_loc_plan=None,
            spec_info=SimpleNamespace(
                topk_p=torch.ones(raw_bs, s.topk, device=dev),
                topk_index=torch.zeros(raw_bs, s.topk, dtype=torch.int64, device=dev),
                hidden_states=None,
                draft_probs=None,
                dsa_topk_indices=None,
                num_tokens_per_req=s.topk,
            ),
        )
        return batch, fb

    def run(self, replays: int) -> dict:
        import torch

        from .attention import KV_DIM, V_DIM
        from .consumer import paged_mla_decode

        s, rng = self.setup, self.check.rng
        worst, compared, padded = 0.0, 0, 0
        for _ in range(replays):
            raw_bs = rng.randint(1, s.max_bs)
            batch, fb = self.batch(raw_bs)
            assert self.runner.can_run_graph(fb), raw_bs
            self.query.copy_(torch.randn(self.query.shape, device=self.device))
            outs = self.runner.execute(fb)
            padded += self.runner.bs != raw_bs
            lens, table = self.check.oracle(batch, 0)
            q4 = self.query[: raw_bs * s.topk].view(raw_bs, s.topk, self.heads, KV_DIM)
            ref = paged_mla_decode(q4, self.check.kv_cache, table, lens, s.page_size)
            for out in outs[: s.steps - 1]:
                got = out[: raw_bs * s.topk].view(raw_bs, s.topk, self.heads, V_DIM)
                worst = max(worst, ((got - ref).norm() / ref.norm()).item())
                compared += 1
        # Control: a graph replayed without execute (no copy into the runner's
        # buffers, no out-of-graph call) keeps reading the last batch's
        # requests, so its outputs must differ from the new batch's reference.
        bs = self.capture_bs[-1]
        batch, fb = self.batch(bs)
        self.query.copy_(torch.randn(self.query.shape, device=self.device))
        outs = self.runner._replay_graph(self.runner._make_graph_key(bs), fb)
        lens, table = self.check.oracle(batch, 0)
        q4 = self.query[: bs * s.topk].view(bs, s.topk, self.heads, KV_DIM)
        ref = paged_mla_decode(q4, self.check.kv_cache, table, lens, s.page_size)
        stale = min(
            ((out.view(bs, s.topk, self.heads, V_DIM) - ref).norm() / ref.norm()).item()
            for out in outs[: s.steps - 1]
        )
        return {
            "runner": type(self.runner).__name__,
            "stale_rel_err": stale,
            "capture_bs": self.capture_bs,
            "replays": replays,
            "padded": padded,
            "compared": compared,
            "max_rel_err": worst,
        }


def main(argv=None) -> int:
    parser = child.parser(__doc__, device="cuda")
    parser.add_argument("--replays", type=int, default=200)
    args = parser.parse_args(argv)
    child.enter(args)
    from . import replacements
    from .sglang_api import current
    from .standin import MLAModel, Setup

    if current().base != "v0.5.23":
        raise SystemExit(f"runner_check drives v0.5.23's runner classes, not {current().base}'s")
    report = []
    # A world of one process: TP 1, with the 16 query heads per rank of a
    # 64-head model at TP 4.
    model = MLAModel(num_attention_heads=16, attention_tp_size=1)
    for i, (setup, capture_bs) in enumerate(
        [
            (Setup(page_size=64, context_len=2048, max_bs=4, model=model), (1, 2, 4)),
            (
                Setup(
                    page_size=32, context_len=1024, max_bs=3, steps=4, draft_tokens=5, model=model
                ),
                (1, 3),
            ),
        ]
    ):
        with contextlib.ExitStack() as stack:
            stack.enter_context(replacements.cuda_factories_on_cpu(args.device == "cuda"))
            check = DraftRunnerCheck(setup, capture_bs, args.device, i, stack)
            report.append({"setup": i, **check.run(args.replays)})
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.runner_check", main))
