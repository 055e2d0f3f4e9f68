"""Faults around ``sglpatch apply``: interrupts, concurrent runs, a build tree that
loses its ``.git``, and what killed runs leave behind."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from sgltest import (
    TARGET,
    Gate,
    Workspace,
    commit_all,
    edit_target,
    git,
    interrupt,
    limit_file_size,
    one_error_line,
    run,
    wait_until,
)

pytestmark = pytest.mark.bad_input


@pytest.fixture
def rebuilding(workspace: Workspace, canonical_patches: Path) -> Workspace:
    """A tree built from the first two patches, with all three in patches/ now:
    the next apply resets to the base and applies the three."""
    names = sorted(p.name for p in canonical_patches.glob("*.patch"))
    workspace.use_patches(canonical_patches, names[:2])
    workspace.ok("apply")
    workspace.use_patches(canonical_patches)
    return workspace


def _patch_bytes(space: Workspace) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(space.patches.iterdir())}


def _assert_complete(space: Workspace) -> None:
    tree = space.tree
    assert git(tree, "rev-list", "--count", "base/v0.5.12..patched") == "3"
    assert git(tree, "symbolic-ref", "HEAD") == "refs/heads/patched"
    assert git(tree, "status", "--porcelain", "--untracked-files=no") == ""
    assert not (tree / ".git" / "rebase-apply").exists()
    assert sorted(p.name for p in space.build.iterdir()) == [
        ".sglpatch.lock",
        "base",
        "cache",
        "sglang",
    ]


@pytest.mark.parametrize(
    "hook, signum",
    [
        ("pre-applypatch", signal.SIGINT),
        ("pre-applypatch", signal.SIGTERM),
        ("pre-applypatch", signal.SIGHUP),
        ("pre-applypatch", signal.SIGKILL),
        ("post-applypatch", signal.SIGKILL),
    ],
    ids=["sigint-in-am", "sigterm-in-am", "sighup-in-am", "sigkill-in-am", "sigkill-after-commit"],
)
def test_interrupted_apply_recovers(rebuilding: Workspace, tmp_path: Path, hook, signum):
    """Stopped inside git am of the second patch (patch applied, not yet committed;
    or committed, not yet recorded): export refuses, the next apply rebuilds."""
    space = rebuilding
    gate = Gate.create(tmp_path / "gate")
    gate.hook(space.tree, hook)
    gate.arm(2)
    running = space.start("apply")
    gate.wait_inside(running)
    interrupt(running, signum)
    code = running.wait()
    gate.release()
    if signum == signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        assert code == 128 + signum, running.output()
        assert f"sglpatch: interrupted by {signum.name}" in running.output()
        assert "Traceback" not in running.output()
    before = _patch_bytes(space)
    error = one_error_line(space.tool("export"))
    assert "was interrupted" in error and "make apply" in error
    assert _patch_bytes(space) == before
    assert "was interrupted: rebuilding" in space.ok("apply").stderr
    _assert_complete(space)
    space.ok("export")
    assert _patch_bytes(space) == before
    space.ok("check-patches")


@pytest.mark.parametrize(
    "signum",
    [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL],
    ids=["sigint", "sigterm", "sighup", "sigkill"],
)
def test_interrupt_as_git_am_starts_recovers(rebuilding: Workspace, tmp_path: Path, signum):
    """Stopped at git am's first moment: an empty .git/rebase-apply (git made the
    folder, nothing in it yet). The stamp says the tool's git am ran: the next
    apply takes it for its own and rebuilds; check-patches and export then work."""
    space = rebuilding
    gate = Gate.create(tmp_path / "gate")
    env = gate.git_shim("am", before="mkdir .git/rebase-apply")
    gate.arm(1)
    running = space.start("apply", env=env)
    gate.wait_inside(running)
    assert (space.tree / ".git" / "rebase-apply").is_dir()
    running.signal(signum, group=True)
    running.wait()
    gate.release()
    assert not list((space.tree / ".git" / "rebase-apply").iterdir())
    assert "was interrupted: rebuilding" in space.ok("apply").stderr
    _assert_complete(space)
    space.ok("check-patches")
    space.ok("export")


def test_work_after_an_interrupted_apply_is_kept(rebuilding: Workspace, tmp_path: Path):
    """A commit or an edit made in the tree after an interrupt is the user's: refused."""
    space = rebuilding
    gate = Gate.create(tmp_path / "gate")
    gate.hook(space.tree, "pre-applypatch")
    gate.arm(2)
    running = space.start("apply")
    gate.wait_inside(running)
    interrupt(running, signal.SIGKILL)
    running.wait()
    gate.release()
    tree = space.tree
    assert run(["git", "am", "--abort"], cwd=tree).returncode == 0
    (tree / "python/sglang/README.local").write_text("untracked, mine\n")
    edit_target(tree, "import logging\n", "import logging  # mine\n")
    commit_all(tree, "Dev <dev@example.com>", "My work", "2026-07-01T00:00Z")
    mine = git(tree, "rev-parse", "HEAD")
    error = one_error_line(space.tool("apply"))
    assert "1 commit(s) of its own" in error and "interrupted" in error
    assert git(tree, "rev-parse", "HEAD") == mine
    other = tree / "python/sglang/version.py"
    other.write_text(other.read_text() + "# mine too\n")
    git(tree, "switch", "-q", "-c", "mine")
    git(tree, "switch", "-q", "patched")  # the commit is safe on its branch now
    git(tree, "reset", "-q", "HEAD~1")
    git(tree, "checkout", "-q", "--", TARGET)
    error = one_error_line(space.tool("apply"))
    assert "uncommitted changes to python/sglang/version.py" in error
    assert "# mine too" in other.read_text()
    git(tree, "stash", "-q")
    space.ok("apply")
    assert git(tree, "rev-parse", "mine") == mine
    assert "# mine too" in git(tree, "stash", "show", "-p")
    assert (tree / "python/sglang/README.local").read_text() == "untracked, mine\n"


def test_concurrent_applies_wait_for_each_other(rebuilding: Workspace, tmp_path: Path):
    space = rebuilding
    gate = Gate.create(tmp_path / "gate")
    gate.hook(space.tree, "pre-applypatch")
    gate.arm(1)
    first = space.start("apply")
    gate.wait_inside(first)
    second = space.start("apply")
    wait_until(
        lambda: "waiting for" in second.output() or second.proc.poll() is not None,
        what="the second run to wait",
    )
    assert second.proc.poll() is None, second.output()
    assert f"{space.build / '.sglpatch.lock'} (pid {first.proc.pid})" in second.output()
    gate.release()
    assert first.wait() == 0, first.output()
    assert second.wait() == 0, second.output()
    assert "up to date" in second.output()
    _assert_complete(space)


def _project(root: Path) -> dict:
    """Make ``root`` a git repository like this project's clone, with a tag
    base/v0.5.12 (the name of the build tree's base tag) of its own."""
    git(root, "init", "-q", "-b", "main")
    for number in (1, 2):
        (root / "README").write_text(f"project {number}\n")
        git(root, "add", "README")
        commit_all(root, "P <p@example.com>", f"project {number}", "2026-01-01T00:00Z")
    git(root, "tag", "base/v0.5.12", "HEAD~1")
    return _state(root)


def _state(repo: Path) -> dict:
    """HEAD, refs, worktrees and tracked changes of ``repo``."""
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "symbolic": git(repo, "symbolic-ref", "HEAD"),
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=no"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
    }


def test_git_never_reaches_the_enclosing_repository(
    workspace: Workspace, canonical_patches: Path, tmp_path: Path
):
    """build/sglang loses .git while apply runs: git fails there, and the project
    around it is untouched (no checkout -B patched in the project)."""
    before = _project(workspace.root)
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    gate = Gate.create(tmp_path / "gate")
    env = gate.git_shim("status")
    gate.arm(1)
    running = workspace.start("apply", env=env)
    gate.wait_inside(running)
    shutil.rmtree(workspace.tree / ".git")
    gate.release()
    assert running.wait() == 2, running.output()
    assert "not a git repository" in running.output()
    assert "Traceback" not in running.output()
    assert _state(workspace.root) == before
    error = one_error_line(workspace.tool("apply"))
    assert "not made by sglpatch" in error
    assert _state(workspace.root) == before


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_interrupted_fresh_build_leaves_nothing(workspace: Workspace, tmp_path: Path, signum):
    gate = Gate.create(tmp_path / "gate")
    env = gate.git_shim("commit-tree")
    gate.arm(1)
    running = workspace.start("apply", env=env)
    gate.wait_inside(running)
    assert [p.name for p in workspace.build.glob(".sglang-new-*")]
    interrupt(running, signum)
    code = running.wait()
    gate.release()
    assert code == 128 + signum and f"interrupted by {signum.name}" in running.output()
    assert sorted(p.name for p in workspace.build.iterdir()) == [".sglpatch.lock", "cache"]


def test_killed_fresh_build_is_swept_by_the_next_run(workspace: Workspace, tmp_path: Path):
    gate = Gate.create(tmp_path / "gate")
    env = gate.git_shim("commit-tree")
    gate.arm(1)
    running = workspace.start("apply", env=env)
    gate.wait_inside(running)
    interrupt(running, signal.SIGKILL)
    running.wait()
    gate.release()
    assert list(workspace.build.glob(".sglang-new-*"))
    download = workspace.build / "cache" / ".download-x1y2"
    download.mkdir()
    (download / "half.whl").write_bytes(b"half")
    (workspace.build / "cache" / "mine.txt").write_text("kept")
    proc = workspace.ok("apply")
    assert "left by an interrupted run" in proc.stderr
    assert sorted(p.name for p in workspace.build.iterdir()) == [
        ".sglpatch.lock",
        "base",
        "cache",
        "sglang",
    ]
    assert not download.exists()
    assert (workspace.build / "cache" / "mine.txt").read_text() == "kept"


def test_base_worktree_left_half_made_by_a_kill(workspace: Workspace):
    """A kill inside `git worktree add` leaves build/base registered and locked, its
    folder partly written or gone: the next apply makes it again."""
    workspace.ok("apply")
    registered = workspace.tree / ".git" / "worktrees" / "base"
    (registered / "locked").write_text("initializing\n")
    shutil.rmtree(workspace.build / "base")
    assert "up to date" in workspace.ok("apply").stderr
    assert git(workspace.build / "base", "status", "--porcelain") == ""
    assert (workspace.build / "base" / TARGET).is_file()


def test_new_base_does_not_drop_branches_or_stashes(workspace: Workspace):
    """A changed base replaces the whole tree: refused while it holds work of yours
    outside `patched`."""
    workspace.ok("apply")
    tree = workspace.tree
    git(tree, "branch", "mine")
    edit_target(tree, "import logging\n", "import logging  # stashed\n")
    git(tree, "stash", "-q")
    pin = workspace.patches / "base.toml"
    pin.write_text(pin.read_text() + "# edited: the base is made again\n")
    error = one_error_line(workspace.tool("apply"))
    assert "holds mine, refs/stash" in error
    assert git(tree, "rev-parse", "mine") and "# stashed" in git(tree, "stash", "show", "-p")
    git(tree, "branch", "-D", "mine")
    git(tree, "stash", "drop", "-q")
    assert "is commit" in workspace.ok("apply").stderr


def _edit_pin(space: Workspace) -> None:
    """A comment line in base.toml: the base is made again."""
    pin = space.patches / "base.toml"
    pin.write_text(pin.read_text() + "# edited: the base is made again\n")


@pytest.mark.parametrize("kind", ["light-tag", "annotated-tag", "detached-commit", "untracked"])
def test_new_base_does_not_drop_tags_commits_or_files(workspace: Workspace, kind: str):
    """A commit on a detached HEAD (tagged or not) and an untracked file once went
    with the tree when the base changed: refused, naming them."""
    workspace.ok("apply")
    tree = workspace.tree
    git(tree, "switch", "-q", "--detach")
    edit_target(tree, "import logging\n", "import logging  # detached\n")
    commit_all(tree, "Dev <dev@example.com>", "Detached work", "2026-07-01T00:00Z")
    mine = git(tree, "rev-parse", "HEAD")
    if kind == "light-tag":
        git(tree, "tag", "mine")
    elif kind == "annotated-tag":
        git(tree, "tag", "-a", "-m", "my tag", "mine")
    git(tree, "switch", "-q", "patched")
    if kind == "untracked":
        (tree / "python/sglang/notes.txt").write_text("mine\n")
    _edit_pin(workspace)
    error = one_error_line(workspace.tool("apply"))
    expected = {
        "light-tag": "holds refs/tags/mine",
        "annotated-tag": "holds refs/tags/mine",
        "detached-commit": f"commit {mine[:12]} (only in the reflog of HEAD)",
        "untracked": "untracked python/sglang/notes.txt",
    }[kind]
    assert "the base changed" in error and expected in error, error
    assert git(tree, "cat-file", "-t", mine) == "commit"
    if kind == "untracked":
        assert (tree / "python/sglang/notes.txt").read_text() == "mine\n"


def test_a_new_base_drops_python_caches(workspace: Workspace):
    """Python's caches are no one's work: a new base drops them without asking."""
    workspace.ok("apply")
    cache = workspace.tree / "python/sglang/__pycache__"
    cache.mkdir()
    (cache / "x.cpython-311.pyc").write_bytes(b"")
    _edit_pin(workspace)
    assert "is commit" in workspace.ok("apply").stderr


@pytest.mark.parametrize("change", ["base-changed", "no-op"])
def test_base_worktree_work_is_not_dropped(workspace: Workspace, change: str):
    """A no-op apply once remade build/base, dropping an edit and a new file:
    refused, naming them."""
    workspace.ok("apply")
    base = workspace.build / "base"
    edit_target(base, "import logging\n", "import logging  # mine\n")
    (base / "python/sglang/notes.txt").write_text("mine\n")
    if change == "base-changed":
        _edit_pin(workspace)
    error = one_error_line(workspace.tool("apply"))
    assert f"{base} holds changes to {TARGET}, untracked python/sglang/notes.txt" in error
    assert "# mine" in (base / TARGET).read_text()
    assert (base / "python/sglang/notes.txt").read_text() == "mine\n"
    git(base, "checkout", "-q", "--", TARGET)
    (base / "python/sglang/notes.txt").unlink()
    workspace.ok("apply")


def test_a_file_size_limit_is_named_and_leaves_no_git_lock(rebuilding: Workspace):
    """Under `ulimit -f` below the size of the tree's index, after a patch's Subject
    changed: git was killed by SIGXFSZ (the message said so, not what it means) and
    left .git/index.lock, which failed the next apply and, after a no-op apply, the
    user's own `git commit`. Now git's write fails and it cleans up; the error
    names the limit; the next apply rebuilds; a no-op apply writes nothing."""
    space = rebuilding
    tree = space.tree
    limit = (tree / ".git" / "index").stat().st_size // 2
    first = sorted(space.patches.glob("*.patch"))[0]
    text = first.read_text()
    first.write_text(text.replace("Subject: [PATCH] ", "Subject: [PATCH] Edited: ", 1))
    proc = space.tool("apply", preexec=limit_file_size(limit))
    error = one_error_line(proc)
    assert f"the file size limit (ulimit -f) is {limit} bytes: raise it" in error, error
    assert "SIGXFSZ" not in error
    assert not list((tree / ".git").glob("*.lock"))
    assert "was interrupted: rebuilding" in space.ok("apply").stderr
    assert git(tree, "log", "--format=%s", "-1", "HEAD~2").startswith("Edited: ")
    (tree / TARGET).touch()  # stat data changed: a git status would refresh the index
    noop = space.tool("apply", preexec=limit_file_size(limit))
    assert noop.returncode == 0 and "is up to date" in noop.stderr, noop.stderr
    assert not list((tree / ".git").glob("*.lock"))
    edit_target(tree, "import logging\n", "import logging  # mine\n")
    commit_all(tree, "Dev <dev@example.com>", "My work", "2026-07-01T00:00Z")
