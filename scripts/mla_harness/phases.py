"""The phase table: how each phase of decoding drives one backend, as SGLang does.

One row per phase, read by ``driver.PhaseDriver`` for the probe, the GPU
consumer and the benchmark alike: a new phase or mode is a new row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .batches import draft_spec_info, verify_spec_info
from .sglang_api import BASES, V0512
from .standin import Setup

DRAFT_LAYER = 61  # DeepSeek-V3's MTP layer follows its 61 target layers
TWO_LAYERS = (0, 1)  # the first two attention layers of a forward: shows what runs once


@dataclass(frozen=True)
class Phase:
    name: str
    role: str  # the standin.Backends field serving it (draft: the multi-step backend)
    mode: str  # the ForwardMode member its forward batches carry
    tokens: Callable[[Setup], int]  # per request: the graph's width (state, capture, query)
    spec_info: Callable[[Setup], object]  # the spec_info of one of its forward batches
    layers: tuple[int, ...]  # attention layers its captured forward runs, per step backend
    whole_buffers: bool = False  # the replay call gets whole static buffers, not [:bs]
    fixed_extend: bool = False  # every request extends by `tokens` (the overlap worker)
    eagle: bool = True  # in an EAGLE iteration; else a server (and backends) of its own
    bases: tuple[str, ...] = BASES  # the SGLang bases (sglang_api) that have it

    @property
    def multi_step(self) -> bool:
        """Served by the multi-step draft backend, whose signatures differ."""
        return self.role == "draft"


def _draft(setup: Setup):
    return draft_spec_info()


def _verify(setup: Setup):
    return verify_spec_info(setup.draft_tokens)


TABLE = (
    # EAGLEDraftCudaGraphRunner: every draft step runs the one-layer draft model.
    Phase("draft", "draft", "DECODE", lambda s: s.topk, _draft, (DRAFT_LAYER,)),
    # CudaGraphRunner without speculation: one token per request.
    Phase("decode", "target", "DECODE", lambda s: 1, lambda s: None, TWO_LAYERS, eagle=False),
    # CudaGraphRunner of the target model under EAGLE: the draft tokens.
    Phase("verify", "target", "TARGET_VERIFY", lambda s: s.draft_tokens, _verify, TWO_LAYERS),
    # EAGLEDraftExtendCudaGraphRunner: up to steps + 1 accepted tokens per request.
    Phase(
        "extend_v1",
        "draft_extend",
        "DRAFT_EXTEND",
        lambda s: s.steps + 1,
        _draft,
        TWO_LAYERS,
        whole_buffers=True,
        bases=(V0512.base,),  # v0.5.13+ has no ForwardMode.DRAFT_EXTEND
    ),
    # The same runner under the overlap worker (DRAFT_EXTEND_V2): the draft tokens.
    Phase(
        "extend_v2",
        "draft_extend",
        "DRAFT_EXTEND_V2",
        lambda s: s.draft_tokens,
        _draft,
        TWO_LAYERS,
        whole_buffers=True,
        fixed_extend=True,
    ),
)
BY_NAME = {phase.name: phase for phase in TABLE}


def on_base(base: str) -> tuple[Phase, ...]:
    """The rows of ``TABLE`` that exist on SGLang ``base``."""
    return tuple(phase for phase in TABLE if base in phase.bases)
