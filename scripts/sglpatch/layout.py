"""Where things live: the repository, the patch directory and the build tree."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Layout:
    """Absolute paths of every input and output of the tool."""

    root: Path
    build: Path
    patches: Path
    pin_file: Path

    @classmethod
    def create(
        cls,
        build: str | Path | None = None,
        patches: str | Path | None = None,
        pin_file: str | Path | None = None,
        base: str | None = None,
    ) -> Layout:
        """Resolve the paths; ``SGLPATCH_PATCHES_DIR`` overrides the patch dir.

        ``base`` names a second base (e.g. ``v0.5.23``): its series is
        ``patches/<base>`` and its build tree ``<build>/<base>``. (Provisional:
        the multi-base tooling replaces this with the bases table.)"""
        patches = patches or os.environ.get("SGLPATCH_PATCHES_DIR") or REPO_ROOT / "patches"
        build = Path(build or REPO_ROOT / "build")
        if base:
            patches, build = Path(patches) / base, build / base
        patches = Path(patches).resolve()
        return cls(
            root=REPO_ROOT,
            build=build.resolve(),
            patches=patches,
            pin_file=Path(pin_file or patches / "base.toml").resolve(),
        )

    @property
    def series_file(self) -> Path:
        """The ordered list of patch files."""
        return self.patches / "series"

    @property
    def cache(self) -> Path:
        """Downloads reused by later runs."""
        return self.build / "cache"

    @property
    def sglang(self) -> Path:
        """The build tree: base commit plus one commit per patch."""
        return self.build / "sglang"

    @property
    def base(self) -> Path:
        """A detached worktree of the base tag."""
        return self.build / "base"

    @property
    def base_tree(self) -> Path:
        """The importable ``python/`` root of the base tree."""
        return self.base / "python"

    @property
    def patched_tree(self) -> Path:
        """The importable ``python/`` root of the patched tree."""
        return self.sglang / "python"

    @property
    def bundle(self) -> Path:
        """The offline bundle for GPU hosts."""
        return self.build / "bundle"

    @property
    def ladder(self) -> Path:
        """Per-patch trees of ``make bench --ladder`` (base + the first k patches)."""
        return self.build / "ladder"
