"""The two importable trees: upstream base and patched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Trees(NamedTuple):
    """The ``python/`` roots holding the ``sglang`` package of each tree."""

    base: Path
    patched: Path


def tree_paths(build_dir: str | Path) -> Trees:
    """Tree roots under ``build_dir``; SGLPATCH_BASE_TREE/_PATCHED_TREE override."""
    build = Path(build_dir).resolve()
    base = os.environ.get("SGLPATCH_BASE_TREE") or build / "base" / "python"
    patched = os.environ.get("SGLPATCH_PATCHED_TREE") or build / "sglang" / "python"
    return Trees(Path(base).resolve(), Path(patched).resolve())
