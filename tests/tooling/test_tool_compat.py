"""``sglpatch check-upstream`` on synthetic release wheels, offline."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from sglpatch.compat import APPLIES, CONFLICTS, UPSTREAM, classify, release_target
from sglpatch.digest import sha256_file
from sglpatch.pipfetch import Wheel, remember
from sglpatch.upstream import init_from_wheel
from sgltest import PIN, TARGET, Workspace, one_error_line

VERSION = "0.5.99"
MODULE = TARGET.removeprefix("python/")


def _release_wheel(directory: Path, pinned_wheel: Path) -> Path:
    """A fake next release: 0001 merged upstream, the end of the file rewritten."""
    with zipfile.ZipFile(pinned_wheel) as archive:
        text = archive.read(MODULE).decode()
    text = text.replace(
        "import math\n", "import math  # [perf] used by the page math\n", 1
    )
    lines = text.splitlines(keepends=True)
    text = (
        "".join(lines[:-3]) + "    # upstream rewrote the end of this file\n    pass\n"
    )
    name = PIN.wheel.replace("0.5.12", VERSION)
    path = directory / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("sglang/__init__.py", "")
        archive.writestr(MODULE, text)
        archive.writestr(f"sglang-{VERSION}.dist-info/METADATA", "Name: sglang\n")
    return path


def test_classifier_on_a_local_tree(tmp_path: Path, pinned_wheel, canonical_patches):
    wheel = _release_wheel(tmp_path, pinned_wheel)
    tree = tmp_path / "tree"
    init_from_wheel(wheel, sha256_file(wheel), VERSION, PIN.released, tree)
    verdicts = classify(tree, sorted(canonical_patches.glob("*.patch")))
    assert [v.result for v in verdicts] == [UPSTREAM, CONFLICTS, APPLIES]
    assert TARGET in verdicts[1].detail and "hunk #1 of 1" in verdicts[1].detail


def test_check_upstream_prints_a_markdown_table(
    workspace: Workspace, pinned_wheel, canonical_patches
):
    names = workspace.use_patches(canonical_patches)
    cache = workspace.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = _release_wheel(cache, pinned_wheel)
    target = release_target(PIN)
    remember(
        cache, Wheel(f"sglang=={VERSION}", wheel, sha256_file(wheel), "index"), target
    )
    out = workspace.ok("check-upstream", "--version", VERSION).stdout
    assert f"| 1 | `{names[0]}` | already upstream |  |" in out
    assert f"| 2 | `{names[1]}` | conflicts | {TARGET}: hunk #1 of 1" in out
    assert f"| 3 | `{names[2]}` | applies cleanly |  |" in out
    assert (
        sha256_file(wheel) in out
        and "1 applies cleanly, 1 already upstream, 1 conflicts" in out
    )


def test_check_upstream_with_an_empty_series(workspace: Workspace, pinned_wheel):
    cache = workspace.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = _release_wheel(cache, pinned_wheel)
    remember(
        cache,
        Wheel(f"sglang=={VERSION}", wheel, sha256_file(wheel), "index"),
        release_target(PIN),
    )
    out = workspace.ok("check-upstream", "--version", VERSION).stdout
    assert "(the series is empty)" in out


def test_check_upstream_tampered_cache_is_refused(workspace: Workspace, pinned_wheel):
    cache = workspace.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = _release_wheel(cache, pinned_wheel)
    remember(
        cache,
        Wheel(f"sglang=={VERSION}", wheel, "0" * 64, "index"),
        release_target(PIN),
    )
    error = one_error_line(workspace.tool("check-upstream", "--version", VERSION))
    assert "checksum mismatch" in error and wheel.name in error


@pytest.mark.parametrize("version", ["0.5", "v0.5.13", "latest"])
def test_check_upstream_bad_version(workspace: Workspace, version: str):
    assert "bad version" in one_error_line(
        workspace.tool("check-upstream", "--version", version)
    )


def test_check_upstream_pip_failure_names_the_release(workspace: Workspace):
    error = one_error_line(workspace.tool("check-upstream", "--version", "0.0.1"))
    assert "pip could not fetch sglang==0.0.1" in error and "cp311" in error
