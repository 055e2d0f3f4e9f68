"""patches/bases.toml: the pinned bases a project carries a series for.

Each base has a name (also the folder of its build trees, ``build/<name>``),
a series directory under ``patches/`` (its pin, series and patches), the
test directories that test its trees and the pre-commit config of upstream's
hooks for its patched files; one base is the default. The file is
the project's data; this module only reads and checks it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sglpatch.errors import UserError
from sglpatch.makevars import spelled

FILE_NAME = "bases.toml"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_KEYS = {"name", "directory", "tests", "lint"}


@dataclass(frozen=True)
class Base:
    """One base: its name, its series directory (absolute), its test directories
    and the pre-commit config of upstream's hooks for its patched files (a path
    relative to the repository)."""

    name: str
    directory: Path
    tests: tuple[str, ...]
    lint: str


@dataclass(frozen=True)
class Bases:
    """Every base of the project, in the file's order, and the default one."""

    path: Path
    default: str
    bases: tuple[Base, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(base.name for base in self.bases)

    def get(self, name: str | None) -> Base:
        """The base called ``name`` (None or '': the default); refuse an unknown one."""
        wanted = name or self.default
        for base in self.bases:
            if base.name == wanted:
                return base
        raise UserError(
            f"unknown base {spelled('BASE', '--base', repr(wanted))}: this project has"
            f" {self.described()}"
        )

    def described(self) -> str:
        """``v0.5.12, v0.5.23 (the default), in patches/bases.toml``."""
        shown = [f"{n} (the default)" if n == self.default else n for n in self.names]
        return f"{', '.join(shown)}, in {self.path.parent.name}/{self.path.name}"


def load(patches_root: Path) -> Bases:
    """Read and check ``patches_root/bases.toml``."""
    path = patches_root / FILE_NAME
    try:
        table = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} not found: it lists the bases and their series") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: cannot be read as TOML: {exc}") from None
    rows = table.get("base")
    if set(table) - {"default", "base"} or not isinstance(rows, list) or not rows:
        raise UserError(f"{path}: expected `default = NAME` and [[base]] tables")
    bases = tuple(_base(path, patches_root, number, row) for number, row in enumerate(rows, 1))
    names = [base.name for base in bases]
    if len(set(names)) != len(names):
        raise UserError(f"{path}: a base name is listed twice ({', '.join(names)})")
    default = table.get("default")
    if default not in names:
        raise UserError(f"{path}: default {default!r} is not one of {', '.join(names)}")
    return Bases(path, default, bases)


def _base(path: Path, patches_root: Path, number: int, row: object) -> Base:
    """One checked [[base]] table."""
    where = f"{path}: base {number}"
    if not isinstance(row, dict) or set(row) != _KEYS:
        raise UserError(f"{where}: keys are {', '.join(sorted(_KEYS))}")
    name, directory, tests, lint = row["name"], row["directory"], row["tests"], row["lint"]
    for field, value in (("name", name), ("directory", directory)):
        if not isinstance(value, str) or not _NAME_RE.fullmatch(value) or ".." in value:
            raise UserError(f"{where}: {field} {value!r} is not a plain name")
    if not isinstance(tests, list) or not all(isinstance(t, str) and t for t in tests):
        raise UserError(f"{where}: tests must be a list of test directories")
    if not isinstance(lint, str) or lint.startswith("/") or ".." in lint.split("/"):
        raise UserError(f"{where}: lint {lint!r} is not a path inside the repository")
    return Base(name, patches_root / directory, tuple(t.rstrip("/") for t in tests), lint)
