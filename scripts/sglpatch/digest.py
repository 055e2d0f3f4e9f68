"""Content hashes: sha256 of downloads, git blob ids of files."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def git_blob_id(data: bytes) -> str:
    """The SHA-1 git gives a blob with this content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
