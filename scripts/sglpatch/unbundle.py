"""The trees of an offline bundle, on the GPU host: checked, then unpacked.

``install.sh`` (the bundle's installer) calls ``check`` before it installs
anything and ``unpack`` last. A bundle holds ``trees/base.tar.xz`` (the base
tree: ``python/sglang/...``), ``trees/patched.tar.xz`` (every file the series
adds or changes, wherever it is in the tree: ``python/...``, ``test/...``) and
``trees/patched.deleted`` (the files it deletes, one a line); paths are
relative to a tree's root, ``build/<base>/base`` and ``build/<base>/sglang``
(``Layout``). The patched tree is the base tree with the series' files over it.

An install never loses work: a tree that holds anything the bundle did not put
there (an edit, a file of yours, whether the tree came from ``make apply`` or an
earlier install) is refused, naming it. What an install put there is recorded
in the tree (``RECORD``), so that a later bundle replaces it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sglpatch.errors import UserError
from sglpatch.layout import Layout

try:
    import lzma
except ImportError:  # a Python built without liblzma
    lzma = None

BASE_FILE = "BASE"
DELETED_FILE = "patched.deleted"
TREES = "trees"
# The trees' layers, xz-compressed tar archives.
BASE_LAYER, PATCHED_LAYER = "base.tar.xz", "patched.tar.xz"
# The parts of a bundle install.sh reads, besides the wheels.
PARTS = (BASE_FILE, f"{TREES}/{BASE_LAYER}", f"{TREES}/{PATCHED_LAYER}", f"{TREES}/{DELETED_FILE}")
# In a tree's root: what the last install put there, as ``sha256  path`` lines.
RECORD = ".sglpatch-bundle.sha256"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Files of Python's own, made from the tree's code: never anyone's work.
_DISPOSABLE_DIRS = ("__pycache__",)
_DISPOSABLE_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class Tree:
    """One tree to unpack: its name, its root, its layers and the files it will
    hold (path -> sha256)."""

    name: str
    root: Path
    layers: tuple[str, ...]
    files: dict[str, str]

    @property
    def tops(self) -> list[str]:
        """The folders (or files) at the tree's root that the bundle fills: an
        install replaces them as a whole."""
        return sorted({path.split("/", 1)[0] for path in self.files})


def check(bundle: Path, build: str) -> list[Tree]:
    """Every check of the bundle's trees and of where they go; the trees to unpack."""
    missing = [part for part in PARTS if not (bundle / part).is_file()]
    if missing:
        raise UserError(
            f"{bundle} lacks {', '.join(missing)}: it is not a whole bundle made by"
            " `make bundle`; make it again: nothing was installed"
        )
    if lzma is None:
        raise UserError(
            f"{sys.executable} has no lzma module, which the bundle's xz trees need: run"
            " install.sh with PYTHON=<a python3 where `import lzma` works>; nothing was"
            " installed"
        )
    layout = _layout(bundle, build)
    deleted = _deleted(bundle)
    trees = [
        _tree(bundle, "base", layout.base, (BASE_LAYER,), []),
        _tree(bundle, "patched", layout.sglang, (BASE_LAYER, PATCHED_LAYER), deleted),
    ]
    found = [f"{tree.root}: {listed}" for tree in trees if (listed := _foreign_work(tree))]
    if found:
        folders = sorted({f"{top}/" for tree in trees for top in tree.tops})
        raise UserError(
            f"the trees there hold what the bundle did not put there: {'; '.join(found)};"
            f" an install replaces their {', '.join(folders)}: move that work out (or delete"
            " the tree), then install again; nothing was installed"
        )
    return trees


def _layout(bundle: Path, build: str) -> Layout:
    """Where the bundle's base (its BASE file) has its trees."""
    name = (bundle / BASE_FILE).read_text(errors="replace").strip()
    if not _NAME_RE.fullmatch(name) or ".." in name:
        raise UserError(
            f"the bundle's BASE {name!r} is not the name of a base of patches/bases.toml"
        )
    try:
        return Layout.create(build, base=name)
    except (UserError, OSError, ValueError) as exc:
        raise UserError(f"the bundle's BASE {name!r}: {' '.join(str(exc).split())}") from None


def unsafe(name: str) -> bool:
    """True for a path that is not a plain relative path inside a tree (absolute,
    ``..``, ``.git``, the install's record, a backslash)."""
    parts = name.removesuffix("/").split("/")
    return (
        name.startswith("/")
        or "\\" in name
        or any(part in ("", ".", "..", ".git") for part in parts)
        or parts == [RECORD]
    )


def _deleted(bundle: Path) -> list[str]:
    """The files the series deletes, each checked."""
    names = (bundle / TREES / DELETED_FILE).read_text(errors="replace").splitlines()
    for name in names:
        if unsafe(name):
            raise UserError(f"unsafe entry {name!r} in {DELETED_FILE}: nothing was installed")
    return names


def _tree(bundle: Path, name: str, root: Path, layers: tuple[str, ...], deleted: list[str]) -> Tree:
    """The files of one tree, from its layers (each entry checked), less ``deleted``."""
    files: dict[str, str] = {}
    for layer in layers:
        try:
            with tarfile.open(bundle / TREES / layer, "r:xz") as archive:
                for member in archive:
                    if unsafe(member.name) or not (member.isfile() or member.isdir()):
                        raise UserError(
                            f"unsafe entry {member.name!r} in {layer}: nothing was installed"
                        )
                    if member.isfile():
                        data = archive.extractfile(member).read()
                        files[member.name] = hashlib.sha256(data).hexdigest()
                # The rest of the stream too: xz checks its data at the end.
                while archive.fileobj.read(1 << 20):
                    pass
        except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as exc:
            raise UserError(
                f"{TREES}/{layer} is damaged or not an xz tar archive ({exc}): make the"
                " bundle again; nothing was installed"
            ) from None
    for path in deleted:
        files.pop(path, None)
    return Tree(name, root, layers, files)


def _foreign_work(tree: Tree) -> str:
    """What in the tree there the bundle did not put there ('' when nothing): a
    file that is neither what this bundle unpacks nor, unchanged, what an earlier
    install recorded (a tree with a ``.git``, ``make apply``'s, has no such
    record), or a link, in the folders the install replaces."""
    if not tree.root.exists():
        return ""
    recorded = {} if (tree.root / ".git").exists() else _read_record(tree.root)
    found = []
    for top in tree.tops:
        for name, kind in _files_under(tree.root, top):
            if kind != "file":
                found.append(f"{name} (a {kind})")
                continue
            ours = tree.files.get(name), recorded.get(name)
            if not any(ours):
                found.append(f"{name} (not from the bundle)")
            elif _sha256(tree.root / name) not in ours:
                found.append(f"{name} (changed)")
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return ", ".join(found[:5]) + more


def _files_under(root: Path, top: str) -> list[tuple[str, str]]:
    """(path relative to ``root``, "file", "link" or "special file") under
    ``root/top`` (or ``top`` itself, when it is not a folder), Python's caches
    left out."""
    path = root / top
    if path.is_symlink():
        return [(top, "link")]
    if path.exists() and not path.is_dir():
        return [(top, "file" if path.is_file() else "special file")]
    out = []
    for folder, dirs, files in os.walk(path):
        here = Path(folder)
        for name in list(dirs):
            if (here / name).is_symlink():
                out.append(((here / name).relative_to(root).as_posix(), "link"))
                dirs.remove(name)
            elif name in _DISPOSABLE_DIRS:
                dirs.remove(name)
        for name in files:
            if name.endswith(_DISPOSABLE_SUFFIXES):
                continue
            entry = here / name
            kind = "link" if entry.is_symlink() else "file" if entry.is_file() else "special file"
            out.append((entry.relative_to(root).as_posix(), kind))
    return sorted(out)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_record(root: Path) -> dict[str, str]:
    """What the last install recorded in ``root``: path -> sha256."""
    try:
        text = (root / RECORD).read_text(errors="replace")
    except OSError:
        return {}
    rows = (line.partition("  ") for line in text.splitlines())
    return {name: digest for digest, _, name in rows if name}


def up_to_date(tree: Tree) -> bool:
    """True when the tree there holds exactly the bundle's files."""
    if not tree.root.is_dir():
        return False
    present = {name for top in tree.tops for name, _ in _files_under(tree.root, top)}
    if present != set(tree.files):
        return False
    return all(_sha256(tree.root / name) == digest for name, digest in tree.files.items())


def unpack(bundle: Path, tree: Tree) -> str:
    """Unpack ``tree`` (checked by ``check``) in place of its folders; what was done."""
    if up_to_date(tree):
        return f"{tree.root} already holds the bundle's {tree.name} tree: left as is"
    tree.root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=tree.root))
    try:
        new = staging / "new"
        for layer in tree.layers:
            with tarfile.open(bundle / TREES / layer, "r:xz") as archive:
                archive.extractall(new, filter="data")  # checked above; a second guard
        for name in _deleted(bundle) if tree.name == "patched" else []:
            (new / name).unlink(missing_ok=True)
        old = staging / "old"
        old.mkdir()
        for top in tree.tops:
            if (tree.root / top).exists() or (tree.root / top).is_symlink():
                (tree.root / top).rename(old / top)
            (new / top).rename(tree.root / top)
        if not (tree.root / ".git").exists():
            lines = [f"{digest}  {name}\n" for name, digest in sorted(tree.files.items())]
            (tree.root / RECORD).write_text("".join(lines))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return f"unpacked the {tree.name} tree into {tree.root}"
