"""What the probe returns, typed: one record per scenario, phase and call.

``probe.run_probe`` returns a ``ProbeResult``; the tests read these fields by
name, so a change of what the probe records is a change here, seen by both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .launches import Counts
from .visible import KernelView


@dataclass
class Call:
    """One metadata call (eager, or a graph replay) and what the kernel then read:
    one view per attention layer the forward ran (eager: per step backend)."""

    counts: Counts
    views: list[KernelView]


@dataclass
class EagerCall(Call):
    """An eager call; where the plan asks (``eager_forward``), also what the
    kernel received when the forward then ran on the same batch: one view per
    step backend and attention layer, the query included."""

    forward_views: list[KernelView] = field(default_factory=list)


@dataclass
class Replay(Call):
    """A graph replay: the replay call's ``counts``, then the captured forward's."""

    bs: int  # the captured batch size replayed
    raw_bs: int  # the requests in the batch (bs - raw_bs padded rows)
    forward_counts: list[Counts]  # per attention layer, in order
    ptrs: list[dict]  # per step backend: data_ptr by metadata field
    req_pool_indices: np.ndarray  # the static inputs [:bs] after the copy
    seq_lens: np.ndarray
    # The graph's own metadata step (v0.5.23's init_forward_metadata_in_graph),
    # which the replay runs inside the graph; None where there is none.
    in_graph_counts: Counts | None = None
    # Where the scenario captures each batch size more than once: per earlier
    # capture of ``bs``, per step backend, what that graph's kernel reads.
    earlier_captures: list[list[KernelView]] = field(default_factory=list)


@dataclass
class GraphState:
    """``init_cuda_graph_state``'s counts and, per captured bs, the pointers of
    each step backend's metadata right after its capture."""

    state: Counts
    capture_ptrs: dict[int, list[dict]]


@dataclass
class PhaseRecord:
    """One phase of one scenario: its calls in batch order; ``graph`` on the graph path."""

    calls: list[Call]
    graph: GraphState | None = None


@dataclass
class ScenarioResult:
    phases: dict[str, PhaseRecord]
    req_to_token: np.ndarray  # the scenario's pool, for an independent oracle


@dataclass
class ProbeResult:
    scenarios: list[ScenarioResult]
    sglang_file: str = ""  # which tree the child imported
    base: str = ""  # the SGLang API generation the child drove (sglang_api)
