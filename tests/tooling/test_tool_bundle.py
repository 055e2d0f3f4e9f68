"""``sglpatch bundle``: reproducible trees, manifest, and the offline installer."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from sgltest import PIN, SCRIPTS, TARGET, Workspace, one_error_line, run

from sglpatch.bundle import assemble, write_manifest
from sglpatch.digest import sha256_file
from sglpatch.layout import Layout
from sglpatch.pipfetch import Wheel

NEW_FILE = "sglang/srt/layers/attention/sglpatch_note.py"


def _demo_wheel(directory: Path) -> Wheel:
    """A minimal pure-Python wheel that pip installs offline."""
    path = directory / "demo_pkg-1.0-py3-none-any.whl"
    info = "demo_pkg-1.0.dist-info"
    files = {
        "demo_pkg/__init__.py": "VALUE = 7\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), text)
    return Wheel("demo-pkg==1.0", path, sha256_file(path), "index")


@pytest.fixture(scope="module")
def built(tmp_path_factory, pinned_wheel: Path, canonical_patches: Path) -> Layout:
    """A build tree with the series applied and its bundle, made once."""
    space = Workspace.create(tmp_path_factory.mktemp("bundle"), pinned_wheel)
    space.use_patches(canonical_patches)
    space.ok("apply")
    layout = Layout.create(space.build_root, space.patches, base=space.base)
    assemble(layout, PIN, [_demo_wheel(space.root)])
    return layout


@pytest.fixture
def bundle(built: Layout, tmp_path: Path) -> Path:
    """A private copy of the bundle, free to damage."""
    return Path(shutil.copytree(built.bundle, tmp_path / "bundle"))


def _install(bundle: Path, host: Path, root: bool = True) -> subprocess.CompletedProcess:
    """Run install.sh in ``host``, a repository root (its scripts/) unless not ``root``."""
    host.mkdir(exist_ok=True)
    if root and not (host / "scripts").exists():
        (host / "scripts").symlink_to(SCRIPTS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHON"] = sys.executable
    return run(["bash", str(bundle / "install.sh"), "site"], cwd=host, env=env)


def _refused(proc: subprocess.CompletedProcess, host: Path) -> str:
    """The one ``install.sh: error:`` line of a refusal that installed nothing."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("install.sh: error: "), proc.stderr
    assert not (host / "site").exists() and not (host / "build").exists()
    return errors[0]


def test_bundle_layout_and_determinism(built: Layout):
    bundle = built.bundle
    manifest = (bundle / "MANIFEST.sha256").read_text()
    names = [line.split("  ", 1)[1] for line in manifest.splitlines()]
    assert names == [
        "BASE",
        "install.sh",
        "trees/base.tar.gz",
        "trees/patched.deleted",
        "trees/patched.tar.gz",
        "wheels/demo_pkg-1.0-py3-none-any.whl",
    ]
    with tarfile.open(bundle / "trees" / "patched.tar.gz") as archive:
        members = archive.getmembers()
    assert all(m.name.startswith("sglang") and m.uid == 0 and m.uname == "" for m in members)
    # the patched tree ships as the series' files over the base tree
    assert {m.name for m in members if m.isfile()} == {NEW_FILE, TARGET.removeprefix("python/")}
    assert (bundle / "trees" / "patched.deleted").read_text() == ""
    assemble(built, PIN, [_demo_wheel(built.build.parent)])
    assert (bundle / "MANIFEST.sha256").read_text() == manifest


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
    assert _install(bundle, host).returncode == 0  # idempotent


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
    with tarfile.open(fileobj=evil, mode="w:gz") as archive:
        info = tarfile.TarInfo("../../escape.txt")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    (bundle / "trees" / "base.tar.gz").write_bytes(evil.getvalue())
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
    path = bundle / "trees" / "patched.tar.gz"
    with tarfile.open(path) as archive:
        members = [(m, archive.extractfile(m).read() if m.isfile() else None) for m in archive]
    with tarfile.open(path, "w:gz") as archive:
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
    assert "unsafe entry 'sglang/../../x' in patched.tar.gz" in error


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
