"""The two importable trees: upstream base and patched."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from sglpatch.layout import Layout


class Trees(NamedTuple):
    """The ``python/`` roots holding the ``sglang`` package of each tree."""

    base: Path
    patched: Path


def tree_paths(build_dir: str | Path, base: str | None = None) -> Trees:
    """Tree roots of ``base`` (default: the default base) under ``build_dir``
    (``Layout``); SGLPATCH_BASE_TREE / SGLPATCH_PATCHED_TREE override."""
    layout = Layout.create(build_dir, base=base)
    base = os.environ.get("SGLPATCH_BASE_TREE") or layout.base_tree
    patched = os.environ.get("SGLPATCH_PATCHED_TREE") or layout.patched_tree
    return Trees(Path(base).resolve(), Path(patched).resolve())
