"""``sglpatch check-upstream`` on synthetic release wheels, offline."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from sgltest import PIN, TARGET, Workspace, one_error_line

from sglpatch.compat import (
    APPLIES,
    CONFLICTS,
    MERGES,
    UPSTREAM,
    classify,
    release_target,
)
from sglpatch.digest import sha256_file
from sglpatch.gitcmd import Git
from sglpatch.pipfetch import Wheel, remember
from sglpatch.upstream import commit_wheel, init_from_wheel

VERSION = "0.5.99"
MODULE = TARGET.removeprefix("python/")


def _release_wheel(directory: Path, pinned_wheel: Path) -> Path:
    """A fake next release: 0001 merged upstream, the end of the file rewritten."""
    with zipfile.ZipFile(pinned_wheel) as archive:
        text = archive.read(MODULE).decode()
    text = text.replace("import math\n", "import math  # [perf] used by the page math\n", 1)
    lines = text.splitlines(keepends=True)
    text = "".join(lines[:-3]) + "    # upstream rewrote the end of this file\n    pass\n"
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
    remember(cache, Wheel(f"sglang=={VERSION}", wheel, sha256_file(wheel), "index"), target)
    out = workspace.ok("check-upstream", "--version", VERSION).stdout
    assert f"| 1 | `{names[0]}` | already upstream |  |" in out
    assert f"| 2 | `{names[1]}` | conflicts | {TARGET}: hunk #1 of 1" in out
    assert f"| 3 | `{names[2]}` | applies cleanly |  |" in out
    assert (
        sha256_file(wheel) in out
        and "1 applies cleanly, 0 applies with 3-way merge, 1 already upstream, 1 conflicts" in out
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


@pytest.mark.bad_input
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


@pytest.mark.bad_input
@pytest.mark.parametrize("version", ["0.5", "v0.5.13", "latest"])
def test_check_upstream_bad_version(workspace: Workspace, version: str):
    assert "bad version" in one_error_line(workspace.tool("check-upstream", "--version", version))


@pytest.mark.bad_input
def test_check_upstream_pip_failure_names_the_release(workspace: Workspace):
    error = one_error_line(workspace.tool("check-upstream", "--version", "0.0.1"))
    assert "pip could not fetch sglang==0.0.1" in error and "cp311" in error


def test_classifier_tries_a_three_way_merge(tmp_path: Path, pinned_wheel, canonical_patches):
    """A release that edits a line near a hunk: plain apply fails, 3-way merges."""
    with zipfile.ZipFile(pinned_wheel) as archive:
        text = archive.read(MODULE).decode()
    assert '"""\n\nimport logging\nimport math\n' in text
    text = text.replace('"""\n\nimport logging\n', '"""\n# release note\nimport logging\n', 1)
    release = tmp_path / PIN.wheel.replace("0.5.12", VERSION)
    with zipfile.ZipFile(release, "w") as archive:
        archive.writestr(MODULE, text)
    tree = tmp_path / "tree"
    init_from_wheel(pinned_wheel, PIN.wheel_sha256, PIN.version, PIN.released, tree)
    commit_wheel(Git(tree), release, sha256_file(release), VERSION, PIN.released)
    verdicts = classify(tree, sorted(canonical_patches.glob("*.patch")))
    assert [v.result for v in verdicts] == [MERGES, APPLIES, APPLIES]
    assert "hunk #1 of 1" in verdicts[0].detail
    merged = (tree / TARGET).read_text()
    assert "# release note" in merged and "# [perf] used by the page math" in merged


@pytest.mark.bad_input
def test_check_upstream_refuses_a_wheel_without_an_index_sha256(workspace: Workspace, pinned_wheel):
    cache = workspace.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = _release_wheel(cache, pinned_wheel)
    remember(cache, Wheel(f"sglang=={VERSION}", wheel, "", "index"), release_target(PIN))
    proc = workspace.tool("check-upstream", "--version", VERSION)
    error = one_error_line(proc)
    assert "no sha256" in error and wheel.name in error and proc.stdout == ""


@pytest.mark.bad_input
def test_check_upstream_with_a_damaged_index_record(workspace: Workspace, pinned_wheel):
    cache = workspace.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = _release_wheel(cache, pinned_wheel)
    remember(
        cache, Wheel(f"sglang=={VERSION}", wheel, sha256_file(wheel), "index"), release_target(PIN)
    )
    for record in (cache / "resolved").glob("*.json"):
        record.write_text('{"filename": ')
    error = one_error_line(workspace.tool("check-upstream", "--version", VERSION))
    assert f"pip could not fetch sglang=={VERSION}" in error
