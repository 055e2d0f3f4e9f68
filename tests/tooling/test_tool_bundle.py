"""``sglpatch bundle``: reproducible trees, manifest, and the offline installer."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from sgltest import (
    PIN,
    SCRIPTS,
    TARGET,
    Workspace,
    commit_all,
    demo_wheel,
    edit_target,
    git,
    one_error_line,
    run,
)

from sglpatch import bundle as bundle_module
from sglpatch import unbundle
from sglpatch.bundle import assemble, write_manifest
from sglpatch.errors import UserError
from sglpatch.layout import Layout

NEW_FILE = "sglang/srt/layers/attention/sglpatch_note.py"


@pytest.fixture(scope="module")
def built(tmp_path_factory, pinned_wheel: Path, canonical_patches: Path) -> Layout:
    """A build tree with the series applied and its bundle, made once."""
    space = Workspace.create(tmp_path_factory.mktemp("bundle"), pinned_wheel)
    space.use_patches(canonical_patches)
    space.ok("apply")
    layout = Layout.create(space.build_root, space.patches, base=space.base)
    assemble(layout, PIN, [demo_wheel(space.root)])
    return layout


@pytest.fixture
def bundle(built: Layout, tmp_path: Path) -> Path:
    """A private copy of the bundle, free to damage."""
    return Path(shutil.copytree(built.bundle, tmp_path / "bundle"))


def _install(
    bundle: Path,
    host: Path,
    root: bool = True,
    build: Path | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess:
    """Run install.sh in ``host``, a repository root (its scripts/) unless not
    ``root``, into ``build`` (BUILD; default: host/build), with ``python``."""
    host.mkdir(exist_ok=True)
    if root and not (host / "scripts").exists():
        (host / "scripts").symlink_to(SCRIPTS)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BUILD")}
    env["PYTHON"] = python
    if build is not None:
        env["BUILD"] = str(build)
    return run(["bash", str(bundle / "install.sh"), "site"], cwd=host, env=env)


def _refused(proc: subprocess.CompletedProcess, host: Path, fresh: bool = True) -> str:
    """The one ``install.sh: error:`` line of a refusal that installed nothing
    (no wheels; on a ``fresh`` host, no build/ either)."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("install.sh: error: "), proc.stderr
    assert not (host / "site").exists()
    assert not fresh or not (host / "build").exists()
    return errors[0]


def test_bundle_layout_and_determinism(built: Layout):
    bundle = built.bundle
    manifest = (bundle / "MANIFEST.sha256").read_text()
    names = [line.split("  ", 1)[1] for line in manifest.splitlines()]
    assert names == [
        "BASE",
        "install.sh",
        "trees/base.tar.xz",
        "trees/patched.deleted",
        "trees/patched.tar.xz",
        "wheels/demo_pkg-1.0-py3-none-any.whl",
    ]
    with tarfile.open(bundle / "trees" / "patched.tar.xz") as archive:
        members = archive.getmembers()
    assert all(m.name.startswith("python") and m.uid == 0 and m.uname == "" for m in members)
    # the patched tree ships as the series' files over the base tree
    assert {m.name for m in members if m.isfile()} == {f"python/{NEW_FILE}", TARGET}
    assert (bundle / "trees" / "patched.deleted").read_text() == ""
    for layer in ("base.tar.xz", "patched.tar.xz"):
        assert (bundle / "trees" / layer).read_bytes()[:6] == b"\xfd7zXZ\x00"
    assemble(built, PIN, [demo_wheel(built.build.parent)])
    assert (bundle / "MANIFEST.sha256").read_text() == manifest


@pytest.mark.bad_input
def test_a_bundle_over_the_limit_is_refused_and_the_last_one_kept(
    built: Layout, monkeypatch: pytest.MonkeyPatch
):
    """Past LIMIT_BYTES (what a GPU host takes a copy, less the repository) no
    bundle is written, and the last one stays whole."""
    manifest = (built.bundle / "MANIFEST.sha256").read_text()
    monkeypatch.setattr(bundle_module, "LIMIT_BYTES", 1024)
    with pytest.raises(UserError, match=r"bundle would be .* MiB, over the 0.0 MiB limit"):
        assemble(built, PIN, [demo_wheel(built.build.parent)])
    assert (built.bundle / "MANIFEST.sha256").read_text() == manifest
    assert sorted(p.name for p in built.bundle.parent.iterdir() if "bundle" in p.name) == ["bundle"]


def test_install_sh_unpacks_trees_and_wheels(built: Layout, bundle: Path, tmp_path: Path):
    host = tmp_path / "host"
    proc = _install(bundle, host)
    assert proc.returncode == 0, proc.stderr
    # where the bundle's base (its BASE file) has its trees: build/<base>/ (Layout)
    assert (bundle / "BASE").read_text() == f"{built.name}\n"
    base = host / "build" / built.name / "base/python"
    patched = host / "build" / built.name / "sglang/python"
    source = built.build / "base" / TARGET
    assert (base / TARGET.removeprefix("python/")).read_bytes() == source.read_bytes()
    assert (patched / NEW_FILE).is_file() and not (base / NEW_FILE).exists()
    patched_target = (built.sglang / TARGET).read_bytes()
    assert (patched / TARGET.removeprefix("python/")).read_bytes() == patched_target
    assert (patched / "sglang/__init__.py").read_bytes() == (
        base / "sglang/__init__.py"
    ).read_bytes()
    assert (host / "site/demo_pkg/__init__.py").read_text() == "VALUE = 7\n"
    again = _install(bundle, host)  # idempotent
    assert again.returncode == 0 and again.stdout.count("left as is") == 2, again.stdout


@pytest.mark.bad_input
def test_install_sh_refuses_a_damaged_bundle(bundle: Path, tmp_path: Path):
    wheel = bundle / "wheels" / "demo_pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"x")
    (bundle / "wheels" / "extra.whl").write_bytes(b"")
    proc = _install(bundle, tmp_path / "host")
    assert proc.returncode != 0
    assert "checksum mismatch: wheels/demo_pkg" in proc.stderr
    assert "not in the manifest: wheels/extra.whl" in proc.stderr
    assert not (tmp_path / "host" / "build").exists()


@pytest.mark.bad_input
def test_install_sh_refuses_unsafe_tar_entries(bundle: Path, tmp_path: Path):
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w:xz") as archive:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    (bundle / "trees" / "base.tar.xz").write_bytes(evil.getvalue())
    write_manifest(bundle)
    proc = _install(bundle, tmp_path / "host")
    assert "unsafe entry '../../escape.txt'" in _refused(proc, tmp_path / "host")
    assert not list(tmp_path.rglob("escape.txt"))


@pytest.mark.bad_input
def test_install_sh_refuses_an_unsafe_deletion(bundle: Path, tmp_path: Path):
    victim = tmp_path / "keep.txt"
    victim.write_text("kept")
    (bundle / "trees" / "patched.deleted").write_text(f"python/sglang/../../../{victim}\n")
    write_manifest(bundle)
    proc = _install(bundle, tmp_path / "host")
    assert proc.returncode != 0 and "unsafe entry" in proc.stderr
    assert victim.read_text() == "kept"


def test_install_sh_removes_what_the_series_deletes(bundle: Path, tmp_path: Path):
    (bundle / "trees" / "patched.deleted").write_text("python/sglang/__init__.py\n")
    write_manifest(bundle)
    assert _install(bundle, tmp_path / "host").returncode == 0
    trees = tmp_path / "host" / "build" / "v0.5.12"
    assert not (trees / "sglang/python/sglang/__init__.py").exists()
    assert (trees / "base/python/sglang/__init__.py").is_file()


@pytest.mark.bad_input
def test_bundle_needs_a_build_tree(workspace: Workspace):
    assert "run `make apply` first" in one_error_line(workspace.tool("bundle"))


def _tar_with(bundle: Path, name: str) -> None:
    """Add an entry ``name`` to the bundle's patched tree (and re-sign the manifest)."""
    path = bundle / "trees" / "patched.tar.xz"
    with tarfile.open(path) as archive:
        members = [(m, archive.extractfile(m).read() if m.isfile() else None) for m in archive]
    with tarfile.open(path, "w:xz") as archive:
        for member, data in members:
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
        info = tarfile.TarInfo(name)
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    write_manifest(bundle)


@pytest.mark.bad_input
def test_install_sh_refuses_a_dot_dot_entry_under_sglang_before_installing(
    bundle: Path, tmp_path: Path
):
    """sglang/../../x passed the old check, and tarfile stopped it only after the
    wheels were installed and the base tree unpacked."""
    _tar_with(bundle, "sglang/../../x")
    error = _refused(_install(bundle, tmp_path / "host"), tmp_path / "host")
    assert "unsafe entry 'sglang/../../x' in patched.tar.xz" in error


@pytest.mark.bad_input
def test_install_sh_outside_the_repository_root(bundle: Path, tmp_path: Path):
    host = tmp_path / "host"
    error = _refused(_install(bundle, host, root=False), host)
    assert "run it from the repository root" in error and str(host) in error


@pytest.mark.bad_input
def test_install_sh_without_a_manifest(bundle: Path, tmp_path: Path):
    (bundle / "MANIFEST.sha256").unlink()
    error = _refused(_install(bundle, tmp_path / "host"), tmp_path / "host")
    assert "has no MANIFEST.sha256" in error


@pytest.mark.bad_input
@pytest.mark.parametrize("name", ["../../x", "v9.9.9"], ids=["escaping", "unknown"])
def test_install_sh_refuses_a_bad_base(bundle: Path, tmp_path: Path, name: str):
    (bundle / "BASE").write_text(f"{name}\n")
    write_manifest(bundle)
    error = _refused(_install(bundle, tmp_path / "host"), tmp_path / "host")
    assert f"the bundle's BASE {name!r}" in error


@pytest.mark.bad_input
@pytest.mark.parametrize("part", ["BASE", "trees/patched.deleted", "trees/base.tar.xz"])
def test_install_sh_refuses_a_bundle_missing_a_part(bundle: Path, tmp_path: Path, part: str):
    """BASE deleted and the manifest re-made: a traceback; now one line."""
    (bundle / part).unlink()
    write_manifest(bundle)
    error = _refused(_install(bundle, tmp_path / "host"), tmp_path / "host")
    assert f"{bundle} lacks {part}: it is not a whole bundle" in error


def _gzip_tar(path: Path) -> bytes:
    """``path``'s tar (an xz layer) as a gzip tar."""
    packed = io.BytesIO()
    with tarfile.open(path) as source, tarfile.open(fileobj=packed, mode="w:gz") as out:
        for member in source:
            out.addfile(member, source.extractfile(member) if member.isfile() else None)
    return packed.getvalue()


@pytest.mark.bad_input
@pytest.mark.parametrize("damage", ["a byte flipped", "cut short", "gzip"])
def test_install_sh_refuses_a_damaged_tree_layer(bundle: Path, tmp_path: Path, damage: str):
    """A layer damaged and the manifest re-made (a bundle made badly): one line,
    also where only xz's check at the stream's end sees it (cut short)."""
    layer = bundle / "trees" / "base.tar.xz"
    data = bytearray(layer.read_bytes())
    if damage == "a byte flipped":
        data[len(data) // 2] ^= 0xFF
    elif damage == "cut short":
        del data[-10:]
    else:
        data = bytearray(_gzip_tar(layer))
    layer.write_bytes(bytes(data))
    write_manifest(bundle)
    error = _refused(_install(bundle, tmp_path / "host"), tmp_path / "host")
    assert "trees/base.tar.xz is damaged or not an xz tar archive" in error


@pytest.mark.bad_input
def test_install_sh_refuses_a_python_without_lzma(bundle: Path, tmp_path: Path):
    """A Python built without liblzma cannot read the trees: said, not blamed on
    the bundle."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\n\nsys.modules['lzma'] = None\n")
    python = tmp_path / "python-without-lzma"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={hide} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    error = _refused(_install(bundle, tmp_path / "host", python=str(python)), tmp_path / "host")
    assert "has no lzma module, which the bundle's xz trees need" in error


@pytest.fixture
def applied(workspace: Workspace, canonical_patches: Path) -> Workspace:
    """A make-apply tree whose series also adds a file outside python/ (a test
    under test/registered, as v0.5.23's 0001), and its bundle."""
    space = workspace
    space.use_patches(canonical_patches)
    space.ok("apply")
    registered = space.tree / OUTSIDE
    registered.parent.mkdir(parents=True)
    registered.write_text("def test_it():\n    assert True\n")
    commit_all(space.tree, "Dev <dev@example.com>", "[test] Add a test", "2026-06-04T00:00Z")
    space.ok("export")
    assert "up to date" in space.ok("apply").stderr
    layout = Layout.create(space.build_root, space.patches, base=space.base)
    assemble(layout, PIN, [demo_wheel(space.root)])
    return space


OUTSIDE = "test/registered/attention/test_sglpatch_note.py"


def test_the_bundle_carries_every_file_the_series_changes(applied: Workspace, tmp_path: Path):
    """A file the series adds outside python/ never reached the GPU host (v0.5.23's
    registered test: all 16 cases of test_registered23.py errored there)."""
    host = tmp_path / "host"
    assert _install(applied.build / "bundle", host).returncode == 0
    patched = host / "build" / applied.base / "sglang"
    assert (patched / OUTSIDE).read_bytes() == (applied.tree / OUTSIDE).read_bytes()
    assert not (host / "build" / applied.base / "base" / "test").exists()


@pytest.mark.bad_input
def test_install_sh_keeps_work_in_a_make_apply_tree(applied: Workspace, tmp_path: Path):
    """install.sh over the trees of `make apply` (a copied repository carries them):
    it replaced python/ with no word, and edits in build/<base>/sglang and base
    and an untracked file were gone. A tree that is the bundle's is left as it
    is; one that holds anything else is refused, naming it."""
    bundle, host = applied.build / "bundle", tmp_path / "host"
    tree, base = applied.tree, applied.build / "base"
    proc = _install(bundle, host, build=applied.build_root)
    assert proc.returncode == 0 and proc.stdout.count("left as is") == 2, proc.stdout
    assert git(tree, "status", "--porcelain") == "" and git(base, "status", "--porcelain") == ""
    shutil.rmtree(host / "site")
    edit_target(tree, "import logging\n", "import logging  # mine\n")
    version = tree / "python/sglang/version.py"
    version.write_text(version.read_text() + "# mine\n")
    (tree / "python/sglang/mine.py").write_text("MINE = 1\n")
    (tree / OUTSIDE).write_text("# my test\n")
    edit_target(base, "import logging\n", "import logging  # mine in base\n")
    before = {path: path.read_bytes() for path in (tree / TARGET, version, tree / OUTSIDE)}
    error = _refused(_install(bundle, host, build=applied.build_root), host, fresh=False)
    assert f"{tree}: python/sglang/mine.py (not from the bundle)" in error, error
    for name in (TARGET, "python/sglang/version.py", OUTSIDE):
        assert f"{name} (changed)" in error
    assert f"{base}: {TARGET} (changed)" in error
    assert {path: path.read_bytes() for path in before} == before
    assert (tree / "python/sglang/mine.py").read_text() == "MINE = 1\n"
    assert "# mine in base" in (base / TARGET).read_text()
    assert not (tree / unbundle.RECORD).exists()


@pytest.mark.bad_input
def test_install_sh_keeps_work_in_its_own_trees(bundle: Path, tmp_path: Path):
    """On a bundle host: an edit or a new file in the trees an earlier install
    unpacked is refused; what that install put there, unchanged, a newer bundle
    replaces."""
    host = tmp_path / "host"
    assert _install(bundle, host).returncode == 0
    shutil.rmtree(host / "site")
    patched = host / "build" / "v0.5.12" / "sglang"
    target = patched / TARGET
    original = target.read_bytes()
    target.write_bytes(original + b"# mine\n")
    (patched / "python/sglang/srt/mine.py").write_text("MINE = 1\n")
    error = _refused(_install(bundle, host), host, fresh=False)
    assert f"{patched}: {TARGET} (changed), python/sglang/srt/mine.py (not from the bundle)" in (
        error
    )
    assert target.read_bytes() == original + b"# mine\n"
    target.write_bytes(original)
    (patched / "python/sglang/srt/mine.py").unlink()
    # a newer bundle: the series' target changed
    newer = tmp_path / "newer"
    shutil.copytree(bundle, newer)
    path = newer / "trees" / "patched.tar.xz"
    with tarfile.open(path) as archive:
        members = [(m, archive.extractfile(m).read() if m.isfile() else None) for m in archive]
    with tarfile.open(path, "w:xz") as archive:
        for member, data in members:
            if member.name == TARGET:
                data += b"# the newer series\n"
                member.size = len(data)
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
    write_manifest(newer)
    proc = _install(newer, host)
    assert proc.returncode == 0, proc.stderr
    assert f"unpacked the patched tree into {patched}" in proc.stdout
    assert target.read_bytes() == original + b"# the newer series\n"
