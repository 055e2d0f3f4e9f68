"""``sglpatch apply``: the build tree from the pinned wheel plus the series."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from sgltest import (
    BASE_COMMIT,
    PIN,
    TARGET,
    Workspace,
    commit_all,
    drop_root_powers,
    edit_target,
    git,
    limit_file_size,
    one_error_line,
    run,
    write_series,
)


def test_apply_lays_out_the_whole_package(workspace: Workspace, pinned_wheel: Path):
    workspace.ok("apply")
    tree = workspace.tree
    with zipfile.ZipFile(pinned_wheel) as archive:
        files = [n for n in archive.namelist() if n.startswith("sglang/") and n[-1] != "/"]
    committed = git(tree, "ls-files", "python/sglang").splitlines()
    assert sorted(committed) == sorted(f"python/{name}" for name in files)
    assert (tree / "python/sglang/jit_kernel/include").is_dir()
    assert git(tree, "rev-parse", f"HEAD:{TARGET}") == PIN.target_blob
    assert git(tree, "rev-parse", "base/v0.5.12") == BASE_COMMIT
    assert git(tree, "symbolic-ref", "HEAD") == "refs/heads/patched"
    assert git(tree, "status", "--porcelain") == ""


def test_base_commit_is_deterministic(workspace: Workspace, tmp_path_factory, pinned_wheel):
    workspace.ok("apply")
    other = Workspace.create(tmp_path_factory.mktemp("other"), pinned_wheel)
    other.ok("apply")
    assert workspace.head() == other.head() == BASE_COMMIT
    log = git(
        workspace.tree,
        "log",
        "-1",
        "--format=%an <%ae> %ad|%cn <%ce> %cd",
        "--date=iso",
    )
    release = "SGLang release <release@sglang.invalid> 2026-05-16 00:00:00 +0000"
    assert log == f"{release}|{release}"
    message = git(workspace.tree, "log", "-1", "--format=%B")
    assert PIN.wheel in message and PIN.wheel_sha256 in message and "0.5.12" in message


def test_base_worktree_and_trees(workspace: Workspace):
    workspace.ok("apply")
    base = workspace.build / "base"
    assert git(base, "rev-parse", "HEAD") == BASE_COMMIT
    assert (base / TARGET).is_file()
    out = workspace.ok("trees").stdout.splitlines()
    assert out == [
        f"base={(base / 'python').resolve()}",
        f"patched={(workspace.tree / 'python').resolve()}",
    ]


def test_patches_become_one_commit_each(workspace: Workspace, raw_patches: Path):
    names = workspace.use_patches(raw_patches)
    workspace.ok("apply")
    tree = workspace.tree
    log = git(
        tree,
        "log",
        "--reverse",
        "--format=%an|%ad|%s|%cn",
        "--date=iso",
        "base/v0.5.12..",
    )
    assert log.splitlines() == [
        "Alice Dev|2026-06-01 10:00:00 +0200|[perf] Skip a needless fill|sglpatch",
        "Bob Dev|2026-06-02 11:30:00 +0000|[fix] Add a helper|sglpatch",
        "Alice Dev|2026-06-03 09:15:00 -0700|[feat] Add a note module|sglpatch",
    ]
    assert len(names) == 3
    # Committer dates equal author dates, so the commit ids are reproducible.
    assert git(tree, "log", "-1", "--format=%cd") == git(tree, "log", "-1", "--format=%ad")
    assert git(workspace.build / "base", "rev-parse", "HEAD") == BASE_COMMIT


def test_apply_prints_a_line_per_patch_and_how_to_read_the_series(
    workspace: Workspace, raw_patches: Path
):
    workspace.use_patches(raw_patches)
    lines = workspace.ok("apply").stderr.splitlines()
    start = lines.index(
        f"sglpatch: {workspace.tree} is on branch patched: base/v0.5.12 + 3 patch(es)"
    )
    assert lines[start + 1 : start + 5] == [
        "  0001 [perf] Skip a needless fill (trtllm_mla_backend.py +1 -1)",
        "  0002 [fix] Add a helper (trtllm_mla_backend.py +4 -0)",
        "  0003 [feat] Add a note module (sglpatch_note.py +3 -0)",
        f"  read it: git -C {workspace.tree} log -p base/v0.5.12..patched",
    ]
    again = workspace.ok("apply").stderr
    assert f"up to date (read it: git -C {workspace.tree} log -p base/v0.5.12..patched)" in again


def test_patched_commits_are_deterministic(workspace, raw_patches, tmp_path_factory, pinned_wheel):
    workspace.use_patches(raw_patches)
    workspace.ok("apply")
    other = Workspace.create(tmp_path_factory.mktemp("again"), pinned_wheel)
    other.use_patches(raw_patches)
    other.ok("apply")
    assert workspace.head() == other.head()


def test_rerun_is_a_no_op(workspace: Workspace, raw_patches: Path):
    workspace.use_patches(raw_patches)
    workspace.ok("apply")
    head, target = workspace.head(), workspace.tree / TARGET
    before = target.stat().st_mtime_ns
    proc = workspace.ok("apply")
    assert "up to date" in proc.stderr
    assert workspace.head() == head and target.stat().st_mtime_ns == before


def test_changed_patch_rebuilds(workspace: Workspace, raw_patches: Path):
    names = workspace.use_patches(raw_patches)
    workspace.ok("apply")
    old_head = workspace.head()
    patch = workspace.patches / names[1]
    patch.write_text(patch.read_text().replace("return 42", "return 43"))
    workspace.ok("apply")
    assert workspace.head() != old_head
    assert "return 43" in (workspace.tree / TARGET).read_text()
    assert git(workspace.tree, "rev-list", "--count", "base/v0.5.12..") == "3"


@pytest.mark.bad_input
def test_failing_patch_leaves_last_good_commit(workspace: Workspace, raw_patches: Path):
    names = workspace.use_patches(raw_patches)
    bad = workspace.patches / names[1]
    # Break the context of the hunk that appends the helper.
    lines = bad.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("@@")) + 1
    lines[at] = " this context line does not exist\n"
    bad.write_text("".join(lines))
    error = one_error_line(workspace.tool("apply"))
    assert names[1] in error and TARGET in error and "hunk #1 of 1" in error
    tree = workspace.tree
    assert git(tree, "log", "-1", "--format=%s") == "[perf] Skip a needless fill"
    assert git(tree, "status", "--porcelain", "--untracked-files=no") == ""
    assert not (tree / ".git" / "rebase-apply").exists()
    stamp = json.loads((tree / ".git" / "sglpatch-stamp").read_text())
    assert stamp["complete"] is False
    # Fixing the series makes the next apply rebuild completely.
    workspace.use_patches(raw_patches)
    workspace.ok("apply")
    assert git(tree, "rev-list", "--count", "base/v0.5.12..") == "3"


@pytest.mark.bad_input
def test_a_corrupt_binary_hunk_is_named_with_its_file(workspace: Workspace):
    """A patch whose binary hunk is damaged: git am said "No valid patches in input"
    after git's "corrupt binary patch at line N"; the error names git's reason, the
    file whose hunk it is and the patch file."""
    workspace.ok("apply")
    tree = workspace.tree
    blob = tree / "python/sglang/srt/table.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    commit_all(tree, "Dev <dev@example.com>", "Add a table", "2026-06-05T00:00:00Z")
    git(tree, "format-patch", "-q", "--binary", "-o", str(workspace.root / "out"), "HEAD~1")
    git(tree, "reset", "-q", "--hard", "HEAD~1")
    (made,) = (workspace.root / "out").glob("*.patch")
    lines = made.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("literal ")) + 2
    lines[at] = "z" + "!" * (len(lines[at]) - 2) + "\n"  # no longer base85
    (workspace.patches / made.name).write_text("".join(lines))
    write_series(workspace.patches, [made.name])
    error = one_error_line(workspace.tool("apply"))
    found = re.search(r"does not apply: (\S+): corrupt binary patch at line (\d+) of (\S+);", error)
    assert found and found[1] == "python/sglang/srt/table.bin" and found[3] == made.name, error
    assert at < int(found[2]) <= len(lines)  # git's line, in the hunk or at its end
    assert "No valid patches" not in error


@pytest.mark.bad_input
def test_local_commits_are_kept_and_protected(workspace: Workspace, raw_patches: Path):
    names = workspace.use_patches(raw_patches)
    workspace.ok("apply")
    edit_target(workspace.tree, "import logging\n", "import logging  # local work\n")
    commit_all(workspace.tree, "Dev <dev@example.com>", "Local work", "2026-06-05T00:00:00Z")
    head = workspace.head()
    assert "not in patches/" in workspace.ok("apply").stderr
    assert workspace.head() == head
    (workspace.patches / names[2]).unlink()
    write_series(workspace.patches, names[:2])
    error = one_error_line(workspace.tool("apply"))
    assert "1 commit(s) not in patches/" in error and "make export" in error
    assert workspace.head() == head


@pytest.mark.bad_input
def test_checksum_mismatch_is_refused_and_nothing_deleted(workspace: Workspace):
    cached = workspace.build / "cache" / PIN.wheel
    cached.unlink()
    cached.write_bytes(b"not the wheel")
    mine = workspace.build / "my-notes.txt"
    mine.write_text("keep me")
    error = one_error_line(workspace.tool("apply"))
    assert f"checksum mismatch for {cached}" in error
    assert PIN.wheel_sha256 in error
    actual = hashlib.sha256(b"not the wheel").hexdigest()
    assert actual in error
    aside = cached.with_name(f"{PIN.wheel}.bad-{actual[:12]}")
    assert aside.read_bytes() == b"not the wheel" and mine.read_text() == "keep me"
    assert not workspace.tree.exists()


@pytest.mark.bad_input
def test_pip_failure_names_package_version_and_file(workspace: Workspace):
    (workspace.build / "cache" / PIN.wheel).unlink()
    error = one_error_line(workspace.tool("apply"))
    assert "pip could not fetch sglang==0.5.12" in error and PIN.wheel in error
    assert "No matching distribution" in error or "satisfies the requirement" in error


@pytest.mark.bad_input
def test_unknown_source(workspace: Workspace):
    error = one_error_line(workspace.tool("apply", "--source", "tarball"))
    assert "unknown --source 'tarball'" in error


@pytest.mark.bad_input
def test_missing_git(workspace: Workspace, tmp_path: Path):
    empty = tmp_path / "nobin"
    empty.mkdir()
    error = one_error_line(workspace.tool("apply", env={"PATH": str(empty)}))
    assert "git not found" in error


@pytest.mark.bad_input
def test_series_entry_without_file(workspace: Workspace):
    write_series(workspace.patches, ["0001-missing.patch"])
    error = one_error_line(workspace.tool("apply"))
    assert "0001-missing.patch is listed but" in error


@pytest.mark.bad_input
def test_foreign_build_tree_is_not_touched(workspace: Workspace):
    workspace.tree.mkdir(parents=True)
    (workspace.tree / "mine.txt").write_text("x")
    error = one_error_line(workspace.tool("apply"))
    assert "not made by sglpatch" in error
    assert (workspace.tree / "mine.txt").read_text() == "x"


@pytest.mark.bad_input
def test_cli_usage_errors_are_one_line(workspace: Workspace):
    error = one_error_line(workspace.tool("frobnicate"))
    assert "invalid choice" in error


def test_tree_path_overrides(workspace: Workspace, tmp_path: Path):
    env = {
        "SGLPATCH_BASE_TREE": str(tmp_path / "b"),
        "SGLPATCH_PATCHED_TREE": str(tmp_path),
    }
    out = workspace.ok("trees", env=env).stdout.splitlines()
    assert out == [f"base={tmp_path / 'b'}", f"patched={tmp_path}"]
    from sglpatch.trees import tree_paths

    trees = tree_paths(workspace.build_root, workspace.base)
    assert trees.patched == (workspace.build / "sglang" / "python").resolve()


@pytest.mark.bad_input
def test_rebasing_a_failed_patch_then_export(workspace: Workspace, raw_patches: Path):
    """The maintainer's flow after a conflict: git am -3 the rest, resolve, export."""
    names = workspace.use_patches(raw_patches)
    bad = workspace.patches / names[0]
    text = bad.read_text().replace("\n import logging\n", "\n import logging_x\n")
    index = next(line for line in text.splitlines() if line.startswith("index "))
    bad.write_text(text.replace(index, "index 1111111..2222222 100755"))
    error = one_error_line(workspace.tool("apply"))
    assert "git am -3" in error and names[2] in error
    refused = one_error_line(workspace.tool("export"))
    assert "0 of its 3 patches" in refused
    assert (workspace.patches / names[2]).exists()
    for name in names:  # what the message says to do, with the original patch
        patch = raw_patches / name
        assert run(["git", "am", "-3", str(patch)], cwd=workspace.tree).returncode == 0
        if name == names[0]:  # apply meanwhile leaves that work alone, and says so
            assert "patches unchanged, tree left as is" in workspace.ok("apply").stderr
    workspace.ok("export")
    assert len(list(workspace.patches.glob("*.patch"))) == 3
    assert "up to date" in workspace.ok("apply").stderr
    workspace.ok("check-patches")


@pytest.mark.bad_input
def test_wheel_whose_target_is_not_the_pinned_blob(workspace: Workspace):
    """A wheel that matches the pin's sha256 (the pin was edited) but whose target
    file is another blob: refused, as the git source is."""
    cached = workspace.build / "cache" / PIN.wheel
    cached.unlink()
    with zipfile.ZipFile(cached, "w") as archive:
        archive.writestr("sglang/__init__.py", "")
        archive.writestr(TARGET.removeprefix("python/"), "# not the release\n")
    sha = hashlib.sha256(cached.read_bytes()).hexdigest()
    pin = workspace.patches / "base.toml"
    pin.write_text(pin.read_text().replace(PIN.wheel_sha256, sha))
    error = one_error_line(workspace.tool("apply"))
    assert TARGET in error and PIN.target_blob in error and "target_blob disagree" in error
    assert not workspace.tree.exists()


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "kind", ["series-not-utf8", "series-bom", "series-invisible", "series-folder", "pin-folder"]
)
def test_unreadable_inputs_are_one_line(workspace: Workspace, kind: str):
    """A series saved with a UTF-8 BOM was "series line 1: \\ufeff# Patches ... is not
    a plain file name", the BOM printed raw: it is named; an invisible character in
    an entry is shown escaped."""
    if kind == "series-not-utf8":
        (workspace.patches / "series").write_bytes(b"0001-caf\xe9.patch\n")
        expected = "is not UTF-8 text (line 1)"
    elif kind == "series-bom":
        (workspace.patches / "series").write_bytes(b"\xef\xbb\xbf# Patches\n0001-a.patch\n")
        expected = "starts with a UTF-8 byte order mark (BOM, bytes EF BB BF)"
    elif kind == "series-invisible":
        (workspace.patches / "0001-a.patch").write_text("x")
        (workspace.patches / "series").write_text("0001-a.patch\u200b\n")
        expected = "series line 1: '0001-a.patch\\u200b' is not a plain file name"
    elif kind == "series-folder":
        (workspace.patches / "series").mkdir()
        expected = "series is not a file"
    else:
        (workspace.patches / "base.toml").unlink()
        (workspace.patches / "base.toml").mkdir()
        expected = "cannot be read: Is a directory"
    error = one_error_line(workspace.tool("apply"))
    assert expected in error and error.isprintable(), error
    assert not workspace.tree.exists()


def _root_obeys_modes(folder: Path) -> bool:
    """Whether a child (root without its override powers) cannot write to ``folder``."""
    probe = [sys.executable, "-c", f"open({str(folder / 'p')!r}, 'w')"]
    try:
        return run(probe, preexec=drop_root_powers).returncode != 0
    except (OSError, subprocess.SubprocessError):  # the powers could not be dropped
        return False


@pytest.mark.bad_input
def test_read_only_cache(workspace: Workspace):
    cache = workspace.build / "cache"
    (cache / PIN.wheel).unlink()
    cache.chmod(0o555)
    try:
        if not _root_obeys_modes(cache):
            pytest.skip("this user writes to read-only folders")
        proc = workspace.tool("apply", preexec=drop_root_powers)
    finally:
        cache.chmod(0o755)
    error = one_error_line(proc)
    assert "Permission denied" in error and str(cache) in error and "make it writable" in error
    assert not workspace.tree.exists() and list(cache.iterdir()) == []


@pytest.mark.bad_input
def test_full_disk(workspace: Workspace):
    """Writes stop at 256 KiB (RLIMIT_FSIZE: EFBIG, as ENOSPC would): one line,
    and no half-made tree is left."""
    error = one_error_line(workspace.tool("apply", preexec=limit_file_size(256 << 10)))
    assert "File too large" in error and "free some space" in error
    assert sorted(p.name for p in workspace.build.iterdir()) == [".sglpatch.lock", "cache"]


@pytest.mark.bad_input
def test_a_wrong_pin_is_suspected_on_the_second_mismatch(workspace: Workspace, tmp_path: Path):
    """A wrong wheel_sha256 once moved the good wheel aside on every run and said
    "run again". The second mismatch, of a fresh download, names the pin."""
    links = tmp_path / "links"
    links.mkdir()
    shutil.copyfile(workspace.build / "cache" / PIN.wheel, links / PIN.wheel)
    pin = workspace.patches / "base.toml"
    wrong = "0" * 64
    pin.write_text(pin.read_text().replace(PIN.wheel_sha256, wrong))
    env = {"PIP_FIND_LINKS": str(links)}  # the "index": the real wheel
    first = one_error_line(workspace.tool("apply", env=env))
    assert "run again to download it afresh" in first
    second = one_error_line(workspace.tool("apply", env=env))
    assert "again: a fresh download has sha256" in second and wrong in second
    assert "the pin (wheel_sha256 in base.toml), may be wrong" in second
    aside = workspace.build / "cache" / f"{PIN.wheel}.bad-{PIN.wheel_sha256[:12]}"
    assert aside.is_file() and not workspace.tree.exists()


def _silent_index():
    """A server that accepts connections and never answers; its URL."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = []

    def serve() -> None:
        while True:
            try:
                accepted.append(server.accept())
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    return server, f"http://127.0.0.1:{server.getsockname()[1]}/simple/"


@pytest.mark.bad_input
@pytest.mark.parametrize("index", ["refused", "silent", "silent-bounded", "silent-pip-spellings"])
def test_a_download_without_network_names_the_cause(
    workspace: Workspace, tmp_path: Path, index: str
):
    """ "No matching distribution found" read as "no such version", and a silent
    index kept make apply quiet for 1089 s. pip's other spellings of its timeout
    (PIP_DEFAULT_TIMEOUT, a pip.conf) overrode the tool's (541 s): no longer."""
    (workspace.build / "cache" / PIN.wheel).unlink()
    server = None
    if index == "refused":
        url = "http://127.0.0.1:9/simple/"
    else:
        server, url = _silent_index()
    env = {"PIP_NO_INDEX": "0", "PIP_INDEX_URL": url, "PIP_FIND_LINKS": ""}
    env.update(PIP_RETRIES="0", PIP_TIMEOUT="1")
    if index == "silent-bounded":
        env.update(PIP_TIMEOUT="60", SGLPATCH_DOWNLOAD_TIMEOUT="3")
    if index == "silent-pip-spellings":
        (tmp_path / "pip.conf").write_text("[global]\ntimeout = 600\nretries = 5\n")
        env.update(PIP_DEFAULT_TIMEOUT="600", PIP_CONFIG_FILE=str(tmp_path / "pip.conf"))
        env.update(SGLPATCH_DOWNLOAD_TIMEOUT="60")  # a failure here waits 60 s, not 600
    try:
        proc = workspace.tool("apply", env=env)
    finally:
        if server is not None:
            server.close()
    error = one_error_line(proc)
    assert "sglpatch: pip: fetching sglang==0.5.12" in proc.stderr  # the progress line
    assert "pip could not fetch sglang==0.5.12" in error
    expected = {
        "refused": f"cannot reach {url} (Failed to establish a new connection: [Errno 111]",
        "silent": f"cannot reach {url} (Read timed out",
        "silent-bounded": "pip did not finish in 3 s",
        "silent-pip-spellings": f"cannot reach {url} (Read timed out",
    }[index]
    assert expected in error, error
