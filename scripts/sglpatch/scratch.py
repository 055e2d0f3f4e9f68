"""Folders of the tool's own in the build directory: made aside, swapped in,
removed; what a killed run left behind is removed by the next one."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sglpatch.console import note
from sglpatch.layout import Layout

NEW_TREE = ".sglang-new-"
NEW_BUNDLE = ".bundle-new-"
NEW_EXPORT = ".export-new-"
TRASH = ".trash-"
# Scratch folders in the download caches (pipfetch, upstream's git mirror).
DOWNLOAD = ".download-"
RESOLVE = ".resolve-"
PARTIAL_CLONE = ".partial"
_BUILD_PREFIXES = (NEW_TREE, NEW_BUNDLE, NEW_EXPORT, TRASH)
_CACHE_PREFIXES = (DOWNLOAD, RESOLVE)


def new_dir(layout: Layout, prefix: str) -> Path:
    """A fresh scratch folder in the build directory."""
    layout.build.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=layout.build))


def discard(layout: Layout, path: Path) -> None:
    """Delete a tree of the tool's: renamed aside at once, then removed.

    A run killed half-way leaves a ``.trash-*`` folder, never a half-deleted tree.
    """
    if not path.exists() and not path.is_symlink():
        return
    trash = new_dir(layout, TRASH)
    path.rename(trash / path.name)
    shutil.rmtree(trash)


def sweep(layout: Layout) -> list[Path]:
    """Remove the scratch folders of killed runs; call with the build lock held."""
    found = []
    if layout.build.is_dir():
        found += [p for p in layout.build.iterdir() if p.name.startswith(_BUILD_PREFIXES)]
    for cache in _caches(layout.cache):
        for path in cache.iterdir():
            if path.name.startswith(_CACHE_PREFIXES) or path.name.endswith(PARTIAL_CLONE):
                found.append(path)
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        note(f"removed {path.name}, left by an interrupted run")
    return found


def _caches(cache: Path) -> list[Path]:
    """The cache folder and its sub-caches (cp312/, upstream/ ...)."""
    if not cache.is_dir():
        return []
    return [cache, *(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))]
