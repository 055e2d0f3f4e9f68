"""The offline bundle for air-gapped GPU hosts: wheels, both trees, installer."""

from __future__ import annotations

import datetime as dt
import io
import lzma
import re
import shutil
import tarfile
from pathlib import Path

from sglpatch import scratch
from sglpatch.console import note
from sglpatch.digest import sha256_file
from sglpatch.errors import UserError
from sglpatch.gitcmd import Git
from sglpatch.layout import Layout
from sglpatch.pin import Pin, load_pin
from sglpatch.pipfetch import Wheel, WheelTarget, fetch
from sglpatch.queue import BRANCH, require_current
from sglpatch.unbundle import BASE_FILE, BASE_LAYER, DELETED_FILE, PATCHED_LAYER

# A GPU host without network takes 64 MiB a copy: the bundle and the repository
# (about 7 MiB, ci/results growing) travel together.
LIMIT_BYTES = 52 * 1024 * 1024
GPU_TARGET = WheelTarget(
    "3.12",
    (
        *(f"manylinux_2_{n}_x86_64" for n in range(28, 16, -1)),
        "manylinux2014_x86_64",
        "manylinux1_x86_64",
    ),
)
INSTALLER = Path(__file__).with_name("install_bundle.sh")
# The patched tree is shipped as the files the series changes over the base tree
# (a base's whole package is large: v0.5.23's is 23 MB as tar.xz, 35 MB as
# tar.gz), wherever they are in the tree, and DELETED_FILE lists, one a line,
# the files it deletes; unbundle.py unpacks them on the GPU host.
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")


def read_requirements(path: Path) -> list[str]:
    """Pinned ``name==version`` lines of ``path``; refuse anything else."""
    if not path.exists():
        raise UserError(f"{path} not found: list the GPU wheels there, one name==version a line")
    found: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = _PINNED.match(text)
        if not match:
            raise UserError(f"{path}:{number}: {text!r} is not pinned as name==version")
        key = re.sub(r"[-_.]+", "-", match[1]).lower()
        if key in found:
            raise UserError(f"{path}:{number}: {match[1]} is listed twice")
        found[key] = text
    return list(found.values())


def make_bundle(layout: Layout) -> Path:
    """Write build/<base>/bundle from the base's build tree and ci/requirements-gpu.txt."""
    require_current(layout)
    pin = load_pin(layout.pin_file)
    requirements = read_requirements(layout.root / "ci" / "requirements-gpu.txt")
    wheels = fetch(requirements, GPU_TARGET, layout.cache / "cp312")
    return assemble(layout, pin, wheels)


def assemble(layout: Layout, pin: Pin, wheels: list[Wheel]) -> Path:
    """Lay out the bundle in a scratch dir, check its size, then swap it in."""
    work = scratch.new_dir(layout, scratch.NEW_BUNDLE)
    try:
        _fill(work, layout, pin, wheels)
        size = sum(p.stat().st_size for p in work.rglob("*") if p.is_file())
        if size > LIMIT_BYTES:
            raise UserError(f"bundle would be {_mib(size)}, over the {_mib(LIMIT_BYTES)} limit")
        scratch.discard(layout, layout.bundle)
        work.chmod(0o755)
        work.rename(layout.bundle)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    note(
        f"{layout.bundle}: {len(wheels)} wheels + the 2 trees of {layout.name},"
        f" {_mib(size)} ({size} bytes)"
    )
    return layout.bundle


def _fill(root: Path, layout: Layout, pin: Pin, wheels: list[Wheel]) -> None:
    """Write wheels/, trees/ (the base tree; the series' files over it and what it
    deletes), BASE, install.sh and MANIFEST.sha256 into ``root``."""
    (root / "wheels").mkdir()
    for wheel in wheels:
        shutil.copyfile(wheel.path, root / "wheels" / wheel.path.name)
    (root / "trees").mkdir()
    git = Git(layout.sglang)
    mtime = int(dt.datetime.combine(pin.released, dt.time(), dt.UTC).timestamp())
    trees = root / "trees"
    write_tree_tarball(git, pin.base_tag, trees / BASE_LAYER, mtime)
    changed, deleted = series_changes(git, pin.base_tag)
    patched = f"refs/heads/{BRANCH}"
    write_tree_tarball(git, patched, trees / PATCHED_LAYER, mtime, changed)
    (trees / DELETED_FILE).write_text("".join(f"{path}\n" for path in deleted))
    (root / BASE_FILE).write_text(f"{layout.name}\n")  # where install.sh unpacks the trees
    shutil.copyfile(INSTALLER, root / "install.sh")
    (root / "install.sh").chmod(0o755)
    write_manifest(root)


def series_changes(git: Git, base_tag: str) -> tuple[list[str], list[str]]:
    """The files the series adds or changes, wherever they are (a test it adds
    under test/ too), and those it deletes."""

    def names(kind: str) -> list[str]:
        out = git.run(
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            f"--diff-filter={kind}",
            base_tag,
            f"refs/heads/{BRANCH}",
        ).stdout
        return [name for name in out.decode("utf-8").split("\0") if name]

    return names("d"), names("D")


def write_tree_tarball(
    git: Git, rev: str, out: Path, mtime: int, only: list[str] | None = None
) -> None:
    """``python/sglang`` of ``rev`` (or just the files ``only`` names), paths
    relative to the tree's root, in a reproducible tar.xz (xz, not gzip: the
    whole bundle and the repository must fit a GPU host's 64 MiB upload)."""
    paths = ["python/sglang"] if only is None else only
    tar = git.run("archive", "--format=tar", rev, *paths).stdout if paths else _empty_tar()
    stream = io.BytesIO(tar)
    with tarfile.open(fileobj=stream, mode="r:") as source:
        members = [(m, source.extractfile(m) if m.isfile() else None) for m in source]
        with lzma.open(out, "wb", preset=6) as packed:
            with tarfile.open(fileobj=packed, mode="w:", format=tarfile.PAX_FORMAT) as tar:
                for member, data in members:
                    tar.addfile(_normalised(member, mtime), data)


def _empty_tar() -> bytes:
    """The bytes of a tar archive with no entries."""
    buffer = io.BytesIO()
    tarfile.open(fileobj=buffer, mode="w:").close()
    return buffer.getvalue()


def _normalised(member: tarfile.TarInfo, mtime: int) -> tarfile.TarInfo:
    """A copy of ``member`` without owner, time or mode details; links refused."""
    if not (member.isfile() or member.isdir()):
        raise UserError(f"{member.name}: links and special files cannot be bundled")
    info = tarfile.TarInfo(member.name.rstrip("/"))
    info.type, info.size, info.mtime = member.type, member.size, mtime
    info.mode = 0o755 if member.isdir() or member.mode & 0o111 else 0o644
    return info


def write_manifest(root: Path) -> None:
    """MANIFEST.sha256: ``sha256  relative/path`` for every other file, sorted."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "MANIFEST.sha256")
    lines = [f"{sha256_file(p)}  {p.relative_to(root).as_posix()}\n" for p in files]
    (root / "MANIFEST.sha256").write_text("".join(lines))


def _mib(size: int) -> str:
    """A size in MiB with one decimal."""
    return f"{size / 1024 / 1024:.1f} MiB"
