"""The record of what a build tree was made from, to skip needless rebuilds."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from sglpatch.pin import Pin
from sglpatch.series import Series

FORMAT = 1
FILE_NAME = "sglpatch-stamp"


@dataclass(frozen=True)
class Stamp:
    """Hashes of the inputs of a build tree and the commit it reached."""

    base: str
    patches: str
    head: str | None
    complete: bool

    @property
    def inputs(self) -> str:
        """One hash of everything the tree was built from."""
        return f"{self.base}:{self.patches}"

    def with_head(self, head: str | None, complete: bool) -> Stamp:
        """The same inputs at another commit."""
        return Stamp(self.base, self.patches, head, complete)


def compute(pin: Pin, series: Series, source: str, url: str) -> Stamp:
    """The stamp a tree built from these inputs gets (no head yet)."""
    base = _digest([b"base", str(FORMAT).encode(), source.encode(), url.encode(), pin.raw])
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
        return Stamp(data["base"], data["patches"], data["head"], bool(data["complete"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(repo: Path, stamp: Stamp) -> None:
    """Record ``stamp`` for ``repo``."""
    path_of(repo).write_text(json.dumps(asdict(stamp), indent=1) + "\n")
