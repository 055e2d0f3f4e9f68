"""Unpack a wheel's package into a tree, refusing entries that could escape it,
collide, or expand beyond reason."""

from __future__ import annotations

import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from sglpatch.errors import UserError

# Limits far above any real wheel (the pinned one: 2954 entries, 31 MB, the
# largest 0.7 MB, compressed at most 18:1) and far below a zip bomb.
MAX_ENTRIES = 100_000
MAX_ENTRY_BYTES = 256 << 20
MAX_TOTAL_BYTES = 1 << 30
MAX_RATIO = 100
RATIO_FLOOR = 1 << 20  # smaller entries may compress better than MAX_RATIO


def check_entries(archive: zipfile.ZipFile, origin: Path) -> None:
    """Raise UserError on the first entry that is unsafe to unpack, or on a bomb."""
    infos = archive.infolist()
    if len(infos) > MAX_ENTRIES:
        raise UserError(f"{origin} has {len(infos)} entries, over {MAX_ENTRIES}: refusing it")
    seen: set[str] = set()
    files: set[str] = set()
    folders: set[str] = set()  # named by an entry, or holding one
    total = 0
    for info in infos:
        name = info.filename.removesuffix("/")
        parents = {str(p) for p in PurePosixPath(name).parents if str(p) != "."}
        reason = _unsafe_reason(info) or _size_reason(info)
        if reason is None:
            reason = _collision(name, info.is_dir(), parents, seen, files, folders)
        if reason:
            raise UserError(
                f"unsafe entry {info.filename!r} in {origin}: {reason}; refusing to unpack"
            )
        seen.add(name)
        (folders if info.is_dir() else files).add(name)
        folders |= parents
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise UserError(
                f"{origin} would unpack to more than {MAX_TOTAL_BYTES >> 20} MiB: refusing it"
            )


def _collision(
    name: str, is_dir: bool, parents: set[str], seen: set[str], files: set[str], folders: set[str]
) -> str | None:
    """Why an entry clashes with an earlier one, or None."""
    if name in seen:
        return "appears twice"
    if name in (files if is_dir else folders):
        return "is both a file and a folder"
    if parents & files:
        return f"is inside {sorted(parents & files)[0]!r}, which is a file"
    return None


def _unsafe_reason(info: zipfile.ZipInfo) -> str | None:
    """Why an entry's name or type is unsafe, or None."""
    name = info.filename
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    if "\\" in name or ".." in parts or not parts:
        return "path escapes the target folder"
    if any(part in ("", ".") for part in name.removesuffix("/").split("/")):
        return "not a canonical path (an empty or '.' segment)"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return "symbolic link or special file"
    return None


def _size_reason(info: zipfile.ZipInfo) -> str | None:
    """Why an entry's size is unreasonable, or None."""
    if info.file_size > MAX_ENTRY_BYTES:
        return f"{info.file_size} bytes, over the {MAX_ENTRY_BYTES >> 20} MiB limit"
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        return f"expands {info.compress_size} bytes to {info.file_size}, over {MAX_RATIO}:1"
    return None


def extract_package(wheel: Path, package: str, dest: Path) -> int:
    """Unpack every file of ``package/`` in ``wheel`` below ``dest``.

    Every entry of the archive is checked before anything is written. Returns
    the number of files written; keeps the executable bit, nothing else.
    """
    root = dest.resolve()
    try:
        with zipfile.ZipFile(wheel) as archive:
            check_entries(archive, wheel)
            members = [
                info
                for info in archive.infolist()
                if info.filename.startswith(f"{package}/") and not info.is_dir()
            ]
            for info in members:
                _write_member(archive, info, root)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise UserError(f"{wheel} is not a valid zip archive: {exc}") from None
    if not members:
        raise UserError(f"{wheel} holds no {package}/ package")
    return len(members)


def _write_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, root: Path) -> None:
    """Write one regular file below ``root``, no larger than its header says."""
    target = (root / info.filename).resolve()
    if not target.is_relative_to(root):
        raise UserError(f"unsafe entry {info.filename!r}: escapes {root}")
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with archive.open(info) as src, target.open("wb") as out:
        while chunk := src.read(1 << 20):
            written += len(chunk)
            if written > info.file_size:
                raise UserError(f"entry {info.filename!r} is larger than its header says")
            try:
                out.write(chunk)
            except OSError as exc:  # a full disk: say where
                raise OSError(exc.errno, exc.strerror, str(target)) from None
    executable = (info.external_attr >> 16) & 0o111
    target.chmod(0o755 if executable else 0o644)
