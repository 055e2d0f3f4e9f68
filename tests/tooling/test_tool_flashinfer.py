"""`sglpatch flashinfer`: the pinned table, the parts, and their install.sh (offline).

The wheels here are small made-up ones, cut into parts of a few hundred bytes,
so the round trip (pieces -> parts -> install.sh -> pip --target) runs without
an index; the real table is read as it is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sgltest import SCRIPTS

from sglpatch.errors import UserError
from sglpatch.flashinfer_wheels import TABLE, _fill, read_table
from sglpatch.pipfetch import Wheel

ROOT = SCRIPTS.parent


def _wheel(folder: Path, name: str, payload: bytes) -> Wheel:
    """A minimal installable wheel holding module ``name`` (``payload`` as data)."""
    path = folder / f"{name}-1.0-py3-none-any.whl"
    dist = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as wheel:
        wheel.writestr(f"{name}.py", f"DATA = {payload!r}\n")
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        tags = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        wheel.writestr(f"{dist}/WHEEL", tags)
        wheel.writestr(f"{dist}/RECORD", "")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Wheel(f"{name}==1.0", path, digest, "pin")


def _stage(tmp_path: Path) -> tuple[Path, list[int]]:
    """A repository-like folder with the installer's scripts and parts of 700 bytes."""
    repo = tmp_path / "repo"
    shutil.copytree(SCRIPTS / "sglpatch", repo / "scripts" / "sglpatch")
    stage = repo / "build" / "v0.5.23" / "flashinfer"
    stage.mkdir(parents=True)
    wheels = [
        _wheel(tmp_path, "bigpkg", os.urandom(900)),
        _wheel(tmp_path, "smallpkg", b"x"),
    ]
    return stage, _fill(stage, wheels, 700)


def _install(stage: Path, target: Path) -> subprocess.CompletedProcess:
    last = sorted(stage.glob("part*"))[-1]
    env = dict(os.environ, PYTHON=sys.executable, PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
    return subprocess.run(
        ["bash", str(last / "install.sh"), str(target)],
        cwd=stage.parents[2],
        env=env,
        capture_output=True,
        text=True,
    )


def test_the_table_pins_flashinfer_for_v0_5_23():
    rows, part_bytes = read_table(ROOT / TABLE, "v0.5.23")
    assert {r.name for r in rows} >= {"flashinfer-python", "nvidia-ml-py"}
    assert next(r for r in rows if r.name == "flashinfer-python").version == "0.7.2"
    assert part_bytes <= 60 * 1024 * 1024


@pytest.mark.bad_input
def test_a_base_without_pins_is_one_error(tmp_path):
    table = tmp_path / "t.toml"
    table.write_text((ROOT / TABLE).read_text())
    with pytest.raises(UserError, match="pins no FlashInfer wheels for base v0.5.12"):
        read_table(table, "v0.5.12")
    table.write_text('part_mib = 60\n[[wheel]]\nbase = "v0.5.23"\nname = "x"\n')
    with pytest.raises(UserError, match="must have exactly"):
        read_table(table, "v0.5.23")


def test_parts_round_trip_through_install_sh(tmp_path):
    stage, sizes = _stage(tmp_path)
    assert len(sizes) >= 2 and all(p.is_dir() for p in stage.glob("part*"))
    proc = _install(stage, tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    assert "2 wheels match MANIFEST.sha256" in proc.stdout
    assert (tmp_path / "site" / "bigpkg.py").is_file()
    assert (tmp_path / "site" / "smallpkg.py").is_file()


@pytest.mark.bad_input
def test_a_missing_part_is_named_and_nothing_installed(tmp_path):
    stage, _ = _stage(tmp_path)
    shutil.rmtree(stage / "part1")
    proc = _install(stage, tmp_path / "site")
    assert proc.returncode == 2
    assert proc.stderr.startswith("install.sh: error: missing part1")
    assert not (tmp_path / "site").exists()


@pytest.mark.bad_input
def test_a_damaged_piece_is_refused(tmp_path):
    stage, _ = _stage(tmp_path)
    piece = next((stage / "part1").glob("*.whl.*"))
    piece.write_bytes(piece.read_bytes()[:-1] + b"?")
    proc = _install(stage, tmp_path / "site")
    assert proc.returncode == 2
    assert f"checksum mismatch: part1/{piece.name}" in proc.stderr
    assert not (tmp_path / "site").exists()
