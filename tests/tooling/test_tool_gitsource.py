"""``sglpatch apply --source git`` against a local bare repository fixture."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from sgltest import BASE_COMMIT, PIN, TARGET, Workspace, commit_all, git, one_error_line


def _bare_upstream(root: Path, wheel: Path, extra: bytes = b"") -> Path:
    """A bare repo whose tag v0.5.12 holds the wheel's target file (plus ``extra``)."""
    work = root / "work"
    (work / TARGET).parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(TARGET.removeprefix("python/"))
        (work / TARGET).write_bytes(archive.read(info) + extra)
    (work / TARGET).chmod((info.external_attr >> 16) & 0o777)  # 0755, as in the wheel
    (work / "python/sglang/__init__.py").write_text("")
    git(work.parent, "init", "-q", str(work))
    commit_all(work, "Upstream <up@example.com>", "Release v0.5.12", "2026-05-16T00:00Z")
    git(work, "tag", "v0.5.12")
    bare = root / "sglang.git"
    git(root, "clone", "-q", "--bare", str(work), str(bare))
    return bare


def test_git_source_builds_from_the_tag(workspace: Workspace, canonical_patches, pinned_wheel):
    bare = _bare_upstream(workspace.root / "up", pinned_wheel)
    workspace.use_patches(canonical_patches)
    env = {"SGLPATCH_GIT_URL": str(bare)}
    workspace.ok("apply", "--source", "git", env=env)
    tree = workspace.tree
    assert git(tree, "rev-parse", "base/v0.5.12") == git(bare, "rev-parse", "v0.5.12^{commit}")
    assert git(tree, "rev-parse", f"base/v0.5.12:{TARGET}") == PIN.target_blob
    assert git(tree, "rev-list", "--count", "base/v0.5.12..patched") == "3"
    assert git(workspace.build / "base", "rev-parse", "HEAD") == git(
        tree, "rev-parse", "base/v0.5.12"
    )
    assert "up to date" in workspace.ok("apply", "--source", "git", env=env).stderr
    workspace.ok("check-patches")
    # Switching back to the wheel rebuilds on the wheel's base commit.
    workspace.ok("apply")
    assert git(tree, "rev-parse", "base/v0.5.12") == BASE_COMMIT


@pytest.mark.bad_input
def test_git_source_with_another_blob_is_refused(workspace: Workspace, pinned_wheel):
    bare = _bare_upstream(workspace.root / "up", pinned_wheel, extra=b"# changed\n")
    error = one_error_line(
        workspace.tool("apply", "--source", "git", env={"SGLPATCH_GIT_URL": str(bare)})
    )
    assert PIN.target_blob in error and "expected" in error and TARGET in error
    assert not workspace.tree.exists()
    assert list((workspace.build / "cache").glob("git-*.git.bad-*"))


@pytest.mark.bad_input
def test_git_source_unreachable_url(workspace: Workspace, tmp_path: Path):
    env = {"SGLPATCH_GIT_URL": str(tmp_path / "nowhere.git")}
    error = one_error_line(workspace.tool("apply", "--source", "git", env=env))
    assert "git clone" in error
