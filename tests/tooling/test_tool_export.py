"""``sglpatch export`` and ``check-patches``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sgltest import (
    TARGET,
    Workspace,
    commit_all,
    drop_root_powers,
    edit_target,
    git,
    one_error_line,
    run,
    wait_until,
    write_series,
)


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


def test_export_removes_the_patch_of_a_dropped_commit(workspace, canonical_patches):
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    (workspace.patches / "README.md").write_text("notes")
    git(workspace.tree, "reset", "-q", "--hard", "HEAD~1")
    assert f"removed {names[2]}" in workspace.ok("export").stderr
    assert _entries(workspace.patches) == names[:2]
    assert not (workspace.patches / names[2]).exists()
    assert (workspace.patches / "README.md").read_text() == "notes"
    assert (workspace.patches / "base.toml").exists()


def _all_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.bad_input
def test_export_refuses_an_unlisted_patch_file(workspace: Workspace, canonical_patches: Path):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    (workspace.patches / "0009-old.patch").write_text("not listed, maybe mine")
    before = _all_bytes(workspace.patches)
    error = one_error_line(workspace.tool("export"))
    assert "0009-old.patch is in" in error and "not listed in series" in error
    assert _all_bytes(workspace.patches) == before


@pytest.mark.bad_input
def test_export_refuses_a_patch_added_by_hand(workspace: Workspace, canonical_patches: Path):
    """patches/ gained a patch (listed in series) that build/sglang never saw, and the
    tree has a commit of its own: apply and export both refuse, nothing is lost."""
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    edit_target(workspace.tree, "import logging\n", "import logging  # tree work\n")
    commit_all(workspace.tree, "Eve <eve@example.com>", "[perf] Tree work", "2026-07-01T00:00Z")
    head = workspace.head()
    extra = (canonical_patches / names[2]).read_text().replace("note module", "hand note")
    (workspace.patches / "0004-x.patch").write_text(extra)
    write_series(workspace.patches, [*names, "0004-x.patch"])
    before = _all_bytes(workspace.patches)
    advice = one_error_line(workspace.tool("apply"))
    assert "1 commit(s) not in patches/" in advice and "git stash -- patches" in advice
    error = one_error_line(workspace.tool("export"))
    assert "was not built from" in error and "would overwrite that change" in error
    assert _all_bytes(workspace.patches) == before
    assert workspace.head() == head


@pytest.mark.bad_input
def test_export_refuses_a_hand_edited_patch(workspace: Workspace, canonical_patches: Path):
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    patch = workspace.patches / names[1]
    patch.write_text(patch.read_text().replace("Add a helper", "Add a better helper", 1))
    before = _all_bytes(workspace.patches)
    error = one_error_line(workspace.tool("export"))
    assert "make apply" in error and "would overwrite that change" in error
    assert _all_bytes(workspace.patches) == before


@pytest.mark.bad_input
@pytest.mark.parametrize("case", ["uncommitted", "rebase", "am", "other-branch"])
def test_export_refuses_unfinished_work(workspace: Workspace, canonical_patches: Path, case):
    names = workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    tree = workspace.tree
    if case == "uncommitted":
        edit_target(tree, "import logging\n", "import logging  # not committed\n")
        expected = [f"uncommitted changes to {TARGET}", "git commit --amend"]
    elif case == "rebase":
        env = {**os.environ, "GIT_SEQUENCE_EDITOR": "sed -i 1s/^pick/edit/"}
        assert run(["git", "rebase", "-q", "-i", "base/v0.5.12"], cwd=tree, env=env).returncode == 0
        expected = ["in the middle of a rebase", "git rebase --continue"]
    elif case == "am":
        patch = canonical_patches / names[0]
        assert run(["git", "am", "-q", str(patch)], cwd=tree).returncode != 0
        expected = ["in the middle of a git am", "git am --abort"]
    else:
        git(tree, "switch", "-q", "-c", "other")
        edit_target(tree, "import logging\n", "import logging  # other\n")
        commit_all(tree, "Eve <eve@example.com>", "[perf] Other", "2026-07-01T00:00Z")
        expected = ["is on branch other, not on patched", "git switch patched"]
    before = _all_bytes(workspace.patches)
    error = one_error_line(workspace.tool("export"))
    assert all(text in error for text in expected), error
    assert _all_bytes(workspace.patches) == before


def _commit_message(tree: Path, message: str, author: str = "Eve <eve@example.com>") -> str:
    with (tree / "python/sglang/sglpatch_round_trip.txt").open("a") as handle:
        handle.write(message)
    name, email = author.split(" <")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email.rstrip(">"),
        "GIT_AUTHOR_DATE": "2026-07-01T12:00:00+02:00",
    }
    assert run(["git", "add", "-A"], cwd=tree).returncode == 0
    proc = run(["git", "commit", "-q", "--cleanup=verbatim", "-m", message], cwd=tree, env=env)
    assert proc.returncode == 0, proc.stderr
    return git(tree, "rev-parse", "HEAD")


_UNREADABLE = {
    "re-subject": (
        "Re: [PATCH v2] Tune the fill\n",
        "would read its subject back as 'Tune the fill'",
    ),
    "dashes-in-body": (
        "[perf] Tune the fill\n\nWhy:\n---\nthis part would be lost\n",
        "would cut or reflow its message",
    ),
    "empty": ("[perf] Nothing\n", "changes no file"),
}


@pytest.mark.bad_input
@pytest.mark.parametrize("case", sorted(_UNREADABLE))
def test_export_refuses_what_git_am_cannot_read_back(workspace, canonical_patches, case):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    message, reason = _UNREADABLE[case]
    if case == "empty":
        git(workspace.tree, "commit", "-q", "--allow-empty", "-m", message)
        commit = workspace.head()
    else:
        commit = _commit_message(workspace.tree, message)
    before = _all_bytes(workspace.patches)
    error = one_error_line(workspace.tool("export"))
    assert f"commit {commit[:12]}" in error and reason in error and "git rebase -i" in error
    assert _all_bytes(workspace.patches) == before
    assert "would not survive" in one_error_line(workspace.tool("check-patches"))


def _commits(tree: Path) -> list[str]:
    fmt = "--format=%T %an <%ae> %ad%n%B%x00"
    return git(tree, "log", "--reverse", "--date=raw", fmt, "base/v0.5.12..patched").split("\0")


def test_export_and_apply_are_inverses(
    workspace, canonical_patches, tmp_path_factory, pinned_wheel
):
    """Unusual commits that git am reads back survive export + apply exactly; the
    ones it does not are refused, never written."""
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    tree = workspace.tree
    _commit_message(tree, "[perf][v2] Tüne the fill (EAGLE) for 'all' paths\n", "Jöhn Dœ <j@x.org>")
    _commit_message(tree, "[fix] A subject well over fifty-two characters, which gets cut\n")
    _commit_message(tree, "[doc] Body lines\n\ndiff is a word here; -- and - - - are not\n\nA: b\n")
    (tree / "python/sglang/blob.bin").write_bytes(bytes(range(256)) * 4)
    _commit_message(tree, "[feat] Add a binary file\n")
    good = workspace.head()
    _commit_message(tree, _UNREADABLE["re-subject"][0])
    _commit_message(tree, _UNREADABLE["dashes-in-body"][0])
    error = one_error_line(workspace.tool("export"))
    assert error.count("commit ") == 2 and "2 commit(s)" in error
    git(tree, "reset", "-q", "--hard", good)
    workspace.ok("export")
    exported = _patch_bytes(workspace.patches)
    assert len(exported) == 7
    again = Workspace.create(tmp_path_factory.mktemp("inverse"), pinned_wheel)
    again.use_patches(workspace.patches)
    again.ok("apply")
    assert _commits(again.tree) == _commits(tree)
    again.ok("export")
    assert _patch_bytes(again.patches) == exported
    assert _entries(again.patches) == _entries(workspace.patches) == list(exported)
    again.ok("check-patches")


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


@pytest.mark.bad_input
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


@pytest.mark.bad_input
def test_check_patches_finds_a_patch_that_is_not_canonical(workspace, raw_patches):
    names = workspace.use_patches(raw_patches)
    workspace.ok("apply")
    err = _failed(workspace)
    assert f"{names[0]}: differs from a fresh export" in err
    assert "make apply export" in err


@pytest.mark.bad_input
def test_check_patches_finds_unexported_commits(workspace, canonical_patches):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    edit_target(workspace.tree, "import logging\n", "import logging  # new\n")
    commit_all(workspace.tree, "Eve <eve@example.com>", "[perf] New work", "2026-07-01T00:00Z")
    assert "0004-perf-New-work.patch: a fresh export adds it" in _failed(workspace)


@pytest.mark.bad_input
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


@pytest.fixture
def renumbered(workspace: Workspace, canonical_patches: Path) -> Workspace:
    """A tree whose first patch was dropped: export renumbers the other two."""
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    git(workspace.tree, "rebase", "-q", "--onto", "base/v0.5.12", "HEAD~2")
    return workspace


def _state(directory: Path) -> tuple[list[str], dict[str, bytes]]:
    return _entries(directory), _patch_bytes(directory)


@pytest.mark.bad_input
def test_an_export_to_a_read_only_patches_dir_changes_nothing(renumbered: Workspace):
    """A read-only patches/: the error said "pick another --build" (a build
    folder's advice), and once writable the next command said the export "was
    interrupted". Now one line about patches/; nothing changed, nothing recorded."""
    space = renumbered
    before = _state(space.patches)
    space.patches.chmod(0o555)
    try:
        probe = run(
            [sys.executable, "-c", f"open({str(space.patches / 'p')!r}, 'w')"],
            preexec=drop_root_powers,
        )
        if probe.returncode == 0:
            pytest.skip("this user writes to read-only folders")
        proc = space.tool("export", preexec=drop_root_powers)
    finally:
        space.patches.chmod(0o755)
    error = one_error_line(proc)
    assert f"cannot write the series to {space.patches}: Permission denied" in error, error
    assert "nothing was changed there" in error and "--build" not in error
    assert _state(space.patches) == before
    assert not (space.build / ".export-pending").exists()
    proc = space.ok("export")
    assert "interrupted" not in proc.stderr and "failed" not in proc.stderr
    assert _entries(space.patches) == [
        "0001-fix-Add-a-helper.patch",
        "0002-feat-Add-a-note-module.patch",
    ]


@pytest.mark.bad_input
def test_an_export_a_fault_stops_half_way_says_so_and_is_finished_later(renumbered: Workspace):
    """A fault after the first file (the second's place is taken by a folder): one
    line saying the record stays; the next command finishes it and says it had
    failed (not "was interrupted")."""
    space = renumbered
    obstacle = space.patches / ".0002-feat-Add-a-note-module.patch.sglpatch-new"
    obstacle.mkdir()
    error = one_error_line(space.tool("export"))
    assert f"the export to {space.patches} stopped before it finished: Is a directory" in error
    assert "the next sglpatch command" in error
    assert (space.build / ".export-pending" / "failed").is_file()
    obstacle.rmdir()
    proc = space.ok("check-patches")
    assert (
        f"finished the `make export` to {space.patches} that failed (Is a directory" in proc.stderr
    )
    assert "interrupted" not in proc.stderr
    assert not (space.build / ".export-pending").exists()


@pytest.mark.bad_input
def test_an_export_cut_short_is_finished_by_the_next_command(
    renumbered: Workspace, monkeypatch: pytest.MonkeyPatch
):
    """Killed after it wrote one patch file (series not yet, nor the
    stamp), export left a mix that every command refused. The next command
    finishes the recorded export: patches/ is the new series as a whole."""
    import shutil

    from sglpatch import export as export_mod
    from sglpatch.layout import Layout

    space = renumbered
    layout = Layout.create(space.build_root, space.patches, base=space.base)
    real, calls = shutil.copyfile, []

    def copy_then_die(source, dest, *args, **kwargs):
        if calls:
            raise SystemExit("killed")  # stands in for SIGKILL after the first file
        calls.append(dest)
        return real(source, dest, *args, **kwargs)

    monkeypatch.setattr(export_mod.shutil, "copyfile", copy_then_die)
    with pytest.raises(SystemExit):
        export_mod.export_series(layout)
    monkeypatch.undo()
    assert (space.build / export_mod.PENDING).is_dir()
    assert _entries(space.patches) != ["0001-fix-Add-a-helper.patch"]  # a mix, for now
    proc = space.ok("check-patches")
    assert "finished the `make export`" in proc.stderr and "interrupted" in proc.stderr
    assert _entries(space.patches) == [
        "0001-fix-Add-a-helper.patch",
        "0002-feat-Add-a-note-module.patch",
    ]
    assert sorted(_patch_bytes(space.patches)) == _entries(space.patches)
    assert not (space.build / export_mod.PENDING).exists()
    assert "up to date" in space.ok("apply").stderr


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "signum",
    [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
    ids=["sigint", "sigterm", "sigkill"],
)
def test_an_interrupted_export_leaves_the_old_series_or_the_new(renumbered: Workspace, signum):
    """Signalled the moment its record appears (while it writes patches/): the old
    series or the new one, never an empty series or a mix once the next command ran."""
    space = renumbered
    old = _state(space.patches)
    running = space.start("export")
    pending = space.build / ".export-pending"
    wait_until(lambda: pending.exists() or running.proc.poll() is not None, what="the record")
    if running.proc.poll() is None:  # else it was done first: the new series
        try:
            running.signal(signum, group=True)
        except ProcessLookupError:
            pass
    running.wait()
    assert "Traceback" not in running.output()
    if signum != signal.SIGKILL:
        assert not pending.exists()
        assert (space.patches / "series").stat().st_size > 0
        assert _state(space.patches) == old or len(_entries(space.patches)) == 2
    space.ok("check-patches")  # finishes what a kill left
    assert len(_entries(space.patches)) == 2
    assert sorted(_patch_bytes(space.patches)) == _entries(space.patches)


@pytest.mark.bad_input
def test_a_message_with_raw_non_utf8_bytes_is_named(workspace: Workspace):
    """Once refused with the reason for '---' lines, which it has none of."""
    workspace.ok("apply")
    tree = workspace.tree
    edit_target(tree, "import logging\n", "import logging  # latin-1\n")
    commit_all(tree, "Dev <dev@example.com>", "Cafe fix", "2026-07-01T00:00Z")
    # git commit re-encodes a Latin-1 message: write the raw bytes in the object.
    raw = run(["git", "cat-file", "commit", "HEAD"], cwd=tree).stdout.encode()
    headers = raw.partition(b"\n\n")[0]
    latin = headers + b"\n\nCaf\xe9 fix\n\nBody in Latin-1: na\xefve.\n"
    made = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=tree,
        input=latin,
        capture_output=True,
        check=True,
    )
    git(tree, "update-ref", "HEAD", made.stdout.decode().strip())
    error = one_error_line(workspace.tool("export"))
    assert "its message is not UTF-8 (raw bytes on line 1" in error
    assert "---" not in error
