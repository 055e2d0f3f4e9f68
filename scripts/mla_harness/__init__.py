"""Drive SGLang's real trtllm_mla backend code outside a server.

Modules, one job each:

- ``replacements``: the only things replaced, each with the reason (one place,
  for every SGLang base).
- ``sglang_api``: what differs between the SGLang API generations the driver
  serves (v0.5.12; v0.5.23's out-of-graph / in-graph metadata calls): building
  the backends, capture, replay, the in-graph step (as thunks on the driver,
  and per backend call for checks that drive a backend themselves, such as
  ``ragged_verify_check``); picked by feature.
- ``standin``: a small ModelRunner stand-in and the backends built on it
  (``standin`` -> ``sglang_api`` -> ``backends``, the record of the built
  backends: no import circle).
- ``batches``: forward batches and CUDA-graph-runner style padding.
- ``launches``: counts Triton launches, device ops, syncs and allocations.
- ``attention``: the backend's real forward up to the attention kernel, which
  it records (the metadata a captured graph's kernel is given).
- ``visible``: the metadata the attention kernel reads, and only that.
- ``phases``: the phase table (backend, ForwardMode, tokens, spec_info, layers,
  replay arguments of each phase: draft, decode, verify, draft extend v1 / v2;
  the bases each exists on).
- ``driver``: the one driver of any phase: eager, capture, replay, forward.
- ``scenarios``: seeded generated scenarios and named edge cases (``TEST_CASES``).
- ``probe`` / ``records``: runs scenarios against one tree in its own process;
  what it returns, typed.
- ``child``: one tree per process (child entry point, parent launcher) and the
  entry points' one error convention.
- ``rebuild_check`` / ``consumer``: 0007's fused kernel; CUDA graphs of the
  forward replayed with new batches (GPU).
- ``kv_indices_check``: the v0.5.23 series' extended table kernel against
  v0.5.23's own.
- ``dcp_check``: DCP 2 / 4, every rank: what each rank's kernel receives after
  every replay, against the DCP layout's reference (v0.5.23).
- ``unified_pool``: SGLang's translating KV pool (the unified memory pool of an
  MLA hybrid-Mamba model), built with SGLang's own classes, and the
  allocator's virtual-to-physical rule the references read (v0.5.23).
"""

import os as _os
from pathlib import Path as _Path

SCRIPTS = _Path(__file__).resolve().parent.parent


def subprocess_env() -> dict:
    """The environment for a child process: ``scripts/`` first on PYTHONPATH,
    keeping what was there (e.g. the offline bundle's site directory)."""
    paths = [str(SCRIPTS), *filter(None, _os.environ.get("PYTHONPATH", "").split(_os.pathsep))]
    return dict(_os.environ, PYTHONPATH=_os.pathsep.join(paths))
