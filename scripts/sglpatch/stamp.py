"""The record of what a build tree was made from, to skip needless rebuilds,
and of an apply in progress, to tell the tool's unfinished work from the user's."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sglpatch.pin import Pin
from sglpatch.series import Series

# Version of the file; BASE_FORMAT versions how the base is made (a change rebuilds).
FORMAT = 2
BASE_FORMAT = 1
FILE_NAME = "sglpatch-stamp"


@dataclass(frozen=True)
class Building:
    """What an apply that has not finished may have left in the tree.

    Written before the tool changes the tree and updated before each step, so
    after an interrupt (even SIGKILL) the next run knows what is its own.
    """

    # Commits HEAD may hold that are no one's work: the HEAD found when the
    # rebuild began (already checked), the base, each patch's commit.
    heads: tuple[str, ...] = ()
    # Files the rebuild may have left modified (checkout, the patch in git am).
    paths: tuple[str, ...] = ()
    # The patch being applied by git am, whose rebase-apply is the tool's.
    am: str | None = None

    def step(
        self, heads: Sequence[str | None] = (), paths: Sequence[str] = (), am: str | None = None
    ) -> Building:
        """The same record with more heads and paths, at ``am``."""
        more_heads = [h for h in heads if h and h not in self.heads]
        more_paths = sorted(set(paths) - set(self.paths))
        return Building((*self.heads, *more_heads), (*self.paths, *more_paths), am)


@dataclass(frozen=True)
class Stamp:
    """Hashes of the inputs of a build tree and the commit it reached."""

    base: str
    patches: str
    head: str | None
    complete: bool
    building: Building | None = field(default=None)

    @property
    def inputs(self) -> str:
        """One hash of everything the tree was built from."""
        return f"{self.base}:{self.patches}"

    def with_head(self, head: str | None, complete: bool) -> Stamp:
        """The same inputs at another commit, at rest (no apply in progress)."""
        return Stamp(self.base, self.patches, head, complete)

    def building_with(self, building: Building) -> Stamp:
        """The same inputs, with an apply in progress."""
        return replace(self, complete=False, building=building)


def compute(pin: Pin, series: Series, source: str, url: str) -> Stamp:
    """The stamp a tree built from these inputs gets (no head yet)."""
    base = _digest([b"base", str(BASE_FORMAT).encode(), source.encode(), url.encode(), pin.raw])
    return Stamp(base, patches_digest(pin, series), None, False)


def patches_digest(pin: Pin, series: Series) -> str:
    """A hash of the pin and every patch of the series, in order."""
    parts = [b"patches", pin.raw]
    for path in series.paths:
        parts += [path.name.encode(), path.read_bytes()]
    return _digest(parts)


def _digest(parts: list[bytes]) -> str:
    """A sha256 over length-prefixed parts."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(b"%d:" % len(part) + part)
    return digest.hexdigest()


def path_of(repo: Path) -> Path:
    """Where the stamp of ``repo`` lives (inside .git, never committed)."""
    return repo / ".git" / FILE_NAME


def read(repo: Path) -> Stamp | None:
    """The stamp of ``repo``, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(path_of(repo).read_text())
        building = data.get("building")
        if building is not None:
            heads, paths = building["heads"], building["paths"]
            building = Building(tuple(map(str, heads)), tuple(map(str, paths)), building["am"])
        complete = bool(data["complete"])
        return Stamp(data["base"], data["patches"], data["head"], complete, building)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write(repo: Path, stamp: Stamp) -> None:
    """Record ``stamp`` for ``repo``, atomically (a kill leaves the old or the new)."""
    path = path_of(repo)
    temporary = path.with_name(FILE_NAME + ".tmp")
    data = {"format": FORMAT, **asdict(stamp)}
    temporary.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(temporary, path)
