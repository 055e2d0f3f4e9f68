"""Unit tests of the small sglpatch modules: pin, series, safezip, patchinfo."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest
from sgltest import PIN, ROOT

from sglpatch import findings, makevars, pipfetch, pyversion, safezip, series
from sglpatch.bundle import read_requirements
from sglpatch.digest import git_blob_id
from sglpatch.errors import UserError
from sglpatch.export import slug
from sglpatch.patchinfo import describe_failure, parse, touched_files
from sglpatch.pin import check_version, load_pin
from sglpatch.safezip import extract_package
from sglpatch.upstream import wheel_target

PATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A <a@example.com>
Subject: [PATCH] [perf] Two hunks and a new file

diff --git a/pkg/mod.py b/pkg/mod.py
index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -3,6 +3,7 @@ import os
 a
+b
@@ -120,7 +121,9 @@ def f():
 c
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1 @@
+x = 1
diff --git a/pkg/gone.py b/pkg/gone.py
deleted file mode 100644
--- a/pkg/gone.py
+++ /dev/null
@@ -1 +0,0 @@
-y = 2
"""


def test_real_pin_loads():
    assert PIN.version == "0.5.12" and PIN.base_tag == "base/v0.5.12"
    assert PIN.wheel.startswith("sglang-0.5.12-")


@pytest.mark.parametrize(
    "edit, message",
    [
        (('wheel_sha256 = "4ed7', 'wheel_sha256 = "XYZ'), "wheel_sha256"),
        (('released = "2026-05-16"', 'released = "May"'), "released"),
        (('target_blob = "', '#target_blob = "'), "lacks target_blob"),
    ],
)
@pytest.mark.bad_input
def test_bad_pin_is_refused(tmp_path: Path, edit, message):
    text = PIN.raw.decode().replace(*edit)
    (tmp_path / "base.toml").write_text(text)
    with pytest.raises(UserError, match=message):
        load_pin(tmp_path / "base.toml")


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "field, value, message",
    [
        ("wheel", "sglang-0.5.12-/../../../outside.whl", "is not a wheel file name"),
        ("wheel", "sglang-0.5.12-cp311-cp311-x/../../y.whl", "is not a wheel file name"),
        ("target", "python/../../etc/passwd", "is not a relative path"),
        ("target", "/etc/passwd", "is not a relative path"),
        ("tag", "--upload-pack=touch x", "is not a plain tag name"),
        ("repository", "--upload-pack=touch x", "is not a URL"),
    ],
)
def test_pin_names_cannot_leave_their_place(tmp_path: Path, field, value, message):
    old = getattr(PIN, field)
    (tmp_path / "base.toml").write_text(PIN.raw.decode().replace(f'"{old}"', f'"{value}"'))
    with pytest.raises(UserError, match=message):
        load_pin(tmp_path / "base.toml")


@pytest.mark.bad_input
def test_pin_file_that_is_a_folder(tmp_path: Path):
    (tmp_path / "base.toml").mkdir()
    with pytest.raises(UserError, match="cannot be read"):
        load_pin(tmp_path / "base.toml")


@pytest.mark.bad_input
@pytest.mark.parametrize("version", ["0.5", "latest", "0.5.13; rm -rf /", ""])
def test_bad_version_is_refused(version):
    with pytest.raises(UserError, match="bad version"):
        check_version(version)


def test_series_parsing_ignores_comments_and_blanks(tmp_path: Path):
    for name in ("0001-a.patch", "0002-b.patch"):
        (tmp_path / name).write_text("x")
    (tmp_path / "series").write_text(
        "# header\n\n0001-a.patch\n  # indented comment\n0002-b.patch # why\n"
    )
    assert series.load(tmp_path).names == ("0001-a.patch", "0002-b.patch")


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", ["not-utf8", "folder"])
def test_unreadable_series_is_one_user_error(tmp_path: Path, kind: str):
    if kind == "folder":
        (tmp_path / "series").mkdir()
        message = "is not a file"
    else:
        (tmp_path / "series").write_bytes(b"# ok\n0001-caf\xe9.patch\n")
        message = "is not UTF-8 text \\(line 2\\)"
    with pytest.raises(UserError, match=message):
        series.load(tmp_path)


def test_series_absent_is_empty(tmp_path: Path):
    assert len(series.load(tmp_path)) == 0


@pytest.mark.bad_input
def test_series_problems_are_all_listed(tmp_path: Path):
    (tmp_path / "0001-a.patch").write_text("x")
    (tmp_path / "0003-c.patch").write_text("x")
    (tmp_path / "series").write_text("0001-a.patch\n0002-missing.patch\n0001-a.patch\n")
    found = series.problems(tmp_path)
    assert any("0002-missing.patch is listed but" in p for p in found)
    assert any("0001-a.patch is listed twice" in p for p in found)
    assert any("0003-c.patch is in" in p and "not listed" in p for p in found)
    with pytest.raises(UserError, match="0002-missing.patch"):
        series.load(tmp_path)


def _zip(path: Path, entries: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16 if name.endswith(".sh") else 0
            archive.writestr(info, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
    return path


@pytest.mark.parametrize(
    "bad",
    ["sglang/../../x", "../x", "/etc/evil", "sglang/..\\..\\x", "C:/x"],
)
@pytest.mark.bad_input
def test_unsafe_zip_entries_are_refused(tmp_path: Path, bad: str):
    wheel = _zip(tmp_path / "w.whl", {"sglang/ok.py": b"1", bad: b"evil"})
    dest = tmp_path / "dest"
    with pytest.raises(UserError, match="unsafe entry"):
        extract_package(wheel, "sglang", dest)
    assert not dest.exists() or not any(dest.rglob("*"))
    assert not (tmp_path / "x").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("alias", ["sglang//a.py", "sglang/./a.py", "./sglang/a.py"])
def test_zip_names_that_would_collapse_are_refused(tmp_path: Path, alias: str):
    wheel = _zip(tmp_path / "w.whl", {"sglang/a.py": b"first", alias: b"second"})
    with pytest.raises(UserError, match="not a canonical path"):
        extract_package(wheel, "sglang", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "names, message",
    [
        (["sglang/x", "sglang/x/y"], "is inside 'sglang/x', which is a file"),
        (["sglang/x/y", "sglang/x"], "is both a file and a folder"),
    ],
    ids=["file-then-folder", "folder-then-file"],
)
def test_zip_entry_both_file_and_folder_is_refused(tmp_path: Path, names, message):
    wheel = _zip(tmp_path / "w.whl", dict.fromkeys(names, b"x"))
    with pytest.raises(UserError, match=message):
        extract_package(wheel, "sglang", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


@pytest.mark.bad_input
def test_zip_bomb_is_refused_before_writing(tmp_path: Path):
    """64 MiB of zeros deflate to 64 KiB: refused by the ratio limit, nothing written."""
    wheel = tmp_path / "bomb.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("sglang/__init__.py", b"")
        with archive.open("sglang/zeros.bin", "w", force_zip64=True) as out:
            for _ in range(64):
                out.write(bytes(1 << 20))
    assert wheel.stat().st_size < 1 << 20
    with pytest.raises(UserError, match="over 100:1"):
        extract_package(wheel, "sglang", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("limit, value", [("MAX_ENTRY_BYTES", 2000), ("MAX_TOTAL_BYTES", 4000)])
def test_zip_size_limits(tmp_path: Path, monkeypatch, limit: str, value: int):
    """Two 3000-byte entries: one is over an entry limit of 2000, both over 4000."""
    noise = bytes((n * 7919) % 251 for n in range(3000))  # does not compress much
    wheel = _zip(tmp_path / "w.whl", {"sglang/a.py": noise, "sglang/b.py": noise})
    monkeypatch.setattr(safezip, limit, value, raising=False)
    with pytest.raises(UserError, match="limit|more than"):
        extract_package(wheel, "sglang", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


@pytest.mark.bad_input
@pytest.mark.bad_input
def test_pips_limits_are_the_tools_unless_pip_timeout_or_retries_say(monkeypatch):
    """PIP_DEFAULT_TIMEOUT (pip's other spelling) does not replace the tool's 30 s;
    PIP_TIMEOUT and PIP_RETRIES do; a bad value is one line."""
    for name in ("PIP_TIMEOUT", "PIP_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "600")
    assert pipfetch.pip_limits() == ["--timeout", "30", "--retries", "2"]
    monkeypatch.setenv("PIP_TIMEOUT", "2.5")
    monkeypatch.setenv("PIP_RETRIES", "0")
    assert pipfetch.pip_limits() == ["--timeout", "2.5", "--retries", "0"]
    monkeypatch.setenv("PIP_RETRIES", "many")
    with pytest.raises(UserError, match="PIP_RETRIES='many': expected a number"):
        pipfetch.pip_limits()


def test_index_file_name_cannot_leave_the_cache():
    report = {"metadata": {"name": "sglang"}, "download_info": {"url": "x"}}
    report["download_info"]["url"] = "https://example.invalid/a%2F..%2F..%2Fevil.whl"
    with pytest.raises(UserError, match="not a wheel file name"):
        pipfetch._from_report("sglang==1.0", {"sglang": report})


@pytest.mark.bad_input
def test_symlink_zip_entry_is_refused(tmp_path: Path):
    wheel = _zip(tmp_path / "w.whl", {"sglang/ok.py": b"1"}, links=("sglang/link",))
    with pytest.raises(UserError, match="symbolic link"):
        extract_package(wheel, "sglang", tmp_path / "dest")


def test_zip_lays_out_every_file_of_the_package(tmp_path: Path):
    entries = {
        "sglang/__init__.py": b"",
        "sglang/data/table.json": b"{}",
        "sglang/tool.sh": b"#!/bin/sh\n",
        "sglang-0.0.dist-info/METADATA": b"x",
    }
    dest = tmp_path / "python"
    assert extract_package(_zip(tmp_path / "w.whl", entries), "sglang", dest) == 3
    assert (dest / "sglang/data/table.json").read_bytes() == b"{}"
    assert (dest / "sglang/tool.sh").stat().st_mode & 0o111
    assert not (dest / "sglang-0.0.dist-info").exists()


def test_patch_parsing():
    diffs = parse(PATCH)
    assert [d.path for d in diffs] == ["pkg/mod.py", "pkg/new.py", "pkg/gone.py"]
    assert [h.old_start for h in diffs[0].hunks] == [3, 120]
    assert diffs[2].new_path is None


def test_touched_files_skip_deletions(tmp_path: Path):
    (tmp_path / "p.patch").write_text(PATCH)
    assert touched_files(tmp_path / "p.patch") == ["pkg/mod.py", "pkg/new.py"]


def test_failure_names_file_and_hunk(tmp_path: Path):
    (tmp_path / "p.patch").write_text(PATCH)
    output = (
        "error: patch failed: pkg/mod.py:120\n"
        "error: pkg/mod.py: patch does not apply\n"
        "CONFLICT (content): Merge conflict in pkg/mod.py\n"
        "error: pkg/new.py: already exists in working directory\n"
    )
    text = describe_failure(tmp_path / "p.patch", output)
    assert "pkg/mod.py: 3-way merge conflicts, hunk #2 of 2 (@@ -120,7 +121,9 @@)" in text
    assert "pkg/new.py: exists" in text
    two = "error: patch failed: pkg/mod.py:3\nerror: patch failed: pkg/mod.py:120\n"
    assert describe_failure(tmp_path / "p.patch", two) == (
        "pkg/mod.py: hunks #1 (@@ -3,6 +3,7 @@), #2 (@@ -120,7 +121,9 @@) of 2 do not apply"
    )
    assert describe_failure(tmp_path / "p.patch", "error: corrupt patch at line 7") == (
        "pkg/mod.py: corrupt patch at line 7 of p.patch"
    )
    # git am's own line number (of the split-off diff), then git apply's (of the file)
    binary = "error: corrupt binary patch at line 3: zzz\nerror: No valid patches in input\n"
    binary += "error: corrupt binary patch at line 16: zzz\nerror: No valid patches in input\n"
    assert describe_failure(tmp_path / "p.patch", binary) == (
        "pkg/new.py: corrupt binary patch at line 16 of p.patch"
    )


def test_slug_matches_git_style():
    assert slug("[perf] Skip the zero fill (EAGLE)") == "perf-Skip-the-zero-fill-EAGLE"
    assert slug("...") == "patch"
    assert len(slug("x" * 200)) == 52


def test_git_blob_id_matches_git():
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_wheel_target_from_pinned_name():
    target = wheel_target(PIN.wheel)
    assert target.python_version == "3.11"
    assert target.platforms == ("manylinux_2_34_x86_64",)


def test_gpu_requirements_are_pinned_once():
    reqs = read_requirements(ROOT / "ci" / "requirements-gpu.txt")
    assert len(reqs) == 25 and all("==" in r for r in reqs)
    assert "transformers==5.6.0" in reqs and "tokenizers==0.22.1" in reqs
    assert "apache-tvm-ffi==0.1.11" in reqs  # v0.5.23's import chain


@pytest.mark.bad_input
def test_unpinned_requirement_is_refused(tmp_path: Path):
    (tmp_path / "r.txt").write_text("orjson\n")
    with pytest.raises(UserError, match="not pinned"):
        read_requirements(tmp_path / "r.txt")


def test_an_old_python_is_named_with_what_it_needs():
    message = pyversion.problem((3, 10, 13), "/usr/bin/python3")
    assert message == (
        "needs Python 3.11+, and /usr/bin/python3 is Python 3.10.13:"
        " run make with PYTHON=python3.11 (or a newer python)"
    )
    assert pyversion.problem((3, 11, 0)) is None and pyversion.problem((3, 13, 1)) is None


def test_make_variables_are_named_as_typed(monkeypatch, tmp_path: Path):
    monkeypatch.delenv("SGLPATCH_MK_VERSION", raising=False)
    monkeypatch.delenv("SGLPATCH_MK_CALLER_DIR", raising=False)
    assert makevars.spelled("VERSION", "--version", "X.Y.Z") == "--version X.Y.Z"
    assert makevars.user_path("rel") == Path.cwd() / "rel"
    monkeypatch.setenv("SGLPATCH_MK_VERSION", "")
    monkeypatch.setenv("SGLPATCH_MK_CALLER_DIR", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert makevars.spelled("VERSION", "--version", "X.Y.Z") == "VERSION=X.Y.Z"
    assert makevars.user_path("../rel") == tmp_path / "../rel"
    assert makevars.user_path("~/src") == tmp_path / "home" / "src"
    assert makevars.user_path("/abs") == Path("/abs")
    assert makevars.shown_path(tmp_path / "build" / "sglang") == "build/sglang"
    assert makevars.shown_path(Path("/elsewhere")) == "/elsewhere"
    monkeypatch.setenv("SGLPATCH_MK_CALLER_DIR", str(tmp_path / "gone"))
    assert makevars.caller_dir() == Path.cwd()  # not a folder: the current one


SOURCE = """\
class A:
    def f(self):
        x = 1
        return helper(x)

    def g(self):
        return 2


class B:
    MODE = 1
"""


@pytest.mark.parametrize(
    ("scope", "has", "lacks", "where"),
    [
        ("A.f", ["helper("], ["common_template"], "mod.py:4 A.f"),
        ("A.f", ["helper(", "x = 1"], [], "mod.py:4 A.f"),
        ("A.g", ["helper("], [], None),  # another method's text does not count
        ("A", ["return 2"], [], "mod.py:7 A"),
        ("B", [], ["MODE = 2"], "mod.py:10 B"),
        ("B", [], ["MODE = 1"], None),
        ("A.h", [], ["x"], None),  # no such method
        ("", ["class B"], [], "mod.py:10"),
    ],
)
def test_evidence_looks_in_its_scope(scope, has, lacks, where):
    evidence = findings.Evidence("python/pkg/mod.py", scope, tuple(has), tuple(lacks))
    files = {"python/pkg/mod.py": SOURCE}
    assert evidence.look(files.get) == where


def test_evidence_in_a_missing_or_unparsable_file_does_not_hold():
    evidence = findings.Evidence("python/pkg/mod.py", "A", ("x",), ())
    assert evidence.look({}.get) is None
    assert evidence.look({"python/pkg/mod.py": "class A(:\n"}.get) is None


def test_a_signal_held_by_nested_blocks_stops_the_run_once_the_outer_is_done():
    """export holds signals from its record's appearing until the series is
    written, around finish_export's own hold: a signal the inner block held
    once vanished there (the handler before it was the outer hold, not the
    raise), and one that came between the two left a record no command of the
    run finished."""
    import os
    import signal

    from sglpatch import interrupt

    saved = {signum: signal.getsignal(signum) for signum in interrupt.SIGNALS}
    steps = []

    def install():  # from the defaults: a pytest-xdist worker ignores SIGINT
        for signum in interrupt.SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        interrupt.install()

    try:
        install()
        with pytest.raises(interrupt.Interrupted) as stopped:
            with interrupt.deferred():
                with interrupt.deferred():
                    os.kill(os.getpid(), signal.SIGTERM)
                    steps.append("inner done")
                steps.append("outer done")
        assert steps == ["inner done", "outer done"]
        assert stopped.value.signum == signal.SIGTERM
        # Without resume the block is the last step: the signal is reported.
        install()  # the raise ignored the signals from then on
        with interrupt.deferred(resume=False) as held:
            os.kill(os.getpid(), signal.SIGINT)
        assert held == [signal.SIGINT]
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
