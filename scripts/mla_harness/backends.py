"""The backends an EAGLE decode iteration uses, as one record.

Its own module so that ``sglang_api`` (which builds them) and ``standin``
(which builds the runner they are built on, then asks ``sglang_api``) need
not import each other: ``standin`` -> ``sglang_api`` -> ``backends``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace


@dataclass
class Backends:
    """The three backends an EAGLE decode iteration uses, as SGLang builds them."""

    runner: SimpleNamespace
    draft: object  # TRTLLMMLAMultiStepDraftBackend (draft model, multi-step decode)
    target: object  # TRTLLMMLABackend (target model: verify)
    draft_extend: object  # TRTLLMMLABackend (draft model: draft extend)
    draft_runner: object = None  # v0.5.23: the draft worker's runner (``runner``: the target's)
