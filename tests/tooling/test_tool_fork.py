"""``sglpatch apply --sglang-dir``: the series on a user's SGLang checkout."""

from __future__ import annotations

import os
import re
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
    one_error_line,
    run,
    snapshot,
)

BRANCH = "sglpatch/v0.5.12-3-patches"
NEW_FILE = "python/sglang/srt/layers/attention/sglpatch_note.py"


@pytest.fixture(scope="session")
def upstream_mirror(tmp_path_factory, pinned_wheel: Path) -> Path:
    """A bare repository standing for upstream SGLang at v0.5.12."""
    space = Workspace.create(tmp_path_factory.mktemp("upstream"), pinned_wheel)
    space.ok("apply")
    mirror = space.root / "sglang.git"
    git(space.root, "clone", "-q", "--bare", str(space.tree), str(mirror))
    git(mirror, "tag", "v0.5.12", "base/v0.5.12")
    return mirror


@pytest.fixture
def fork(tmp_path: Path, upstream_mirror: Path) -> Path:
    """A fresh clone on branch ``main`` at v0.5.12."""
    path = tmp_path / "fork"
    git(tmp_path, "clone", "-q", str(upstream_mirror), str(path))
    git(path, "checkout", "-q", "-b", "main", "v0.5.12")
    git(path, "branch", "-q", "-D", "patched")
    return path


@pytest.fixture
def series_space(workspace: Workspace, canonical_patches: Path) -> Workspace:
    workspace.use_patches(canonical_patches)
    return workspace


def _refused(space: Workspace, fork: Path, *extra: str, env: dict | None = None) -> str:
    """Run a refused fork apply; check nothing changed; return the error line."""
    return _refusal(space, fork, *extra, env=env).splitlines()[0]


def _refusal(space: Workspace, fork: Path, *extra: str, env: dict | None = None) -> str:
    """Run a refused fork apply; check nothing changed and that no line of what it
    says is long (a list goes one item a line); return its stderr."""
    before = snapshot(fork)
    proc = space.tool("apply", "--sglang-dir", str(fork), *extra, env=env)
    one_error_line(proc)
    assert snapshot(fork) == before
    assert max(len(line) for line in proc.stderr.splitlines()) < 300, proc.stderr
    return proc.stderr[proc.stderr.index("sglpatch: error:") :]


def test_fork_apply_makes_a_new_branch(series_space: Workspace, fork: Path):
    base = git(fork, "rev-parse", "HEAD")
    proc = series_space.ok("apply", "--sglang-dir", str(fork))
    assert (
        f"sglpatch: {fork}: on new branch {BRANCH}: 3 commit(s) on top of main ({base[:12]}"
        " SGLang 0.5.12 (upstream release)), where HEAD was (`git checkout main` goes back)"
    ) in proc.stderr
    assert git(fork, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert git(fork, "rev-parse", "main") == base
    log = git(fork, "log", "--reverse", "--format=%an|%s", f"{base}..")
    assert log.splitlines() == [
        "Alice Dev|[perf] Skip a needless fill",
        "Bob Dev|[fix] Add a helper",
        "Alice Dev|[feat] Add a note module",
    ]
    assert git(fork, "status", "--porcelain") == ""
    assert len(git(fork, "worktree", "list").splitlines()) == 1
    assert (fork / NEW_FILE).is_file()


@pytest.mark.bad_input
def test_fork_dirty_tree_is_refused(series_space: Workspace, fork: Path):
    edit_target(fork, "import math\n", "import math  # wip\n")
    assert "uncommitted changes" in _refused(series_space, fork)


@pytest.mark.bad_input
def test_fork_not_a_checkout(series_space: Workspace, tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    error = one_error_line(series_space.tool("apply", "--sglang-dir", str(plain)))
    assert "is not the root of a git checkout" in error
    error = one_error_line(series_space.tool("apply", "--sglang-dir", str(tmp_path / "nope")))
    assert "is not a directory" in error


@pytest.mark.bad_input
def test_fork_owned_by_another_user_gets_gits_reason(
    series_space: Workspace, fork: Path, tmp_path: Path
):
    """A fork another user owns was "is not the root of a git checkout", git's
    "dubious ownership" and its safe.directory hint dropped. Its hint, run, lets
    the apply through."""
    env = {}
    if os.geteuid() == 0:
        for path in [fork, *fork.rglob("*")]:
            os.lchown(path, 65534, -1)  # nobody
    else:
        env["GIT_TEST_ASSUME_DIFFERENT_OWNER"] = "1"  # git's own stand-in for that
    proc = series_space.tool("apply", "--sglang-dir", str(fork), env=env)
    error = one_error_line(proc)
    assert f"git refuses the checkout {fork}: detected dubious ownership" in error, error
    assert "is not the root" not in error
    hint = f"  if you trust it: git config --global --add safe.directory {fork}"
    assert hint in proc.stderr.splitlines()
    config = tmp_path / "gitconfig"
    config.write_text(Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text())
    env["GIT_CONFIG_GLOBAL"] = str(config)
    command = hint.split(": ", 1)[1].split()
    assert run(command, env={**os.environ, **env}).returncode == 0
    assert series_space.tool("apply", "--sglang-dir", str(fork), env=env).returncode == 0
    head = run(["git", "symbolic-ref", "HEAD"], cwd=fork, env={**os.environ, **env})
    assert head.stdout.strip() == f"refs/heads/{BRANCH}", head.stderr


@pytest.mark.bad_input
def test_fork_not_an_sglang_checkout(series_space: Workspace, tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "README").write_text("x")
    commit_all(other, "O <o@example.com>", "init", "2026-01-01T00:00Z")
    assert "is not an SGLang checkout" in _refused(series_space, other)


@pytest.mark.bad_input
def test_fork_with_a_different_target_lists_failing_patches(series_space, fork):
    edit_target(fork, "import math\n", "import math as _math\n")
    commit_all(fork, "F <f@example.com>", "fork change", "2026-06-10T00:00Z")
    said = _refusal(series_space, fork).splitlines()
    assert said[0].startswith(f"sglpatch: error: {fork} is not at v0.5.12: its {TARGET} is blob")
    assert said[0].endswith("(base.toml); 1 of 3 patch(es) do not apply")
    assert said[1].startswith(f"  0001-perf-Skip-a-needless-fill.patch: {TARGET}: hunk #1 of 1")
    assert said[2] == (
        "  to merge them: the same command with --three-way (a 3-way merge),"
        " or check out v0.5.12 first"
    )
    # Under make, the hint is the make command.
    said = _refusal(series_space, fork, env={"SGLPATCH_MK_THREE_WAY": ""}).splitlines()
    assert said[2].startswith(f"  to merge them: make apply SGLANG_DIR={fork} THREE_WAY=1 (a")
    # The 3-way route fails too here, leaves nothing behind, and shows the by-hand route.
    said = _refusal(series_space, fork, "--three-way").splitlines()
    assert said[0] == (
        f"sglpatch: error: patch 1/3 0001-perf-Skip-a-needless-fill.patch does not apply to"
        f" {fork} even with a 3-way merge; nothing was changed there"
    )
    assert said[1].startswith(f"  {TARGET}: ") and "hunk #1 of 1" in said[1]
    names = sorted(p.name for p in series_space.patches.glob("*.patch"))
    assert said[2:] == [
        "  resolve them by hand, in a clean tree (README: Using the patches in a fork):",
        f"    cd {fork} && git switch -c {BRANCH}",
        "    git am --3way --keep-non-patch \\",
        f"      {series_space.patches / names[0]} \\",
        f"      {series_space.patches / names[1]} \\",
        f"      {series_space.patches / names[2]}",
        "    then, at each stop: fix the files, `git add` them, `git am --continue`",
    ]
    assert BRANCH not in git(fork, "branch")
    # Copied into a shell, the by-hand route stops at the conflict, for the user.
    by_hand = run(["sh", "-c", "\n".join(line.strip() for line in said[3:9])])
    assert by_hand.returncode != 0 and "git am --continue" in by_hand.stdout + by_hand.stderr
    assert (fork / ".git" / "rebase-apply").is_dir()
    assert git(fork, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"


def test_fork_three_way_merges_a_distant_change(series_space: Workspace, fork: Path):
    line = "class TRTLLMMLABackend(FlashInferMLAAttnBackend):\n"
    edit_target(fork, line, line.replace(":", ":  # fork"))
    commit_all(fork, "F <f@example.com>", "fork change", "2026-06-10T00:00Z")
    assert _refused(series_space, fork).endswith("; all 3 patch(es) pass `git apply --check`")
    series_space.ok("apply", "--sglang-dir", str(fork), "--three-way")
    text = (fork / TARGET).read_text()
    assert "Backend):  # fork" in text and "def sglpatch_helper" in text


@pytest.mark.bad_input
def test_fork_existing_branch_is_refused(series_space: Workspace, fork: Path):
    git(fork, "branch", BRANCH)
    assert "already exists" in _refused(series_space, fork)


@pytest.mark.bad_input
def test_fork_checkout_collision_deletes_the_new_branch(series_space, fork: Path):
    (fork / NEW_FILE).write_text("my untracked file\n")
    assert "could not check out" in _refused(series_space, fork)
    assert (fork / NEW_FILE).read_text() == "my untracked file\n"


@pytest.mark.bad_input
def test_fork_am_in_progress_is_refused(series_space, fork: Path, canonical_patches):
    edit_target(fork, "import math\n", "import math as _math\n")
    commit_all(fork, "F <f@example.com>", "fork change", "2026-06-10T00:00Z")
    patch = canonical_patches / "0001-perf-Skip-a-needless-fill.patch"
    assert run(["git", "am", str(patch)], cwd=fork).returncode != 0
    assert "in the middle of a git am" in _refused(series_space, fork)


@pytest.mark.bad_input
def test_fork_folder_inside_another_checkout_is_refused(series_space: Workspace, fork: Path):
    """A folder without .git inside an SGLang checkout (build/sglang that lost its
    .git, say): git must not find the checkout around it and apply there."""
    inner = fork / "build" / "sglang"
    inner.mkdir(parents=True)
    before = snapshot(fork)
    error = one_error_line(series_space.tool("apply", "--sglang-dir", str(inner)))
    assert f"{inner} is not the root of a git checkout" in error
    assert snapshot(fork) == before


@pytest.mark.bad_input
def test_fork_failing_post_checkout_hook_is_reported_as_it_is(series_space, fork: Path):
    """The hook fails after git switched branches: the error says the branch is
    checked out (it is), never that nothing was changed."""
    hook = fork / ".git" / "hooks" / "post-checkout"
    hook.write_text(
        "#!/bin/sh\n"
        '[ "$3" = 1 ] && [ "$1" != 0000000000000000000000000000000000000000 ] &&'
        ' { echo "post-checkout: branch switches are not allowed here" >&2; exit 1; }\n'
        "exit 0\n"
    )
    hook.chmod(0o755)
    error = one_error_line(series_space.tool("apply", "--sglang-dir", str(fork)))
    assert "nothing was changed" not in error
    assert f"is now on the new branch {BRANCH} (+3 commit(s))" in error
    assert "branch switches are not allowed here" in error
    assert f"git checkout main && git branch -D {BRANCH}" in error
    assert git(fork, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert len(git(fork, "worktree", "list").splitlines()) == 1


@pytest.mark.bad_input
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_fork_apply_interrupted_cleans_up(series_space, fork: Path, tmp_path: Path, signum):
    """Stopped inside git am in the scratch worktree: that worktree is removed, the
    checkout is as it was."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    gate = Gate.create(tmp_path / "gate")
    gate.hook(fork, "pre-applypatch")
    gate.arm(2)
    before = snapshot(fork)
    running = series_space.start("apply", "--sglang-dir", str(fork), env={"TMPDIR": str(scratch)})
    gate.wait_inside(running)
    interrupt(running, signum)
    code = running.wait()
    gate.release()
    assert code == 128 + signum and f"interrupted by {signum.name}" in running.output()
    assert snapshot(fork) == before
    assert list(scratch.iterdir()) == []


@pytest.mark.bad_input
def test_fork_apply_after_a_kill_removes_the_scratch_worktree(series_space, fork, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    gate = Gate.create(tmp_path / "gate")
    gate.hook(fork, "pre-applypatch")
    gate.arm(2)
    env = {"TMPDIR": str(scratch)}
    running = series_space.start("apply", "--sglang-dir", str(fork), env=env)
    gate.wait_inside(running)
    interrupt(running, signal.SIGKILL)
    running.wait()
    gate.release()
    assert len(git(fork, "worktree", "list").splitlines()) == 2  # the killed run's
    series_space.ok("apply", "--sglang-dir", str(fork), env=env)
    assert git(fork, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert len(git(fork, "worktree", "list").splitlines()) == 1
    assert list(scratch.iterdir()) == []


@pytest.mark.bad_input
def test_fork_rejecting_applypatch_msg_hook_is_named(series_space: Workspace, fork: Path):
    """A hook's refusal once read as "patch 1/3 ... does not apply"."""
    hook = fork / ".git" / "hooks" / "applypatch-msg"
    hook.write_text('#!/bin/sh\necho "applypatch-msg: subjects must name a ticket" >&2\nexit 1\n')
    hook.chmod(0o755)
    error = _refused(series_space, fork)
    assert "git am stopped at patch 1/3" in error and "applies cleanly" in error
    assert "applypatch-msg: subjects must name a ticket" in error
    assert "does not apply" not in error


@pytest.mark.bad_input
def test_fork_without_a_git_identity_says_so(series_space: Workspace, fork: Path):
    """No user.name/user.email (HOME unset; auto-detection off, so that it fails
    on any host): git's complaint, not "does not apply"."""
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "HOME": "",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "user.useConfigOnly",
        "GIT_CONFIG_VALUE_0": "true",
    }
    error = _refused(series_space, fork, env=env)
    assert "applies cleanly" in error and "set user.name and user.email" in error
    assert "does not apply" not in error


@pytest.mark.bad_input
def test_fork_apply_refuses_the_tools_own_base_tree(series_space: Workspace):
    series_space.ok("apply")
    base = series_space.build / "base"
    before = snapshot(base)
    error = one_error_line(series_space.tool("apply", "--sglang-dir", str(base)))
    assert f"{base} is a tree of sglpatch's own" in error
    assert snapshot(base) == before and git(base, "status", "--porcelain") == ""


@pytest.mark.bad_input
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_fork_apply_interrupted_as_the_branch_is_made(series_space, fork, tmp_path, signum):
    """Stopped right after `git branch`, the new branch once stayed, not checked
    out, and the next apply refused it. Signalled while git checks the branch out
    (its post-checkout hook): the apply finishes as a whole, says so, names the
    branch and exits 0 (it exited 128+n, as if it had not finished)."""
    gate = Gate.create(tmp_path / "gate")
    gate.hook(fork, "post-checkout")
    gate.arm(2)  # 1: the scratch worktree's checkout; 2: the new branch's
    running = series_space.start("apply", "--sglang-dir", str(fork))
    gate.wait_inside(running)
    interrupt(running, signum)
    gate.release()
    code = running.wait()
    output = running.output()
    assert code == 0, output
    assert f"on new branch {BRANCH}: 3 commit(s)" in output
    assert f"{signum.name} came as branch {BRANCH} was made: the apply had finished" in output
    assert "Traceback" not in output and "interrupted by" not in output
    assert git(fork, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"
    assert git(fork, "rev-list", "--count", "main..HEAD") == "3"
    assert len(git(fork, "worktree", "list").splitlines()) == 1


@pytest.mark.bad_input
def test_two_fork_applies_at_once(series_space: Workspace, fork: Path, tmp_path: Path):
    """Both once said "on new branch"; now the second is refused while the
    first holds the checkout's lock."""
    gate = Gate.create(tmp_path / "gate")
    gate.hook(fork, "pre-applypatch")
    gate.arm(1)
    first = series_space.start("apply", "--sglang-dir", str(fork))
    gate.wait_inside(first)
    error = one_error_line(series_space.tool("apply", "--sglang-dir", str(fork)))
    assert f"another sglpatch apply is running on {fork} (pid {first.proc.pid}" in error
    gate.release()
    assert first.wait() == 0, first.output()
    assert git(fork, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH}"


@pytest.mark.bad_input
def test_the_readmes_branch_names_match_the_series():
    """The README's example branch sglpatch/v0.5.23-3-patches was once made as
    -4-patches. A branch name with a count must have the series' count."""
    from sgltest import ROOT

    from sglpatch import series as series_mod
    from sglpatch.layout import Layout

    for readme in (ROOT / "README.md", ROOT / "scripts" / "sglpatch" / "README.md"):
        for match in re.finditer(r"sglpatch/v(\d+\.\d+\.\d+)-(\d+)-patches", readme.read_text()):
            layout = Layout.create(base=f"v{match[1]}")
            count = len(series_mod.load(layout.patches))
            assert int(match[2]) == count, f"{readme.name}: {match[0]}, but {count} patch(es)"
