"""Unpack a wheel's package into a tree, refusing entries that could escape it."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path, PurePosixPath

from sglpatch.errors import UserError


def check_entries(archive: zipfile.ZipFile, origin: Path) -> None:
    """Raise UserError on the first entry that is unsafe to unpack."""
    seen: set[str] = set()
    for info in archive.infolist():
        reason = _unsafe_reason(info)
        if reason is None and info.filename in seen:
            reason = "appears twice"
        if reason:
            raise UserError(
                f"unsafe entry {info.filename!r} in {origin}: {reason}; refusing to unpack"
            )
        seen.add(info.filename)


def _unsafe_reason(info: zipfile.ZipInfo) -> str | None:
    """Why an entry is unsafe, or None."""
    name = info.filename
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    if "\\" in name or ".." in parts or not parts:
        return "path escapes the target folder"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "symbolic link or special file"
    return None


def extract_package(wheel: Path, package: str, dest: Path) -> int:
    """Unpack every file of ``package/`` in ``wheel`` below ``dest``.

    Every entry of the archive is checked before anything is written. Returns
    the number of files written; keeps the executable bit, nothing else.
    """
    root = dest.resolve()
    with zipfile.ZipFile(wheel) as archive:
        check_entries(archive, wheel)
        members = [
            info
            for info in archive.infolist()
            if info.filename.startswith(f"{package}/") and not info.is_dir()
        ]
        for info in members:
            _write_member(archive, info, root)
    if not members:
        raise UserError(f"{wheel} holds no {package}/ package")
    return len(members)


def _write_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, root: Path) -> None:
    """Write one regular file below ``root``."""
    target = (root / info.filename).resolve()
    if not target.is_relative_to(root):
        raise UserError(f"unsafe entry {info.filename!r}: escapes {root}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with archive.open(info) as src, target.open("wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
    executable = (info.external_attr >> 16) & 0o111
    target.chmod(0o755 if executable else 0o644)
