"""``sglpatch export`` and ``check-patches``."""

from __future__ import annotations

from pathlib import Path

import pytest
from sgltest import TARGET, Workspace, commit_all, edit_target, git, write_series


def _patch_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.patch"))}


def _entries(directory: Path) -> list[str]:
    lines = (directory / "series").read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_export_round_trip_is_byte_identical(workspace: Workspace, canonical_patches: Path):
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    workspace.ok("export")
    assert _patch_bytes(workspace.patches) == _patch_bytes(canonical_patches)
    assert _entries(workspace.patches) == names
    assert names == [
        "0001-perf-Skip-a-needless-fill.patch",
        "0002-fix-Add-a-helper.patch",
        "0003-feat-Add-a-note-module.patch",
    ]


def test_export_is_deterministic_and_canonical(canonical_patches: Path):
    text = (canonical_patches / "0002-fix-Add-a-helper.patch").read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 Mon Sep 17")
    assert "Subject: [PATCH] [fix] Add a helper\n" in text and "With a body line." in text
    assert "\n-- \n" not in text  # no signature naming a git version
    assert " | " not in text.split("diff --git")[0]  # no diffstat
    assert "index " in text and len(text.split("index ")[1].split("..")[0]) == 40


def test_export_keeps_user_config_out(workspace, canonical_patches: Path):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    for setting in ("diff.noprefix=true", "diff.mnemonicPrefix=true", "core.abbrev=7"):
        git(workspace.tree, "config", *setting.split("="))
    git(workspace.tree, "config", "format.signature", "custom")
    workspace.ok("export")
    assert _patch_bytes(workspace.patches) == _patch_bytes(canonical_patches)


def test_raw_patches_survive_the_round_trip(workspace, raw_patches, canonical_patches):
    workspace.use_patches(raw_patches)
    workspace.ok("apply")
    raw_head = workspace.head()
    workspace.ok("export")
    assert _patch_bytes(workspace.patches) == _patch_bytes(canonical_patches)
    workspace.ok("apply")  # patches changed bytes: rebuilt, same commits
    assert workspace.head() == raw_head


def test_export_removes_stale_patches_only(workspace: Workspace, canonical_patches: Path):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    (workspace.patches / "README.md").write_text("notes")
    (workspace.patches / "0009-old.patch").write_text("stale")
    workspace.ok("export")
    assert not (workspace.patches / "0009-old.patch").exists()
    assert (workspace.patches / "README.md").read_text() == "notes"
    assert (workspace.patches / "base.toml").exists()


def test_export_picks_up_new_commits(workspace: Workspace, canonical_patches: Path):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    edit_target(workspace.tree, "import logging\n", "import logging  # new\n")
    commit_all(workspace.tree, "Eve <eve@example.com>", "[perf] New work", "2026-07-01T00:00Z")
    workspace.ok("export")
    assert _entries(workspace.patches)[-1] == "0004-perf-New-work.patch"
    workspace.ok("check-patches")


def test_check_patches_passes_on_a_fresh_export(workspace, canonical_patches):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    assert "matches a fresh export" in workspace.ok("check-patches").stderr


def test_check_patches_empty_series(workspace: Workspace):
    workspace.ok("apply")
    workspace.ok("check-patches")


def _failed(workspace: Workspace) -> str:
    proc = workspace.tool("check-patches")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr


@pytest.mark.parametrize("case", ["missing", "unlisted", "duplicate"])
def test_check_patches_finds_series_problems(workspace, canonical_patches, case):
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    if case == "missing":
        (workspace.patches / names[1]).unlink()
        expected = f"{names[1]} is listed but"
    elif case == "unlisted":
        write_series(workspace.patches, names[:2])
        expected = f"{names[2]} is in"
    else:
        write_series(workspace.patches, [*names, names[0]])
        expected = f"{names[0]} is listed twice"
    assert expected in _failed(workspace)


def test_check_patches_finds_a_patch_that_is_not_canonical(workspace, raw_patches):
    names = workspace.use_patches(raw_patches)
    workspace.ok("apply")
    err = _failed(workspace)
    assert f"{names[0]}: differs from a fresh export" in err
    assert "make apply export" in err


def test_check_patches_finds_unexported_commits(workspace, canonical_patches):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    edit_target(workspace.tree, "import logging\n", "import logging  # new\n")
    commit_all(workspace.tree, "Eve <eve@example.com>", "[perf] New work", "2026-07-01T00:00Z")
    assert "0004-perf-New-work.patch: a fresh export adds it" in _failed(workspace)


def test_check_patches_needs_a_current_build(workspace, canonical_patches):
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    patch = workspace.patches / names[1]
    patch.write_text(patch.read_text().replace("return 42", "return 7"))
    proc = workspace.tool("check-patches")
    assert proc.returncode == 2 and "run `make apply` first" in proc.stderr
    workspace.ok("apply")
    assert "return 7" in (workspace.tree / TARGET).read_text()
    # A hand-edited patch no longer matches its index lines: not canonical.
    assert f"{names[1]}: differs from a fresh export" in _failed(workspace)
    workspace.ok("export")
    workspace.ok("check-patches")
    assert "up to date" in workspace.ok("apply").stderr
