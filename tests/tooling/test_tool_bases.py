"""Several pinned bases (patches/bases.toml): selection, v0.5.23's series from its
wheel, check-upstream's pointer at a ported series, fork apply on v0.5.23."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from sgltest import (
    DEFAULT,
    PIN,
    PIN_23,
    ROOT,
    SECOND,
    TARGET,
    Workspace,
    git,
    link_or_copy,
    one_error_line,
    run,
    snapshot,
)

from sglpatch import bases
from sglpatch.compat import release_target
from sglpatch.digest import sha256_file
from sglpatch.errors import UserError
from sglpatch.layout import PATCHES_ROOT, Layout
from sglpatch.pipfetch import Wheel, remember
from sglpatch.series import read_entries

KNOWN = "this project has v0.5.12, v0.5.23 (the default), in patches/bases.toml"
PATCHES_23 = len(read_entries(SECOND.patches))  # the v0.5.23 series' length
BRANCH_23 = f"sglpatch/v0.5.23-{PATCHES_23}-patches"
BASE_COMMIT_23 = "f08fe3f49a54ed0757fe8e06f7c80dcbbf2475c3"


def _make(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess:
    """make on the project's Makefile with the project's venv."""
    python = str(ROOT / ".venv" / "bin" / "python")
    full_env = {**os.environ, "MAKEFLAGS": "", "PWD": str(cwd), **env}
    argv = ["make", "--no-print-directory", *args, f"PYTHON={python}"]
    return subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300)


def _tool(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts")}
    env.pop("SGLPATCH_PATCHES_DIR", None)
    return run([sys.executable, "-m", "sglpatch", *args], cwd=ROOT, env=env)


# --- the table and base selection -------------------------------------------


def test_the_projects_bases():
    table = bases.load(PATCHES_ROOT)
    # v0.5.23, the newest release and the series upstream can take, is the default;
    # v0.5.12 holds the seeds' series (and is the base most tooling tests use).
    assert table.default == "v0.5.23" and table.names == ("v0.5.12", "v0.5.23")
    for name in table.names:
        layout = Layout.create(ROOT / "build", base=name)
        assert layout.build == ROOT / "build" / name
        assert layout.patches == ROOT / "patches" / name
        assert (layout.patches / "series").is_file() and layout.pin_file.is_file()
    assert (PIN.version, PIN_23.version, PIN_23.tag) == ("0.5.12", "0.5.23", "v0.5.23")
    assert DEFAULT.name == "v0.5.12" and SECOND.cache == ROOT / "build" / "v0.5.23" / "cache"


def test_the_default_and_an_explicit_base(tmp_path: Path):
    for chosen, name in (([], "v0.5.23"), (["--base", "v0.5.12"], "v0.5.12")):
        out = _tool("--build", str(tmp_path), *chosen, "trees").stdout.splitlines()
        root = tmp_path / name
        assert out == [f"base={root}/base/python", f"patched={root}/sglang/python"]
    out = _tool("--build", str(tmp_path), "--all-bases", "trees").stdout.splitlines()
    assert [line.split("/")[-3] for line in out] == ["v0.5.12"] * 2 + ["v0.5.23"] * 2


@pytest.mark.bad_input
@pytest.mark.parametrize("command", ["apply", "export", "check-patches", "check-upstream"])
def test_an_unknown_base_lists_the_known_ones(tmp_path: Path, command: str):
    extra = ["--version", "0.5.23"] if command == "check-upstream" else []
    proc = _tool("--build", str(tmp_path), "--base", "v9", command, *extra)
    assert one_error_line(proc) == f"sglpatch: error: unknown base --base 'v9': {KNOWN}"
    assert not (tmp_path / "v9").exists()


@pytest.mark.bad_input
def test_an_unknown_base_under_make_names_the_variable(tmp_path: Path):
    proc = _make("apply", "BASE=v9", f"BUILD={tmp_path}")
    assert proc.returncode == 2
    assert f"sglpatch: error: unknown base BASE='v9': {KNOWN}" in proc.stderr


@pytest.mark.bad_input
def test_all_bases_refuses_one_series_and_the_commands_of_one_base(tmp_path: Path):
    proc = _tool("--build", str(tmp_path), "--all-bases", "--base", "v0.5.23", "apply")
    assert "--all-bases takes each base's own series" in one_error_line(proc)
    proc = _tool("--build", str(tmp_path), "--all-bases", "export")
    assert "--all-bases works with apply, check-patches" in one_error_line(proc)


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["apply"], "--all-bases apply"),
        (["apply", "BASE=v0.5.23"], '"--base=$SGLPATCH_MK_BASE" apply'),
        (["apply", "SGLANG_DIR=/x"], '--build "$SGLPATCH_MK_BUILD"  apply'),
        (["check-patches"], "--all-bases check-patches"),
        (["export"], '--build "$SGLPATCH_MK_BUILD"  export'),
        (["check-upstream", "BASE=v0.5.23"], '"--base=$SGLPATCH_MK_BASE" check-upstream'),
    ],
    ids=["apply", "apply-base", "fork", "check-patches", "export", "check-upstream"],
)
def test_make_passes_base_as_one_word(args: list[str], wanted: str):
    """Without BASE, apply and check-patches go over every base, export and the
    others take the default; BASE reaches the tool through the environment."""
    proc = _make("-n", *(["-o", "apply"] if args[0] != "apply" else []), *args)
    assert wanted in proc.stdout, proc.stdout


def test_make_test_selects_the_base_for_pytest():
    every = _make("-n", "-o", "venv", "-o", "apply", "test").stdout
    one = _make("-n", "-o", "venv", "-o", "apply", "test", "BASE=v0.5.23").stdout
    pytest_line = next(line for line in every.splitlines() if " -m pytest" in line)
    assert pytest_line.rstrip().endswith("-m pytest")
    assert '-m pytest "--base=$SGLPATCH_MK_BASE"' in one


@pytest.mark.bad_input
def test_a_bad_bases_table_is_one_line(tmp_path: Path):
    row = '[[base]]\nname = "{}"\ndirectory = "{}"\ntests = []\nlint = "{}"\n'
    cases = {
        'default = "v1"\n' + row.format("v2", "v2", "ci/x.yaml"): "default 'v1'",
        'default = "a"\n' + row.format("a", "../a", "ci/x.yaml"): "plain name",
        'default = "a"\n' + row.format("a", "a", "/etc/x.yaml"): "not a path inside",
        'default = "a"\n[[base]]\nname = "a"\n': "keys are directory, lint, name, tests",
        "default = [": "cannot be read as TOML",
    }
    for text, message in cases.items():
        (tmp_path / "bases.toml").write_text(text)
        with pytest.raises(UserError, match=message):
            bases.load(tmp_path)


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_test_directories_map_to_their_bases():
    conftest = _root_conftest()

    def item(path: str, marker=None):
        mark = SimpleNamespace(args=(marker,)) if marker else None
        return SimpleNamespace(path=ROOT / path, get_closest_marker=lambda name: mark)

    both = ("v0.5.12", "v0.5.23")
    assert conftest.bases_of(item("tests/backend/test_x.py")) == both  # one suite
    assert conftest.bases_of(item("tests/gpu/test_x.py")) == both
    assert conftest.bases_of(item("tests/bench/test_x.py")) == both
    assert conftest.bases_of(item("tests/harness/test_x.py")) == both
    assert conftest.bases_of(item("tests/v0_5_12/test_x.py")) == ("v0.5.12",)
    assert conftest.bases_of(item("tests/v0_5_23/test_x.py")) == ("v0.5.23",)
    assert conftest.bases_of(item("tests/tooling/test_x.py")) == ()
    assert conftest.bases_of(item("tests/tooling/test_x.py", "v0.5.23")) == ("v0.5.23",)
    assert conftest.base_of(item("tests/v0_5_23/test_x.py")) == "v0.5.23"


def _collect(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    env = {key: value for key, value in os.environ.items() if key != "PYTEST_ADDOPTS"}
    return run([*argv, *args], cwd=ROOT, env=env)


def test_pytest_deselects_the_tests_of_other_bases():
    units = "tests/tooling/test_tool_units.py"
    own = "tests/v0_5_12/test_ladder.py"  # a v0.5.12-only path
    kept = _collect("--base", "v0.5.12", own, units)
    dropped = _collect("--base=v0.5.23", own, units)
    both = _collect("--base", "v0.5.12,v0.5.23", own, units)
    assert " deselected" not in kept.stdout and " deselected" not in both.stdout
    ladder = sum(line.startswith(own) for line in kept.stdout.splitlines())
    assert ladder > 0 and own not in dropped.stdout
    assert f"({ladder} deselected)" in dropped.stdout and "test_tool_units.py" in dropped.stdout


def test_pytest_deselects_the_other_bases_cases_of_a_shared_test():
    """A shared directory's test runs once per base; --base keeps one base's
    cases and deselects the other's (per_base parameters and the generated
    ``base`` parameter alike)."""
    shared = (
        "tests/backend/test_double_capture.py",  # per_base parameters
        # the base parameter conftest's pytest_generate_tests adds
        "tests/bench/test_bench_cpu.py::test_bench_cpu_defaults_patched_never_worse",
    )
    ids = {}
    for base in ("v0.5.12", "v0.5.23"):
        out = _collect("--base", base, *shared).stdout.splitlines()
        ids[base] = [line for line in out if "::" in line]
        assert ids[base] and " deselected" in out[-1], out[-3:]
    for base, found in ids.items():
        assert all(re.search(rf"\[{re.escape(base)}[-\]]", i) for i in found), found
    both = [line for line in _collect(*shared).stdout.splitlines() if "::" in line]
    assert sorted(both) == sorted(ids["v0.5.12"] + ids["v0.5.23"])


@pytest.mark.bad_input
def test_pytest_refuses_an_unknown_base():
    proc = _collect("--base", "v9;touch x", "tests/tooling/test_tool_units.py")
    assert proc.returncode == 4 and f"unknown base --base 'v9;touch x': {KNOWN}" in proc.stderr
    assert not (ROOT / "x").exists()


# --- v0.5.23 from its wheel ---------------------------------------------------


@pytest.fixture(scope="module")
def built_23(tmp_path_factory, second_wheel: Path) -> Path:
    """A build root where `make apply BASE=v0.5.23` built patches/v0.5.23."""
    root = tmp_path_factory.mktemp("bases") / "build"
    (root / "v0.5.23" / "cache").mkdir(parents=True)
    link_or_copy(second_wheel, root / "v0.5.23" / "cache" / second_wheel.name)
    proc = _make("apply", "BASE=v0.5.23", f"BUILD={root}")
    assert proc.returncode == 0, proc.stderr
    return root


def test_apply_builds_the_v0_5_23_series_from_its_wheel(built_23: Path):
    tree = built_23 / "v0.5.23" / "sglang"
    assert git(tree, "rev-parse", "base/v0.5.23") == BASE_COMMIT_23  # the same everywhere
    assert git(tree, "rev-parse", f"base/v0.5.23:{TARGET}") == PIN_23.target_blob
    subjects = git(tree, "log", "--reverse", "--format=%s", "base/v0.5.23..patched")
    assert len(subjects.splitlines()) == PATCHES_23
    assert not (built_23 / "v0.5.12").exists()
    assert git(built_23 / "v0.5.23" / "base", "rev-parse", "HEAD") == git(
        tree, "rev-parse", "base/v0.5.23"
    )


def test_check_patches_of_v0_5_23_passes(built_23: Path):
    """patches/v0.5.23/ is byte-identical to an export of what it builds."""
    proc = _make("check-patches", "BASE=v0.5.23", f"BUILD={built_23}")
    assert proc.returncode == 0, proc.stderr
    assert f"{ROOT}/patches/v0.5.23 matches a fresh export" in proc.stderr


def test_check_upstream_of_the_v0_5_23_series(built_23: Path, second_wheel: Path):
    """The series of the second base checked against a release (its findings
    table is absent): here the release is v0.5.23 itself, so every patch applies."""
    cache = built_23 / "v0.5.23" / "cache" / "upstream"
    cache.mkdir(parents=True, exist_ok=True)
    link_or_copy(second_wheel, cache / second_wheel.name)
    record = Wheel("sglang==0.5.23", cache / second_wheel.name, PIN_23.wheel_sha256, "index")
    remember(cache, record, release_target(PIN_23))
    proc = _make("check-upstream", "BASE=v0.5.23", "VERSION=0.5.23", f"BUILD={built_23}")
    assert proc.returncode == 0, proc.stderr
    count = PATCHES_23
    assert f"## sglang 0.5.23 vs the series on v0.5.23 ({count} patch(es))" in proc.stdout
    assert f"{count} applies cleanly" in proc.stdout
    assert "**port**: the series" not in proc.stdout


def _fake_release(directory: Path, pinned_wheel: Path, version: str) -> Path:
    """A small wheel of sglang ``version``: v0.5.12's target file, renamed."""
    module = TARGET.removeprefix("python/")
    with zipfile.ZipFile(pinned_wheel) as archive:
        text = archive.read(module)
    path = directory / PIN.wheel.replace(PIN.version, version)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("sglang/__init__.py", "")
        archive.writestr(module, text + b"# upstream moved on\n")
        info = f"sglang-{version}.dist-info"  # what pip reads when an index serves it
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n"
        )
        tag = "-".join(path.name.removesuffix(".whl").split("-")[-3:])
        archive.writestr(
            f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n"
        )
    return path


def test_check_upstream_points_at_the_ported_series(
    workspace: Workspace, pinned_wheel, canonical_patches
):
    """On a release the project carries a series for, the v0.5.12 report names
    that series as the port (per patch, "rebase" means "it applies"), and still
    has its row per patch."""
    names = workspace.use_patches(canonical_patches)
    cache = workspace.build / "cache" / "upstream"
    cache.mkdir(parents=True)
    wheel = _fake_release(cache, pinned_wheel, "0.5.23")
    record = Wheel("sglang==0.5.23", wheel, sha256_file(wheel), "index")
    remember(cache, record, release_target(PIN))
    out = workspace.ok("check-upstream", "--version", "0.5.23").stdout
    count = PATCHES_23
    pointer = (
        f"the series on v0.5.12 is ported to v0.5.23 in patches/v0.5.23/ ({count} patch(es)):"
        " use `make apply BASE=v0.5.23`"
    )
    assert f"- **port**: {pointer}" in out and f"Rather than redo that: {pointer}." in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "`000" in line]
    assert [row.split(" | ")[1] for row in rows] == [f"`{name}`" for name in names]


def _cache_23(space: Workspace) -> Path:
    """The v0.5.23 base's download cache beside the workspace's v0.5.12 build."""
    cache = space.build_root / "v0.5.23" / "cache"
    cache.mkdir(parents=True)
    return cache


def test_check_upstream_reuses_another_bases_cached_wheel(workspace: Workspace, second_wheel):
    """check-upstream of v0.5.12 on 0.5.23 once fetched the 37 MiB wheel again
    while build/v0.5.23/cache held it. It takes that copy, checked against the
    v0.5.23 pin, and runs no pip (which has no index here: it would fail)."""
    cache = _cache_23(workspace)
    link_or_copy(second_wheel, cache / PIN_23.wheel)
    proc = workspace.ok("check-upstream", "--version", "0.5.23")
    source = "wheel_sha256 in patches/v0.5.23/base.toml"
    assert f"reusing {cache / PIN_23.wheel} (base v0.5.23's pinned wheel; {source})" in proc.stderr
    assert "pip:" not in proc.stderr and not (workspace.build / "cache" / "upstream").exists()
    wheel_line = f"- wheel: `{PIN_23.wheel}`, sha256 `{PIN_23.wheel_sha256}` (matches a base's"
    assert wheel_line in proc.stdout
    assert "- **port**: the series on v0.5.12 is ported to v0.5.23" in proc.stdout
    assert sha256_file(cache / PIN_23.wheel) == PIN_23.wheel_sha256  # left as it was


@pytest.mark.bad_input
def test_check_upstream_moves_a_bad_cached_wheel_aside_and_downloads_it(
    workspace: Workspace, pinned_wheel, tmp_path: Path
):
    """A file in another base's cache that fails that base's pin is moved aside,
    never deleted, and the release is fetched afresh (from a local index here)."""
    cache = _cache_23(workspace)
    bad = _fake_release(cache, pinned_wheel, "0.5.23")
    digest = sha256_file(bad)
    assert bad.name == PIN_23.wheel and digest != PIN_23.wheel_sha256
    links = tmp_path / "links"  # the "index": serves a wheel of that name
    links.mkdir()
    link_or_copy(bad, links / bad.name)
    proc = workspace.ok("check-upstream", "--version", "0.5.23", env={"PIP_FIND_LINKS": str(links)})
    aside = cache / f"{PIN_23.wheel}.bad-{digest[:12]}"
    assert aside.is_file() and sha256_file(aside) == digest and not bad.exists()
    assert (
        f"checksum mismatch for {bad}: expected sha256 {PIN_23.wheel_sha256}"
        f" (wheel_sha256 in patches/v0.5.23/base.toml), got {digest}; moved it aside to"
        f" {aside.name}; fetching sglang==0.5.23 afresh"
    ) in proc.stderr
    assert "sglpatch: pip: fetching sglang==0.5.23" in proc.stderr
    fetched = workspace.build / "cache" / "upstream" / PIN_23.wheel
    assert sha256_file(fetched) == digest
    assert f"sha256 `{digest}` (matches the index)" in proc.stdout


# --- fork apply on v0.5.23 ----------------------------------------------------


@pytest.fixture
def fork_23(tmp_path: Path, built_23: Path) -> Path:
    """A checkout on branch ``main`` at v0.5.23 (the base commit, tagged)."""
    path = tmp_path / "fork"
    git(tmp_path, "clone", "-q", str(built_23 / "v0.5.23" / "sglang"), str(path))
    git(path, "tag", "v0.5.23", "base/v0.5.23")
    git(path, "checkout", "-q", "-b", "main", "v0.5.23")
    git(path, "branch", "-q", "-D", "patched")
    return path


def test_fork_apply_of_the_v0_5_23_series(fork_23: Path, tmp_path: Path):
    """v0.5.23 is the default base: a fork apply without BASE applies its series."""
    start = git(fork_23, "rev-parse", "HEAD")
    proc = _make("apply", f"SGLANG_DIR={fork_23}", f"BUILD={tmp_path / 'b'}")
    assert proc.returncode == 0, proc.stderr
    count = PATCHES_23
    assert f"on new branch {BRANCH_23}: {count} commit(s) on top of main" in proc.stderr
    assert git(fork_23, "symbolic-ref", "HEAD") == f"refs/heads/{BRANCH_23}"
    assert len(git(fork_23, "log", "--format=%s", f"{start}..").splitlines()) == count


@pytest.mark.bad_input
def test_fork_apply_checks_the_chosen_bases_pin(fork_23: Path, tmp_path: Path):
    """v0.5.12's series on a v0.5.23 checkout: its pin says v0.5.12; the 3-way
    command it suggests keeps BASE."""
    before = snapshot(fork_23)
    proc = _make("apply", "BASE=v0.5.12", f"SGLANG_DIR={fork_23}", f"BUILD={tmp_path / 'b'}")
    assert proc.returncode == 2 and snapshot(fork_23) == before
    assert f"{fork_23} is not at v0.5.12: its {TARGET} is blob 643613a0a943" in proc.stderr
    assert f"make apply SGLANG_DIR={fork_23} BASE=v0.5.12 THREE_WAY=1" in proc.stderr
