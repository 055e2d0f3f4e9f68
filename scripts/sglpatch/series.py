"""patches/series: the ordered list of patch files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sglpatch.errors import UserError

# A byte order mark, which some editors put at the start of a UTF-8 file.
BOM = "\ufeff"
HEADER = (
    "# Patches applied in order on top of the pinned SGLang release (base.toml).\n"
    "# Written by `make export` from the commits in build/<base>/sglang; edit those.\n"
)


@dataclass(frozen=True)
class Entry:
    """One series line naming a patch file."""

    name: str
    line: int


@dataclass(frozen=True)
class Series:
    """A validated series: every entry exists once, every patch is listed."""

    directory: Path
    names: tuple[str, ...]

    @property
    def paths(self) -> list[Path]:
        """The patch files in order."""
        return [self.directory / name for name in self.names]

    def __len__(self) -> int:
        return len(self.names)


def read_entries(directory: Path) -> list[Entry]:
    """The entries of ``directory/series``; none when the file is absent."""
    path = directory / "series"
    if not path.exists() and not path.is_symlink():
        return []
    if not path.is_file():
        raise UserError(f"{path} is not a file: make it the list of patch files, one a line")
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise UserError(f"{path} is not UTF-8 text (line {line}): fix or rewrite it") from None
    if text.startswith(BOM):
        raise UserError(
            f"{path} starts with a UTF-8 byte order mark (BOM, bytes EF BB BF), which would"
            " read as part of its first line (here and in the README's by-hand `git am`"
            " route): save it as UTF-8 without a BOM"
        )
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        text = line.split(" #", 1)[0].strip()
        if text and not text.startswith("#"):
            entries.append(Entry(text, number))
    return entries


def problems(directory: Path) -> list[str]:
    """Every disagreement between the series file and the directory."""
    entries = read_entries(directory)
    found: list[str] = []
    seen: dict[str, int] = {}
    for entry in entries:
        if entry.name in seen:
            found.append(
                f"series line {entry.line}: {entry.name} is listed twice"
                f" (first on line {seen[entry.name]})"
            )
            continue
        seen[entry.name] = entry.line
        found.extend(_entry_problems(directory, entry))
    for path in sorted(directory.glob("*.patch")):
        if path.name not in seen:
            found.append(f"{path.name} is in {directory} but not listed in series")
    return found


def _entry_problems(directory: Path, entry: Entry) -> list[str]:
    """Problems of one entry taken alone."""
    shown = entry.name if entry.name.isprintable() else ascii(entry.name)
    where = f"series line {entry.line}: {shown}"
    if (
        "/" in entry.name
        or entry.name in (".", "..")
        or " " in entry.name
        or not entry.name.isprintable()
    ):
        return [f"{where} is not a plain file name in {directory}"]
    path = directory / entry.name
    if path.exists() and not path.is_file():
        return [f"{where} is listed but {path} is not a file"]
    if not path.is_file():
        return [f"{where} is listed but {path} does not exist"]
    return []


def load(directory: Path) -> Series:
    """The validated series of ``directory``; raise UserError on any problem."""
    found = problems(directory)
    if found:
        raise UserError(f"patch series is inconsistent: {'; '.join(found)}")
    return Series(directory, tuple(entry.name for entry in read_entries(directory)))


def text(names: list[str]) -> bytes:
    """The series file listing ``names`` in order."""
    return (HEADER + "".join(f"{name}\n" for name in names)).encode("utf-8")


def write(directory: Path, names: list[str]) -> None:
    """Write the series file listing ``names`` in order, atomically."""
    temporary = directory / ".series.sglpatch-new"
    temporary.write_bytes(text(names))
    os.replace(temporary, directory / "series")
