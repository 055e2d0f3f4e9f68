"""Where things live: the repository, each base's patch directory and build trees."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sglpatch import bases

REPO_ROOT = Path(__file__).resolve().parents[2]
PATCHES_ROOT = REPO_ROOT / "patches"


@dataclass(frozen=True)
class Layout:
    """Absolute paths of every input and output of the tool, for one base.

    Each base of ``patches/bases.toml`` has its series in its directory under
    ``patches/`` and everything it builds under ``<build>/<name>/``: the download
    cache, the lock, the trees, the ladder, the bench results and the bundle. A
    base's build folder is self-contained, as the single-base layout was.
    """

    root: Path
    build: Path
    patches: Path
    pin_file: Path
    name: str
    lint_config: Path

    @classmethod
    def create(
        cls,
        build: str | Path | None = None,
        patches: str | Path | None = None,
        pin_file: str | Path | None = None,
        base: str | None = None,
    ) -> Layout:
        """Resolve the paths of ``base`` (None: the default base) under the build
        root ``build``; ``patches`` (or ``SGLPATCH_PATCHES_DIR``) replaces the
        base's series directory. An unknown base is a UserError naming the known."""
        chosen = bases.load(PATCHES_ROOT).get(base)
        patches = patches or os.environ.get("SGLPATCH_PATCHES_DIR") or chosen.directory
        patches = Path(patches).resolve()
        return cls(
            root=REPO_ROOT,
            build=(Path(build or REPO_ROOT / "build") / chosen.name).resolve(),
            patches=patches,
            pin_file=Path(pin_file or patches / "base.toml").resolve(),
            name=chosen.name,
            lint_config=REPO_ROOT / chosen.lint,
        )

    @classmethod
    def every_base(cls, build: str | Path | None = None) -> list[Layout]:
        """The layout of each base, in the order of ``patches/bases.toml``."""
        return [cls.create(build, base=name) for name in bases.load(PATCHES_ROOT).names]

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
    def flashinfer(self) -> Path:
        """The FlashInfer wheels for GPU hosts, in parts (``flashinfer_wheels.py``)."""
        return self.build / "flashinfer"

    @property
    def ladder(self) -> Path:
        """Per-patch trees of ``make bench --ladder`` (base + the first k patches)."""
        return self.build / "ladder"
