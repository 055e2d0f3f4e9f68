"""The pin: patches/base.toml, the upstream release the series applies to."""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sglpatch.errors import UserError

VERSION_RE = re.compile(r"^\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?$")
# A wheel file name (PEP 427): name-version[-build]-python-abi-platform.whl, no path.
_WHEEL_RE = re.compile(
    r"[A-Za-z0-9_.]+-[A-Za-z0-9_.+!]+(-\d[A-Za-z0-9_.]*)?(-[A-Za-z0-9_.]+){3}\.whl"
)
_TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PATH_PART_RE = re.compile(r"[A-Za-z0-9_.-]+")
_HEX = {"wheel_sha256": 64, "target_blob": 40}
_FIELDS = (
    "version",
    "tag",
    "released",
    "repository",
    "wheel",
    "wheel_sha256",
    "target",
    "target_blob",
)


@dataclass(frozen=True)
class Pin:
    """The validated ``[base]`` table of base.toml."""

    version: str
    tag: str
    released: dt.date
    repository: str
    wheel: str
    wheel_sha256: str
    target: str
    target_blob: str
    path: Path
    raw: bytes

    @property
    def base_tag(self) -> str:
        """The tag of the upstream base commit in the build tree."""
        return f"base/{self.tag}"


def check_version(version: str, shown: str = "") -> str:
    """Return ``version`` if it looks like a release number, else raise (naming it
    as ``shown``, e.g. ``VERSION='0.5'``)."""
    if not VERSION_RE.match(version):
        raise UserError(f"bad version {shown or repr(version)}: expected X.Y.Z (e.g. 0.5.13)")
    return version


def load_pin(path: Path) -> Pin:
    """Read and validate the pin file."""
    try:
        raw = path.read_bytes()
        table = tomllib.loads(raw.decode("utf-8")).get("base")
    except FileNotFoundError:
        raise UserError(f"pin file {path} not found") from None
    except OSError as exc:
        raise UserError(f"pin file {path} cannot be read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    if not isinstance(table, dict):
        raise UserError(f"{path}: missing [base] table")
    return Pin(**_validated(path, table), path=path, raw=raw)


def _validated(path: Path, table: dict) -> dict:
    """Check every field of the ``[base]`` table; return them by name."""
    missing = [name for name in _FIELDS if name not in table]
    if missing:
        raise UserError(f"{path}: [base] lacks {', '.join(missing)}")
    values = {name: table[name] for name in _FIELDS}
    if isinstance(values["released"], str):
        values["released"] = _parse_date(path, values["released"])
    if type(values["released"]) is not dt.date:
        raise UserError(f"{path}: released must be a date (YYYY-MM-DD)")
    for name in _FIELDS:
        if name != "released" and not isinstance(values[name], str):
            raise UserError(f"{path}: {name} must be a string")
    for name, length in _HEX.items():
        if not re.fullmatch(f"[0-9a-f]{{{length}}}", values[name]):
            raise UserError(f"{path}: {name} must be {length} lowercase hex digits")
    if not VERSION_RE.match(values["version"]):
        raise UserError(f"{path}: bad version {values['version']!r}")
    if not values["wheel"].startswith(f"sglang-{values['version']}-"):
        raise UserError(f"{path}: wheel {values['wheel']} is not sglang {values['version']}")
    if not _WHEEL_RE.fullmatch(values["wheel"]):
        raise UserError(f"{path}: wheel {values['wheel']!r} is not a wheel file name")
    if not _TAG_RE.fullmatch(values["tag"]) or ".." in values["tag"]:
        raise UserError(f"{path}: tag {values['tag']!r} is not a plain tag name")
    parts = values["target"].split("/")
    if not all(_PATH_PART_RE.fullmatch(part) and part not in (".", "..") for part in parts):
        raise UserError(f"{path}: target {values['target']!r} is not a relative path")
    if values["repository"].startswith("-") or not values["repository"].isprintable():
        raise UserError(f"{path}: repository {values['repository']!r} is not a URL")
    return values


def _parse_date(path: Path, text: str) -> dt.date:
    """Parse an ISO date given as a string."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{path}: released {text!r} is not YYYY-MM-DD") from None
