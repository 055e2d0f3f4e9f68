"""``sglpatch lint-patched`` with a stand-in pre-commit (no network needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sgltest import ROOT, TARGET, Workspace, git, one_error_line, snapshot

NEW_FILE = "python/sglang/srt/layers/attention/sglpatch_note.py"
FAKE = """#!/usr/bin/env bash
# Stand-in for pre-commit: records how it was called, may rewrite or fail.
printf '%s\\n' "$PWD" "$@" > "$FAKE_LOG"
if [ -n "${FAKE_REWRITE:-}" ]; then
    for last; do :; done
    printf '  \\n' >> "$last"
fi
exit "${FAKE_EXIT:-0}"
"""


@pytest.fixture
def fake_pre_commit(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "pre-commit"
    path.parent.mkdir()
    path.write_text(FAKE)
    path.chmod(0o755)
    return path


@pytest.fixture
def linted(workspace: Workspace, canonical_patches: Path) -> Workspace:
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    return workspace


def _lint(space: Workspace, fake: Path, **env: str):
    log = fake.parent / "log"
    proc = space.tool("lint-patched", "--pre-commit", str(fake), env={"FAKE_LOG": str(log), **env})
    return proc, log.read_text().splitlines() if log.exists() else []


def test_lint_runs_on_touched_files_in_a_scratch_worktree(linted: Workspace, fake_pre_commit):
    before = snapshot(linted.tree)
    proc, log = _lint(linted, fake_pre_commit)
    assert proc.returncode == 0, proc.stderr
    cwd, args = log[0], log[1:]
    assert cwd != str(linted.tree) and not Path(cwd).exists()
    config = str(ROOT / "ci" / "sglang-pre-commit.yaml")
    assert args[:3] == ["run", "--config", config]
    assert args[args.index("--files") + 1 :] == [NEW_FILE, TARGET]
    assert snapshot(linted.tree) == before


def test_lint_fails_when_a_hook_rewrites_a_file(linted: Workspace, fake_pre_commit):
    before = snapshot(linted.tree)
    proc, _ = _lint(linted, fake_pre_commit, FAKE_REWRITE="1")
    assert proc.returncode == 1 and f"a hook rewrote {TARGET}" in proc.stderr
    assert snapshot(linted.tree) == before
    assert git(linted.tree, "diff", "base/v0.5.12", "--stat").count("|") == 2


def test_lint_fails_when_a_hook_fails(linted: Workspace, fake_pre_commit):
    proc, _ = _lint(linted, fake_pre_commit, FAKE_EXIT="3")
    assert proc.returncode == 1 and "pre-commit exited 3" in proc.stderr


@pytest.mark.bad_input
def test_lint_missing_pre_commit(linted: Workspace, tmp_path: Path):
    proc = linted.tool("lint-patched", "--pre-commit", str(tmp_path / "none"))
    assert "pre-commit not found" in one_error_line(proc)


def test_lint_empty_series(workspace: Workspace, fake_pre_commit):
    workspace.ok("apply")
    proc, log = _lint(workspace, fake_pre_commit)
    assert proc.returncode == 0 and "nothing to lint" in proc.stderr and log == []


def test_hook_config_pins_upstream_tools():
    text = (ROOT / "ci" / "sglang-pre-commit.yaml").read_text()
    for pin in (
        "isort==5.13.2",
        "black==24.10.0",
        "codespell==2.4.1",
        "pre-commit-hooks==5.0.0",
    ):
        assert pin in text
    for entry in (
        "trailing-whitespace-fixer",
        "end-of-file-fixer",
        "check-ast",
        "check-merge-conflict",
        "debug-statement-hook",
    ):
        assert f"entry: {entry}" in text


def test_each_base_has_its_upstream_hook_config():
    """patches/bases.toml names each base's hook config; v0.5.23's upstream
    formats with ruff (its unpatched files are `ruff format` clean), not black."""
    from sgltest import DEFAULT, SECOND

    assert DEFAULT.lint_config == ROOT / "ci" / "sglang-pre-commit.yaml"
    assert SECOND.lint_config == ROOT / "ci" / "sglang-v0.5.23-pre-commit.yaml"
    text = SECOND.lint_config.read_text()
    assert "entry: ruff format --isolated\n" in text and "ruff==0.14.7" in text
    assert "black" not in text.split("repos:", 1)[1]
