"""The upstream base: the pinned release as a git commit, from a wheel or a tag."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
from pathlib import Path

from sglpatch.errors import UserError
from sglpatch.gitcmd import Git
from sglpatch.pin import Pin
from sglpatch.pipfetch import Wheel, WheelTarget, fetch_exact
from sglpatch.safezip import extract_package

SOURCES = ("wheel", "git")
RELEASE_NAME = "SGLang release"
RELEASE_EMAIL = "release@sglang.invalid"
# Keeps checkouts byte-identical to the blobs, whatever .gitattributes say.
_NO_CONVERSION = "* -text -eol -filter -ident -working-tree-encoding\n"


def check_source(source: str) -> str:
    """Return ``source`` if it is a known base source, else raise."""
    if source not in SOURCES:
        raise UserError(f"unknown --source {source!r}: use one of {', '.join(SOURCES)}")
    return source


def wheel_target(wheel_name: str, *extra_platforms: str) -> WheelTarget:
    """The pip target matching a wheel file name (``name-ver-pyXY-abi-plat.whl``)."""
    parts = wheel_name.removesuffix(".whl").split("-")
    if len(parts) < 5 or not parts[-3].startswith("cp"):
        raise UserError(f"cannot tell the platform of wheel {wheel_name}")
    python, platform = parts[-3][2:], parts[-1]
    version = f"{python[0]}.{python[1:]}"
    return WheelTarget(version, (platform, *extra_platforms))


def fetch_pinned_wheel(pin: Pin, cache: Path) -> Wheel:
    """The pinned wheel, verified against the pin's sha256."""
    target = wheel_target(pin.wheel)
    return fetch_exact(f"sglang=={pin.version}", pin.wheel, pin.wheel_sha256, target, cache)


def git_url(pin: Pin) -> str:
    """The repository to clone: SGLPATCH_GIT_URL, else the pin's."""
    url = os.environ.get("SGLPATCH_GIT_URL") or pin.repository
    if url.startswith("-") or not url.isprintable():
        raise UserError(f"repository {url!r} is not a URL or path")
    return url


def create_base(pin: Pin, source: str, cache: Path, dest: Path) -> str:
    """Make ``dest`` a git repo whose HEAD is the pinned release; return the commit."""
    if check_source(source) == "git":
        return clone_tag(pin, git_url(pin), cache, dest)
    wheel = fetch_pinned_wheel(pin, cache)
    commit = init_from_wheel(wheel.path, wheel.sha256, pin.version, pin.released, dest)
    actual = Git(dest).rev(f"{commit}:{pin.target}")
    if actual != pin.target_blob:
        raise UserError(
            f"{pin.target} in {wheel.path.name} is blob {actual or '(missing)'}, expected"
            f" {pin.target_blob} (base.toml): the pin's wheel_sha256 and target_blob disagree"
        )
    return commit


def init_from_wheel(wheel: Path, sha256: str, version: str, released: dt.date, dest: Path) -> str:
    """Unpack ``sglang/`` of ``wheel`` as ``dest/python/sglang`` and commit it.

    The commit has fixed names, emails, dates and message, so its id is the
    same on every machine for the same wheel.
    """
    return commit_wheel(init_repo(dest), wheel, sha256, version, released)


def commit_wheel(git: Git, wheel: Path, sha256: str, version: str, released: dt.date) -> str:
    """Replace ``python/`` of the repo by the wheel's package and commit that.

    The parent is HEAD when there is one; return the new commit.
    """
    shutil.rmtree(git.cwd / "python", ignore_errors=True)
    extract_package(wheel, "sglang", git.cwd / "python")
    git.run("add", "--all", "--force", ".")
    tree = git.out("write-tree")
    message = (
        f"SGLang {version} (upstream release)\n\n"
        f"Unpacked from the wheel {wheel.name}\nsha256 {sha256}\n"
    )
    parent = git.rev("HEAD")
    options = ["-p", parent] if parent else []
    env = _release_env(released)
    commit = git.out("commit-tree", tree, *options, "-m", message, env=env)
    git.run("update-ref", "HEAD", commit)
    return commit


def init_repo(dest: Path) -> Git:
    """An empty repository on branch ``patched`` that never converts files."""
    dest.mkdir(parents=True, exist_ok=True)
    git = Git(dest)
    git.run("init", "-q", "--template=", "--initial-branch=patched", ".")
    info = dest / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(_NO_CONVERSION)
    return git


def _release_env(released: dt.date) -> dict[str, str]:
    """Author and committer of a release commit: fixed, dated at midnight UTC."""
    midnight = dt.datetime.combine(released, dt.time(), dt.UTC)
    date = f"{int(midnight.timestamp())} +0000"
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"] = RELEASE_NAME
        env[f"GIT_{role}_EMAIL"] = RELEASE_EMAIL
    return env


def clone_tag(pin: Pin, url: str, cache: Path, dest: Path) -> str:
    """Clone ``pin.tag`` of ``url`` (through a cached bare clone) into ``dest``."""
    mirror = _cached_mirror(pin, url, cache)
    Git(dest.parent).run("clone", "-q", "--branch", pin.tag, "--", str(mirror), str(dest))
    git = Git(dest)
    git.run("checkout", "-q", "-B", "patched")
    git.run("remote", "set-url", "origin", url)
    (dest / ".git" / "info").mkdir(exist_ok=True)
    (dest / ".git" / "info" / "attributes").write_text(_NO_CONVERSION)
    return git.out("rev-parse", "HEAD")


def _cached_mirror(pin: Pin, url: str, cache: Path) -> Path:
    """A verified bare shallow clone of the tag, kept in the cache."""
    key = hashlib.sha1(url.encode()).hexdigest()[:12]
    mirror = cache / f"git-{key}-{pin.tag}.git"
    if not mirror.exists():
        scratch = mirror.with_name(mirror.name + ".partial")
        shutil.rmtree(scratch, ignore_errors=True)
        cache.mkdir(parents=True, exist_ok=True)
        clone = ["clone", "-q", "--bare", "--depth", "1", "--branch", pin.tag, "--", url]
        Git(cache, isolated=False).run(*clone, str(scratch))
        scratch.rename(mirror)
    _check_target_blob(pin, Git(mirror), mirror)
    return mirror


def _check_target_blob(pin: Pin, git: Git, where: Path) -> None:
    """Refuse a clone whose target file is not the pinned blob (it is moved aside)."""
    actual = git.rev(f"refs/tags/{pin.tag}^{{commit}}:{pin.target}")
    if actual != pin.target_blob:
        aside = where.with_name(f"{where.name}.bad-{(actual or 'missing')[:12]}")
        where.replace(aside)
        raise UserError(
            f"{pin.target} at tag {pin.tag} of the clone is blob {actual or '(missing)'},"
            f" expected {pin.target_blob} (base.toml); moved the clone aside to {aside}"
        )
