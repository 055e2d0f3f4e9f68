"""Run scenarios against one SGLang tree, in a process of its own.

``python -m mla_harness.probe --tree DIR --plan plan.json --out result.pkl``
imports ``sglang`` from ``DIR`` (a ``python/`` root), builds the real backends
for every scenario and phase of ``phases.TABLE`` that the tree's SGLang has
(``sglang_api``: v0.5.12, or v0.5.23 without DRAFT_EXTEND v1), drives them
(``driver``) through the calls an EAGLE decode loop makes (eager
``init_forward_metadata``; CUDA-graph state, capture for every batch size,
then replays with new inputs, each followed by the graph's in-graph metadata
step where the release has one and the attention layers of the captured
forward, as the graph would run them) and records (``records``), per call,
the metadata the attention kernel is given (the query too, where a forward
ran), the graph buffers' pointers and the launch counts of the replay call,
of the in-graph step and of each layer's forward. A scenario may capture each
batch size more than once (``captures_per_bs``); a plan may ask for the
eager forward too (``eager_forward``). ``run_probe`` does the same from
another process and returns the ``ProbeResult``.
"""

from __future__ import annotations

import json
import pickle
import sys
from functools import partial
from pathlib import Path

from . import attention, child, standin
from .batches import Batch
from .driver import PhaseDriver, graph_size
from .launches import Counts, count_launches
from .phases import TABLE, on_base
from .records import EagerCall, GraphState, PhaseRecord, ProbeResult, Replay, ScenarioResult
from .visible import buffer_pointers, kernel_call_view, kernel_view

PATHS = ("eager", "graph")


def phase_names(base: str = "v0.5.12") -> tuple[str, ...]:
    """The probe's phases (a phase of ``phases.TABLE`` on a path) on ``base``."""
    return tuple(f"{phase.name}_{path}" for phase in on_base(base) for path in PATHS)


PHASES = phase_names()  # v0.5.12's: every row of the table


def run_on_tree(tree: Path, plan: dict, device: str) -> ProbeResult:
    """``run_probe`` on ``tree``; refuses a result whose child imported another
    tree's ``sglang``."""
    result = run_probe(tree, plan, device)
    if not Path(result.sglang_file).is_relative_to(tree):
        raise RuntimeError(f"the probe imported {result.sglang_file}, not {tree}")
    return result


def run_probe(tree: Path, plan: dict, device: str = "cpu", timeout: int = 3000) -> ProbeResult:
    """Run ``plan`` against ``tree`` in a fresh interpreter; return its result."""
    out = child.exchange("mla_harness.probe", tree, device, "--plan", plan, timeout=timeout)
    return pickle.loads(out)


class Probe:
    """One phase of one scenario, counted call by call."""

    def __init__(
        self, driver: PhaseDriver, batches: list[Batch], captures: int = 1, eager_forward=False
    ):
        self.driver, self.batches = driver, batches
        self.eager_forward = eager_forward
        # Captures per batch size on one backend: 2 as the decode runner's
        # LoRA and no-LoRA graphs; each graph keeps the metadata it captured.
        self.captures = captures
        self.kept: dict[int, list[list]] = {}  # bs -> per capture, per step backend
        self.use_cuda = driver.device.startswith("cuda")
        self.page = driver.setup.page_size

    def call(self, thunk) -> Counts:
        """Run one backend call; what it launched, synced and allocated."""
        with self.driver.device_calls(), count_launches() as counts:
            thunk()
            if self.use_cuda:
                import torch

                torch.cuda.synchronize()
        return counts

    def eager(self) -> PhaseRecord:
        d, calls = self.driver, []
        for batch in self.batches:
            fb = d.forward_batch(batch)
            counts = self.call(d.eager(fb))
            views = [
                kernel_view(meta, d.kernel_lens(fb, meta), fb.batch_size, self.page)
                for meta in d.eager_metadata(fb)
            ]
            forward = self.eager_forward_views(fb) if self.eager_forward else []
            calls.append(EagerCall(counts, views, forward))
        return PhaseRecord(calls)

    def eager_forward_views(self, fb) -> list:
        """The forward's attention layers on the eager batch ``fb``, right after
        ``init_forward_metadata``: what the kernel receives at each."""
        d, views = self.driver, []
        q = d.query(fb.batch_size)
        for backend in d.steps:
            for layer_id in d.phase.layers:
                layer = attention.layer(layer_id, d.heads)
                with attention.kernel_sink(backend) as sunk:
                    self.call(partial(attention.attend, backend, fb, layer, q))
                (kernel_call,) = sunk
                metadata = getattr(fb, "decode_trtllm_mla_metadata", None)
                max_len = (metadata or backend.forward_decode_metadata).max_seq_len_k
                views.append(kernel_call_view(kernel_call, max_len, fb.batch_size, self.page))
        return views

    def graph(self, capture_sizes) -> PhaseRecord:
        d = self.driver
        state = self.call(d.init_state())
        ptrs = {}
        for bs in capture_sizes:
            for _ in range(self.captures):
                self.call(d.capture(bs))
                self.in_graph(bs)  # recorded into the graph ahead of its forward
                self.kept.setdefault(bs, []).append(d.graph_metadata(bs))
            ptrs[bs] = [buffer_pointers(m) for m in d.graph_metadata(bs)]
        replays = []
        for batch in self.batches:
            bs = graph_size(batch.size, capture_sizes)
            counts = self.call(d.replay(batch, bs))
            replays.append(self.replay_record(batch, bs, counts))
        return PhaseRecord(replays, GraphState(state, ptrs))

    def in_graph(self, bs: int) -> Counts | None:
        """The graph's in-graph metadata step, where the generation has one
        (run eagerly: on CPU that is the replay of what the graph recorded)."""
        step = self.driver.in_graph(bs)
        return None if step is None else self.call(step)

    def replay_record(self, batch: Batch, bs: int, counts: Counts) -> Replay:
        """After a replay call: the graph's in-graph step, then the captured
        forward's layers, each counted, and what the kernel is given at each."""
        d = self.driver
        in_graph_counts = self.in_graph(bs)
        metas = d.graph_metadata(bs)
        q = d.query(bs)
        forward_counts, views = [], []
        for backend, layer in d.layers(bs):
            with attention.kernel_sink(backend) as sunk:
                run = partial(attention.attend, backend, d.graph_batches[bs], layer, q)
                forward_counts.append(self.call(run))
            (kernel_call,) = sunk
            max_len = backend.forward_decode_metadata.max_seq_len_k
            views.append(kernel_call_view(kernel_call, max_len, bs, self.page))
        return Replay(
            counts=counts,
            views=views,
            bs=bs,
            raw_bs=batch.size,
            forward_counts=forward_counts,
            ptrs=[buffer_pointers(m) for m in metas],
            req_pool_indices=d.static.req_pool_indices[:bs].cpu().numpy().copy(),
            seq_lens=d.static.seq_lens[:bs].cpu().numpy().copy(),
            in_graph_counts=in_graph_counts,
            earlier_captures=self.earlier_captures(bs),
        )

    def earlier_captures(self, bs: int) -> list[list]:
        """What the kernel of each earlier graph of ``bs`` reads: the metadata
        its capture left (its forward's captured tensors), per step backend."""
        fb = self.driver.graph_batches[bs]
        return [
            [kernel_view(m, self.driver.kernel_lens(fb, m), bs, self.page) for m in metas]
            for metas in self.kept[bs][:-1]
        ]


def run_scenario(scenario: dict, phase_names, device: str, eager_forward=False) -> ScenarioResult:
    """Every phase on fresh backends: phases must not see each other's graph
    state (a real server builds each once)."""
    setup = standin.Setup(**scenario["setup"])
    seed = scenario.get("seed", 0)
    batches = [Batch(**b) for b in scenario["batches"]]
    capture_sizes = scenario.get("capture_bs") or list(range(1, setup.max_bs + 1))
    by_name = {f"{phase.name}_{path}": (phase, path) for phase in TABLE for path in PATHS}
    phases = {}
    for name in phase_names:
        phase, path = by_name[name]
        backends = standin.build_backends(setup, device, seed)
        driver = PhaseDriver(phase, backends, setup, device)
        probe = Probe(driver, batches, scenario.get("captures_per_bs", 1), eager_forward)
        phases[name] = probe.eager() if path == "eager" else probe.graph(capture_sizes)
    req_to_token = backends.runner.req_to_token_pool.req_to_token.cpu().numpy()
    return ScenarioResult(phases, req_to_token)


def run_plan(plan: dict, device: str) -> ProbeResult:
    from .sglang_api import current

    default = phase_names(current().base)
    scenarios = [
        run_scenario(
            s,
            s.get("phases") or plan.get("phases") or default,
            device,
            plan.get("eager_forward", False),
        )
        for s in plan["scenarios"]
    ]
    return ProbeResult(scenarios, base=current().base)


def main(argv=None) -> int:
    parser = child.parser(__doc__)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    child.enter(args)
    result = run_plan(json.loads(args.plan.read_text()), args.device)
    import sglang

    result.sglang_file = sglang.__file__
    args.out.write_bytes(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(child.report_errors("mla_harness.probe", main))
