"""Download wheels with pip into a verified cache."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from sglpatch.console import note
from sglpatch.digest import sha256_file
from sglpatch.errors import UserError


@dataclass(frozen=True)
class WheelTarget:
    """The interpreter and platforms a wheel must fit."""

    python_version: str
    platforms: tuple[str, ...]
    implementation: str = "cp"

    def pip_args(self) -> list[str]:
        """pip options selecting binary wheels for this target."""
        args = ["--no-deps", "--only-binary=:all:"]
        args += ["--python-version", self.python_version]
        args += ["--implementation", self.implementation]
        for platform in self.platforms:
            args += ["--platform", platform]
        return args

    def describe(self) -> str:
        """A short human label, e.g. ``cp311 manylinux_2_34_x86_64``."""
        tag = self.implementation + self.python_version.replace(".", "")
        return f"{tag} {'/'.join(self.platforms[:2])}"


@dataclass(frozen=True)
class Wheel:
    """A verified wheel in the cache."""

    requirement: str
    path: Path
    sha256: str
    verified_by: str


def fetch_exact(
    requirement: str, filename: str, sha256: str, target: WheelTarget, cache: Path
) -> Wheel:
    """The wheel ``filename`` with hash ``sha256`` (the pin's), from cache or pip."""
    return _obtain(cache, target, [(requirement, filename, sha256)], "pin")[0]


def reuse(requirement: str, path: Path, sha256: str, source: str) -> Wheel | None:
    """The wheel ``path`` (a cache's, perhaps another base's) if its sha256 is
    ``sha256`` (from ``source``, e.g. a base.toml); None if it is not there.

    A file with another hash is moved aside, never deleted, and None returned,
    so that the caller downloads it afresh.
    """
    try:
        actual = sha256_file(path)
    except FileNotFoundError:
        return None
    if actual == sha256:
        return Wheel(requirement, path, actual, "pin")
    aside = path.with_name(f"{path.name}.bad-{actual[:12]}")
    try:
        path.replace(aside)
    except FileNotFoundError:  # moved by another run meanwhile
        pass
    note(
        f"checksum mismatch for {path}: expected sha256 {sha256} ({source}), got {actual};"
        f" moved it aside to {aside.name}; fetching {requirement} afresh"
    )
    return None


# Where an expected sha256 came from, as a message names it.
_EXPECTED_FROM = {"pin": "the pin (wheel_sha256 in base.toml)", "index": "the index"}


def fetch(requirements: list[str], target: WheelTarget, cache: Path) -> list[Wheel]:
    """One wheel per pinned requirement, verified against the index's sha256."""
    records = {req: _read_record(cache, req, target) for req in requirements}
    unknown = [req for req, rec in records.items() if rec is None]
    records.update(_resolve(unknown, target, cache) if unknown else {})
    wanted = [(req, *records[req]) for req in requirements]
    unverifiable = [f"{req} ({name})" for req, name, sha in wanted if not sha]
    if unverifiable:
        raise UserError(
            f"the index reported no sha256 for {', '.join(unverifiable)}: refusing a"
            " download that cannot be verified"
        )
    wheels = _obtain(cache, target, wanted, "index")
    for wheel in wheels:
        remember(cache, wheel, target)
    return wheels


def _obtain(
    cache: Path, target: WheelTarget, wanted: list[tuple[str, str, str]], how: str
) -> list[Wheel]:
    """Cached or freshly downloaded wheels, each checked before it is returned."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [item for item in wanted if not (cache / item[1]).exists()]
    if missing:
        _download(cache, target, missing)
    wheels = []
    fresh = {name for _, name, _ in missing}
    for req, name, sha in wanted:
        actual = _verified(cache / name, sha, name in fresh, _EXPECTED_FROM[how])
        wheels.append(Wheel(req, cache / name, actual, how if sha else "computed"))
    return wheels


def _verified(path: Path, expected: str, fresh: bool = False, source: str = "") -> str:
    """The sha256 of ``path`` if it is ``expected`` (or nothing was expected).

    A file with another hash is moved aside, never deleted, and refused. A fresh
    download with the hash of one moved aside before is the same file again: then
    the expected hash (``source``) is what may be wrong.
    """
    actual = sha256_file(path)
    if expected and actual != expected:
        aside = path.with_name(f"{path.name}.bad-{actual[:12]}")
        again = fresh and aside.exists()
        path.replace(aside)
        if again:
            raise UserError(
                f"checksum mismatch for {path} again: a fresh download has sha256"
                f" {actual}, as the copy moved aside before ({aside.name}), not {expected};"
                f" the expected sha256, from {source or 'the pin'}, may be wrong: check it"
                " against the index (the file is kept)"
            )
        raise UserError(
            f"checksum mismatch for {path}: expected sha256 {expected}, got {actual};"
            f" moved it aside to {aside.name}; run again to download it afresh"
        )
    return actual


def _download(cache: Path, target: WheelTarget, items: list[tuple[str, str, str]]) -> None:
    """pip-download ``items`` into a scratch dir, then move them into ``cache``."""
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as scratch:
        reqs = [req for req, _, _ in items]
        what = ", ".join(f"{req} ({name})" for req, name, _ in items)
        _pip(["download", *target.pip_args(), "-d", scratch, *reqs], what, target, cache)
        for req, name, _ in items:
            got = Path(scratch, name)
            if not got.exists():
                found = ", ".join(sorted(p.name for p in Path(scratch).iterdir()))
                raise UserError(f"pip fetched {found or 'nothing'} for {req}, expected {name}")
            got.replace(cache / name)


def _resolve(
    requirements: list[str], target: WheelTarget, cache: Path
) -> dict[str, tuple[str, str]]:
    """Ask pip which wheel each requirement resolves to, and its index sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".resolve-", dir=cache) as scratch:
        report = Path(scratch, "report.json")
        args = ["install", "--dry-run", "--ignore-installed", "--target", scratch]
        args += [*target.pip_args(), "--report", str(report), *requirements]
        _pip(args, " ".join(requirements), target, cache)
        installs = json.loads(report.read_text())["install"]
    by_name = {_canonical(item["metadata"]["name"]): item for item in installs}
    return {req: _from_report(req, by_name) for req in requirements}


def _from_report(req: str, by_name: dict) -> tuple[str, str]:
    """(filename, sha256) of ``req`` in a pip report; sha256 empty if unknown."""
    item = by_name.get(_canonical(re.split(r"[=<>!~\[; ]", req, maxsplit=1)[0]))
    if item is None:
        raise UserError(f"pip resolved no wheel for {req}")
    info = item["download_info"]
    filename = unquote(Path(urlparse(info["url"]).path).name)
    if "/" in filename or "\\" in filename or not filename.endswith(".whl"):
        raise UserError(f"pip resolved {req} to {filename!r}, which is not a wheel file name")
    return filename, info.get("archive_info", {}).get("hashes", {}).get("sha256", "")


# pip's own limits on a silent index: (pip's flag, the variable that sets it, the
# tool's value). They go on pip's command line, which beats pip's other spellings
# of them (PIP_DEFAULT_TIMEOUT, a pip.conf): only these variables change them.
_PIP_LIMITS = (("--timeout", "PIP_TIMEOUT", "30"), ("--retries", "PIP_RETRIES", "2"))
# The most a whole pip run may take.
DOWNLOAD_TIMEOUT = 900
# pip's lines that tell of a network fault (a debug line: pip runs with -vv).
_NETWORK = re.compile(r"(?:connection broken by|Could not fetch URL \S+:) (.*)")
_CAUSE = re.compile(r"(Failed to establish a new connection: [^'\")]*|Read timed out[^'\")]*)")


def _pip(args: list[str], what: str, target: WheelTarget, cache: Path) -> None:
    """Run pip (its output kept for the message), for a bounded time, saying so;
    on failure raise one line naming what was fetched and why (a network fault
    before pip's last words)."""
    limit = _download_timeout()
    limits = pip_limits()
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args, *limits]
    argv += ["--progress-bar", "off", "-vv"]  # -vv: "Could not fetch URL ...: why"
    env = dict(os.environ)
    note(
        f"pip: fetching {what} for {target.describe()} (at most {limit} s; pip waits"
        f" {limits[1]} s for an answer, {limits[3]} retries)"
    )
    failed = f"pip could not fetch {what} for {target.describe()} into {cache}"
    try:
        proc = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"{failed}: pip did not finish in {limit} s (an index that does not answer?"
            " SGLPATCH_DOWNLOAD_TIMEOUT sets the limit)"
        ) from None
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")]
        reason = errors[-1] if errors else f"pip exited {proc.returncode}"
        reason = reason.removeprefix("ERROR: ")
        network = [m[1] for line in lines if (m := _NETWORK.search(line))]
        causes = [cause[1] for text in network if (cause := _CAUSE.search(text))]
        if causes:
            index = os.environ.get("PIP_INDEX_URL") or "the package index"
            reason = f"cannot reach {index} ({causes[-1]}), so pip says: {reason}"
        raise UserError(f"{failed}: {reason}")


def pip_limits() -> list[str]:
    """``["--timeout", "30", "--retries", "2"]``: the tool's values, or those of
    PIP_TIMEOUT and PIP_RETRIES where set (checked, so that a bad one is one line)."""
    args = []
    for flag, variable, default in _PIP_LIMITS:
        value = os.environ.get(variable) or default
        if not re.fullmatch(r"\d+(\.\d+)?" if flag == "--timeout" else r"\d+", value):
            raise UserError(f"{variable}={value!r}: expected a number ({flag} of pip)")
        args += [flag, value]
    return args


def _download_timeout() -> int:
    """SGLPATCH_DOWNLOAD_TIMEOUT (seconds), else DOWNLOAD_TIMEOUT."""
    text = os.environ.get("SGLPATCH_DOWNLOAD_TIMEOUT", "")
    if not text:
        return DOWNLOAD_TIMEOUT
    if not text.isdigit() or int(text) == 0:
        raise UserError(f"SGLPATCH_DOWNLOAD_TIMEOUT={text!r}: expected a number of seconds")
    return int(text)


def _canonical(name: str) -> str:
    """A project name normalised as PEP 503 does."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_path(cache: Path, req: str, target: WheelTarget) -> Path:
    """Where the resolution of ``req`` for ``target`` is remembered."""
    key = re.sub(r"[^A-Za-z0-9.=_-]+", "_", f"{req}-{target.describe()}")
    return cache / "resolved" / f"{key}.json"


def _read_record(cache: Path, req: str, target: WheelTarget) -> tuple[str, str] | None:
    """A remembered (filename, sha256) whose wheel is still cached, or None."""
    path = _record_path(cache, req, target)
    try:
        data = json.loads(path.read_text())
        filename, sha256 = data["filename"], data["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or damaged: ask the index again
    if not isinstance(filename, str) or Path(filename).name != filename:
        return None
    return (filename, sha256) if (cache / filename).exists() else None


def remember(cache: Path, wheel: Wheel, target: WheelTarget) -> None:
    """Remember which wheel ``wheel.requirement`` resolved to."""
    path = _record_path(cache, wheel.requirement, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"filename": wheel.path.name, "sha256": wheel.sha256}
    path.write_text(json.dumps(data, indent=1) + "\n")
