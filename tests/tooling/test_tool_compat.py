"""``sglpatch check-upstream`` on synthetic release wheels, offline."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from sgltest import PIN, ROOT, TARGET, Workspace, one_error_line

from sglpatch import findings
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
from sglpatch.series import load as load_series
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
    assert f"| 1 | `{names[0]}` | already upstream | **drop** | the release has these very" in out
    assert (
        f"| 2 | `{names[1]}` | conflicts | **port** | rewrite it for the release's code:"
        f" {TARGET}: hunk #1 of 1" in out
    )
    assert f"| 3 | `{names[2]}` | applies cleanly | **rebase** | applies as is |" in out
    assert (
        sha256_file(wheel) in out
        and "1 applies cleanly, 0 applies with 3-way merge, 1 already upstream, 1 conflicts" in out
    )
    assert f"What to do for {VERSION}: drop 1 (#1), rebase 1 (#3), port 1 (#2)." in out
    assert "- port: rewrite it for the release's code, then `make export`" in out


def _findings(space: Workspace, names: list[str], evidence: str, action: str = "drop") -> None:
    """An upstream.toml with one finding for the second patch."""
    (space.patches / "upstream.toml").write_text(
        f'[[finding]]\npatches = ["{names[1]}"]\naction = "{action}"\n'
        'reason = """upstream has an\nequivalent helper"""\n\n'
        f"[[finding.evidence]]\n{evidence}\n"
    )


def _release_with_helper(directory: Path, pinned_wheel: Path) -> Path:
    """A release with a helper of its own where 0002 adds one at the end (which
    still applies there: the finding, not the text, says to drop it)."""
    with zipfile.ZipFile(pinned_wheel) as archive:
        text = archive.read(MODULE).decode()
    line = "class TRTLLMMLABackend(FlashInferMLAAttnBackend):\n"
    text = text.replace(line, line + "    def upstream_helper(self):\n        return 42\n\n", 1)
    path = directory / PIN.wheel.replace("0.5.12", VERSION)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("sglang/__init__.py", "")
        archive.writestr(MODULE, text)
    return path


def _serve(space: Workspace, wheel_maker, pinned_wheel: Path) -> Path:
    cache = space.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = wheel_maker(cache, pinned_wheel)
    record = Wheel(f"sglang=={VERSION}", wheel, sha256_file(wheel), "index")
    remember(cache, record, release_target(PIN))
    return wheel


def test_check_upstream_reports_an_equivalent_shown_by_a_finding(
    workspace: Workspace, pinned_wheel, canonical_patches
):
    names = workspace.use_patches(canonical_patches)
    _serve(workspace, _release_with_helper, pinned_wheel)
    _findings(
        workspace,
        names,
        'scope = "TRTLLMMLABackend.upstream_helper"\nhas = ["return 42"]\nlacks = ["todo"]',
    )
    out = workspace.ok("check-upstream", "--version", VERSION).stdout
    row = next(line for line in out.splitlines() if line.startswith("| 2 |"))
    assert row.startswith(
        f"| 2 | `{names[1]}` | applies cleanly | **drop** | upstream has an equivalent helper ("
    )
    assert "TRTLLMMLABackend.upstream_helper has `return 42` and lacks `todo`" in row
    with zipfile.ZipFile(pinned_wheel) as archive:
        text = archive.read(MODULE).decode()
    line = text[: text.index("class TRTLLMMLABackend(")].count("\n") + 3  # its `return 42`
    assert f"(trtllm_mla_backend.py:{line} TRTLLMMLABackend.upstream_helper has" in row
    assert f"What to do for {VERSION}: drop 1 (#2), rebase 2 (#1, #3)." in out


def test_a_finding_that_does_not_hold_leaves_the_textual_advice(
    workspace: Workspace, pinned_wheel, canonical_patches
):
    names = workspace.use_patches(canonical_patches)
    _serve(workspace, _release_with_helper, pinned_wheel)
    _findings(workspace, names, 'scope = "TRTLLMMLABackend.upstream_helper"\nhas = ["return 7"]')
    out = workspace.ok("check-upstream", "--version", VERSION).stdout
    assert f"| 2 | `{names[1]}` | applies cleanly | **rebase** | applies as is |" in out


@pytest.mark.bad_input
def test_a_finding_that_holds_in_the_base_is_refused(
    workspace: Workspace, pinned_wheel, canonical_patches
):
    names = workspace.use_patches(canonical_patches)
    _serve(workspace, _release_with_helper, pinned_wheel)
    _findings(workspace, names, 'scope = "TRTLLMMLABackend"\nhas = ["def forward_decode"]')
    proc = workspace.tool("check-upstream", "--version", VERSION)
    assert "finding 1 holds in the pinned base too" in one_error_line(proc)
    assert proc.stdout == ""


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[finding]]\npatches = ["0009-gone.patch"]\naction = "drop"\nreason = "x"\n'
            '[[finding.evidence]]\nhas = ["x"]\n',
            "names 0009-gone.patch, which the series",
        ),
        ('[[finding]]\npatches = ["a"]\naction = "keep"\nreason = "x"\n', "action must be one"),
        ('[[finding]]\npatches = ["a"]\naction = "drop"\nreason = "x"\n', "needs at least one"),
        (
            '[[finding]]\npatches = ["a"]\naction = "drop"\nreason = "x"\n'
            '[[finding.evidence]]\nscope = "A.b.c"\nhas = ["x"]\n',
            "scope must be Class",
        ),
        (
            '[[finding]]\npatches = ["a"]\naction = "drop"\nreason = "x"\n'
            '[[finding.evidence]]\nscope = "A"\n',
            "has and/or lacks",
        ),
        ("[[finding]]\npatch = 1\n", "keys are"),
        ("finding = [", "cannot be read as TOML"),
    ],
    ids=["unlisted", "action", "no-evidence", "scope", "no-strings", "key", "toml"],
)
def test_a_bad_findings_table_is_one_line(
    workspace: Workspace, pinned_wheel, canonical_patches, text: str, message: str
):
    workspace.use_patches(canonical_patches)
    _serve(workspace, _release_with_helper, pinned_wheel)
    (workspace.patches / "upstream.toml").write_text(text)
    error = one_error_line(workspace.tool("check-upstream", "--version", VERSION))
    assert "upstream.toml" in error and message in error


@pytest.mark.bad_input
def test_check_patches_names_a_finding_for_an_unlisted_patch(
    workspace: Workspace, canonical_patches
):
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    (workspace.patches / "upstream.toml").write_text(
        '[[finding]]\npatches = ["0009-gone.patch"]\naction = "drop"\nreason = "x"\n'
        '[[finding.evidence]]\nhas = ["x"]\n'
    )
    proc = workspace.tool("check-patches")
    assert proc.returncode == 1
    assert "finding 1 names 0009-gone.patch, which the series does not list" in proc.stderr


def test_the_projects_findings_name_listed_patches_and_tell_the_base_apart(pinned_wheel):
    """patches/upstream.toml: every finding names a patch of the series, and none
    holds in the pinned v0.5.12 (else it would tell no release apart)."""
    table = ROOT / "patches" / "v0.5.12" / "upstream.toml"
    found = findings.load(table, PIN)
    names = load_series(ROOT / "patches" / "v0.5.12").names
    assert found and findings.problems(found, names) == []
    with zipfile.ZipFile(pinned_wheel) as archive:
        members = set(archive.namelist())

        def read(path: str) -> str | None:
            member = path.removeprefix("python/")
            return archive.read(member).decode() if member in members else None

        findings.check(found, names, read, table)
        assert all(finding.look(read) is None for finding in found)


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
