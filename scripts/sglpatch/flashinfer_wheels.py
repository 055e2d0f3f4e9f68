"""The real FlashInfer for air-gapped GPU hosts, in parts one call can carry.

``ci/flashinfer-gpu.toml`` pins, per base, the wheels (file and sha256) that
``import flashinfer`` and the registered test's path need beyond the bundle
and the host. ``stage`` downloads them (``pipfetch.fetch_exact``: each checked
against its pin) into the base's cache and writes ``build/<base>/flashinfer``:
``part1/``, ``part2/`` ..., each at most ``part_mib`` MiB, the wheels cut into
pieces ``<wheel>.000``, ``.001`` ... (the largest first, then the smaller ones
where they fit); the last part also holds ``install.sh`` and
``MANIFEST.sha256`` (every piece, and every whole wheel as ``wheel <name>``).
On the GPU host, ``bash build/<base>/flashinfer/<last part>/install.sh TARGET``
joins the pieces, checks both, and installs the wheels with ``pip --no-deps
--no-index --target``.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sglpatch import scratch
from sglpatch.bundle import GPU_TARGET
from sglpatch.console import note
from sglpatch.digest import sha256_file
from sglpatch.errors import UserError
from sglpatch.layout import Layout
from sglpatch.pipfetch import Wheel, fetch_exact

TABLE = Path("ci") / "flashinfer-gpu.toml"
INSTALLER = Path(__file__).with_name("install_flashinfer.sh")
_FIELDS = ("base", "name", "version", "file", "sha256", "why")


@dataclass(frozen=True)
class Pinned:
    """One row of the table."""

    name: str
    version: str
    file: str
    sha256: str
    why: str


def read_table(path: Path, base: str) -> tuple[list[Pinned], int]:
    """The base's pinned wheels and the part size in bytes; refuse a bad table."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} not found: it pins the FlashInfer wheels per base") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    part_mib = data.get("part_mib")
    if not isinstance(part_mib, int) or not 1 <= part_mib <= 63:
        raise UserError(f"{path}: part_mib must be a whole number of MiB from 1 to 63")
    rows = []
    for number, row in enumerate(data.get("wheel", []), 1):
        if not isinstance(row, dict) or sorted(row) != sorted(_FIELDS):
            raise UserError(f"{path}: wheel {number} must have exactly {', '.join(_FIELDS)}")
        if not all(isinstance(row[f], str) for f in _FIELDS):
            raise UserError(f"{path}: wheel {number}: every field is a string")
        if len(row["sha256"]) != 64 or set(row["sha256"]) - set("0123456789abcdef"):
            raise UserError(f"{path}: wheel {number}: sha256 must be 64 lowercase hex digits")
        if "/" in row["file"] or not row["file"].endswith(".whl"):
            raise UserError(f"{path}: wheel {number}: file must be a wheel's file name")
        if row["base"] == base:
            rows.append(Pinned(*(row[f] for f in _FIELDS[1:])))
    if not rows:
        raise UserError(f"{path} pins no FlashInfer wheels for base {base}")
    return rows, part_mib * 1024 * 1024


def stage(layout: Layout) -> Path:
    """Download the base's pinned wheels and write ``build/<base>/flashinfer``."""
    rows, part_bytes = read_table(layout.root / TABLE, layout.name)
    wheels = [
        fetch_exact(f"{r.name}=={r.version}", r.file, r.sha256, GPU_TARGET, layout.cache / "cp312")
        for r in rows
    ]
    work = scratch.new_dir(layout, scratch.NEW_BUNDLE)
    try:
        parts = _fill(work, wheels, part_bytes)
        scratch.discard(layout, layout.flashinfer)
        work.chmod(0o755)
        work.rename(layout.flashinfer)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for number, size in enumerate(parts, 1):
        note(f"{layout.flashinfer}/part{number}: {size / 1024 / 1024:.1f} MiB ({size} bytes)")
    return layout.flashinfer


def _pieces(wheels: list[Wheel], part_bytes: int) -> list[tuple[Wheel, int, int, int]]:
    """(wheel, piece number, offset, size) of every piece, the largest first."""
    pieces = []
    for wheel in wheels:
        size = wheel.path.stat().st_size
        for number, offset in enumerate(range(0, max(size, 1), part_bytes)):
            pieces.append((wheel, number, offset, min(part_bytes, size - offset)))
    return sorted(pieces, key=lambda p: -p[3])


def _fill(root: Path, wheels: list[Wheel], part_bytes: int) -> list[int]:
    """Write the parts (first fit, the largest pieces first) and, into the last,
    install.sh and MANIFEST.sha256; return each part's size in bytes."""
    sizes: list[int] = []
    lines = []
    for wheel, number, offset, size in _pieces(wheels, part_bytes):
        index = next((i for i, used in enumerate(sizes) if used + size <= part_bytes), None)
        if index is None:
            sizes.append(0)
            index = len(sizes) - 1
        sizes[index] += size
        piece = root / f"part{index + 1}" / f"{wheel.path.name}.{number:03d}"
        piece.parent.mkdir(exist_ok=True)
        with wheel.path.open("rb") as source, piece.open("wb") as out:
            source.seek(offset)
            out.write(source.read(size))
        lines.append(f"{sha256_file(piece)}  {piece.relative_to(root).as_posix()}\n")
    lines += [f"{w.sha256}  wheel {w.path.name}\n" for w in wheels]
    last = root / f"part{len(sizes)}"
    shutil.copyfile(INSTALLER, last / "install.sh")
    (last / "install.sh").chmod(0o755)
    (last / "MANIFEST.sha256").write_text("".join(sorted(lines)))
    for path in (last / "install.sh", last / "MANIFEST.sha256"):
        sizes[-1] += path.stat().st_size
    return sizes
