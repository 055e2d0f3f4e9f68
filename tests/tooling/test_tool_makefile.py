"""The Makefile passes user values to programs as data, never as shell code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sgltest import PIN, ROOT

# (target, variables): values that once ran `touch x` through a recipe,
# and the same for the other variables a recipe uses.
HOSTILE = {
    "version-backticks": ("check-upstream", {"VERSION": "`touch x`"}),
    "version-dollar-paren": ("check-upstream", {"VERSION": "$$(touch x)"}),
    "version-quote-breakout": ("check-upstream", {"VERSION": '0.5.13"; touch x; echo "'}),
    "sglang-dir-quote-breakout": ("apply", {"SGLANG_DIR": '/nowhere"; touch x; echo "'}),
    "sglang-dir-backticks": ("apply", {"SGLANG_DIR": "/nowhere`touch x`"}),
    "source-dollar-paren": ("apply", {"SOURCE": "$$(touch x)"}),
    "build-semicolon": ("export", {"BUILD": "build; touch x #"}),
    "python-semicolon": ("export", {"PYTHON": "python3; touch x #"}),
    "venv-backticks": ("bench", {"VENV": ".venv`touch x`"}),
    "bench-args-dollar-paren": ("bench", {"BENCH_ARGS": "--no-such-flag $$(touch x)"}),
    "pytest-args-backticks": ("test", {"PYTEST_ARGS": "--no-such-flag `touch x`"}),
    "base-quote-breakout": ("apply", {"BASE": 'v0.5.12"; touch x; echo "'}),
    "base-backticks": ("check-patches", {"BASE": "`touch x`"}),
    "base-dollar-paren": ("check-upstream", {"BASE": "$$(touch x)", "VERSION": "0.5.23"}),
    "base-semicolon-export": ("export", {"BASE": "v0.5.23; touch x #"}),
    "base-fork": ("apply", {"BASE": "'; touch x; '", "SGLANG_DIR": "/nowhere"}),
    "base-test": ("test", {"BASE": "v0.5.23 `touch x`"}),
    "base-bench": ("bench", {"BASE": "$$(touch x)"}),
    # make's own $(shell ...) in a value, which `export X = $(X)` once ran.
    "sglang-dir-make-shell": ("apply", {"SGLANG_DIR": "$(shell touch x)"}),
    "base-make-shell": ("apply", {"BASE": "$(shell touch x)"}),
    "version-make-shell": ("check-upstream", {"VERSION": "$(shell touch x)"}),
    "build-make-shell": ("export", {"BUILD": "$(shell touch x)"}),
    "venv-make-shell": ("bench", {"VENV": "$(shell touch x)"}),
}
# The variables users set: no recipe line, nor VPY or TOOL, may expand them.
USER_VARIABLES = re.compile(
    r"\$[({](PYTHON|VENV|BUILD|SOURCE|BASE|SGLANG_DIR|THREE_WAY|VERSION|BENCH_ARGS|PYTEST_ARGS)"
    r"[)}]|\$@|\$<|\$\^"
)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A folder with the Makefile and the tool, where a stray `touch x` would land."""
    return _sandbox_at(tmp_path)


def _sandbox_at(folder: Path) -> Path:
    """``folder`` with the Makefile, the tool, a pin and ci/requirements.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    (folder / "scripts").symlink_to(ROOT / "scripts")
    (folder / "patches").mkdir()
    shutil.copyfile(PIN.path, folder / "patches" / "base.toml")
    (folder / "ci").mkdir()
    shutil.copyfile(ROOT / "ci" / "requirements.txt", folder / "ci" / "requirements.txt")
    return folder


@pytest.mark.bad_input
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_make_variables_stay_data(sandbox: Path, case: str):
    target, variables = HOSTILE[case]
    python = str(ROOT / ".venv" / "bin" / "python")
    # test and bench run on an existing venv and tree: skip their prerequisites.
    skip = ["-o", "venv", "-o", "apply"] if target in ("test", "bench") else []
    args = ["make", "-s", *skip, target, f"PYTHON={python}"]
    if "VENV" not in variables:
        args.append(f"VENV={ROOT / '.venv'}")
    args += [f"{name}={value}" for name, value in variables.items()]
    env = {**os.environ, "SGLPATCH_PATCHES_DIR": str(sandbox / "patches"), "MAKEFLAGS": ""}
    proc = subprocess.run(args, cwd=sandbox, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert not (sandbox / "x").exists(), proc.stderr
    assert not (ROOT / "x").exists()
    assert "Traceback" not in proc.stderr


@pytest.mark.bad_input
def test_no_recipe_line_names_a_user_variable():
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipes = [line for line in lines if line.startswith(("\t", "VPY ", "TOOL "))]
    offending = [line for line in recipes if USER_VARIABLES.search(line)]
    assert len(recipes) > 10 and offending == []


def _make(sandbox: Path, *args: str, cwd: Path | None = None, **env: str):
    """Run make on the sandbox's Makefile with the project's venv."""
    python = str(ROOT / ".venv" / "bin" / "python")
    # As a user's top-level make: not a sub-make of `make test` (whose
    # MAKELEVEL would turn make's "make: ***" status line into "make[1]: ***").
    inherited = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MFLAGS")}
    full_env = {
        **inherited,
        "SGLPATCH_PATCHES_DIR": str(sandbox / "patches"),
        "MAKEFLAGS": "",
        "PWD": str(cwd or sandbox),
        **env,
    }
    argv = ["make", "--no-print-directory", *args, f"PYTHON={python}"]
    return subprocess.run(
        argv, cwd=cwd or sandbox, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_help_shows_the_values_of_build_and_venv(sandbox: Path):
    out = _make(sandbox, "help", "BUILD=/data/b").stdout
    assert "apply            Build /data/b/<base>/sglang = base + patches/<base>/series" in out
    assert "clean            Remove /data/b (the wheel cache included) and .venv" in out
    assert "$(" not in out and "check-upstream   Per patch against a newer release" in out


@pytest.mark.bad_input
def test_an_unknown_target_points_at_make_help(sandbox: Path):
    proc = _make(sandbox, "tset")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "make: no target 'tset': `make help` lists them"


@pytest.mark.bad_input
def test_an_unknown_target_is_data(sandbox: Path):
    proc = _make(sandbox, "t`touch x`")
    assert proc.returncode == 2 and "make: no target 't`touch x`'" in proc.stderr
    assert not (sandbox / "x").exists()


@pytest.mark.bad_input
def test_check_upstream_without_version_names_the_variable(sandbox: Path):
    proc = _make(sandbox, "check-upstream")
    assert proc.returncode == 2
    assert (
        "sglpatch: error: check-upstream needs the release to check: VERSION=X.Y.Z"
        " (e.g. VERSION=0.5.23)" in proc.stderr
    )
    proc = _make(sandbox, "check-upstream", "VERSION=0.5")
    assert "sglpatch: error: bad version VERSION='0.5': expected X.Y.Z" in proc.stderr


def test_make_f_works_from_another_folder(sandbox: Path, tmp_path: Path):
    """Recipes run in the Makefile's folder: the tool is found from anywhere."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _make(sandbox, "-f", str(sandbox / "Makefile"), "check-upstream", cwd=elsewhere)
    assert "needs the release to check: VERSION=X.Y.Z" in proc.stderr
    assert "No module named" not in proc.stderr


@pytest.mark.bad_input
@pytest.mark.parametrize("how", ["make-C", "make-f"])
def test_a_relative_sglang_dir_is_taken_from_where_make_started(
    sandbox: Path, tmp_path: Path, how: str
):
    """With make -C (make changes folder, the shell's PWD stays) and make -f alike,
    the error names the absolute path it tried."""
    start = tmp_path / "start"
    start.mkdir()
    flag = ["-C", str(sandbox)] if how == "make-C" else ["-f", str(sandbox / "Makefile")]
    proc = _make(sandbox, *flag, "apply", "SGLANG_DIR=../sglang", cwd=start)
    assert proc.returncode == 2
    assert (
        f"sglpatch: error: SGLANG_DIR=../sglang: {start}/../sglang (from {start}) is not a"
        " directory" in proc.stderr
    )


@pytest.mark.bad_input
def test_a_quoted_tilde_in_sglang_dir_is_expanded(sandbox: Path, tmp_path: Path):
    proc = _make(sandbox, "apply", "SGLANG_DIR=~/src/sglang", HOME=str(tmp_path))
    assert f"SGLANG_DIR=~/src/sglang: {tmp_path}/src/sglang is not a directory" in proc.stderr


OLD_PYTHON = """\
import runpy
import sys

# Python 3.10 as far as the code can tell: `python -m MODULE ARGS`.
sys.version_info = (3, 10, 13, "final", 0)
module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@pytest.mark.bad_input
@pytest.mark.parametrize("target", ["apply", "venv"])
def test_an_old_python_is_told_what_it_needs(sandbox: Path, tmp_path: Path, target: str):
    """A Python before 3.11 gets one line, from make apply and before make venv
    creates anything (the interpreter reports 3.10)."""
    (tmp_path / "old.py").write_text(OLD_PYTHON)
    shim = tmp_path / "python3.10"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{tmp_path / "old.py"}" "$@"\n')
    shim.chmod(0o755)
    venv = tmp_path / "venv"
    proc = subprocess.run(
        ["make", "--no-print-directory", target, f"PYTHON={shim}", f"VENV={venv}"],
        cwd=sandbox,
        env={**os.environ, "SGLPATCH_PATCHES_DIR": str(sandbox / "patches"), "MAKEFLAGS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert f"sglpatch: error: needs Python 3.11+, and {sys.executable} is Python 3.10.13" in (
        proc.stderr
    )
    assert "run make with PYTHON=python3.11" in proc.stderr and "Traceback" not in proc.stderr
    assert not venv.exists()


def test_venv_shows_progress():
    """make venv says what it installs and how big, and lets pip show each package."""
    proc = subprocess.run(
        ["make", "-n", "venv", "VENV=/nonexistent/venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "make venv: installing ci/requirements.txt" in proc.stdout and "5.9 GiB" in proc.stdout
    pip = next(line for line in proc.stdout.splitlines() if " pip install " in line)
    assert " -q" not in pip and "--progress-bar on" in pip


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "value, shown",
    [
        ("$(shell touch x)", "$(shell touch x)"),
        ("/no/where/$HOME/$$x", "/no/where/$HOME/$$x"),
    ],
    ids=["make-shell", "dollar-in-path"],
)
def test_sglang_dir_is_taken_literally(sandbox: Path, value: str, shown: str):
    """A value make would expand reaches the fork apply as typed (not as an empty
    SGLANG_DIR, which would be a build apply): one line naming it, and make's
    status; no recipe text."""
    proc = _make(sandbox, "apply", f"SGLANG_DIR={value}")
    assert proc.returncode == 2 and not (sandbox / "x").exists()
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"sglpatch: error: SGLANG_DIR={shown}: "), proc.stderr
    assert "is not a directory" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("make: *** [")
    assert proc.stdout == ""


@pytest.mark.bad_input
@pytest.mark.parametrize("how", ["command-line", "environment"])
def test_an_empty_sglang_dir_is_an_error(sandbox: Path, how: str):
    """SGLANG_DIR= set but empty is refused, never taken for a build apply."""
    if how == "command-line":
        proc = _make(sandbox, "apply", "SGLANG_DIR=")
    else:
        proc = _make(sandbox, "apply", SGLANG_DIR="")
    assert proc.returncode == 2
    assert "sglpatch: error: SGLANG_DIR='' is empty: name the root of your SGLang" in (proc.stderr)
    assert not (sandbox / "build").exists()


def test_recipes_are_silent():
    """make prints the programs' lines, not recipe text: every recipe line is @."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipes = [line for line in lines if line.startswith("\t")]
    assert recipes and all(line.startswith("\t@") for line in recipes)


def _old_interpreters() -> list[str]:
    """Real Pythons before 3.6 (no f-strings) found on this machine."""
    found = []
    for name in ("python2.7", "python3.5"):
        candidates = [shutil.which(name), *Path.home().glob(f".pyenv/versions/*/bin/{name}")]
        for candidate in candidates:
            if candidate and subprocess.run([str(candidate), "-c", ""]).returncode == 0:
                found.append(str(candidate))
                break
    return found


@pytest.mark.bad_input
def test_pyversion_is_python2_syntax():
    """pyversion.py must parse in any Python (python2.7 once got a traceback)."""
    source = (ROOT / "scripts" / "sglpatch" / "pyversion.py").read_text()
    assert 'f"' not in source and "f'" not in source
    for python in _old_interpreters():
        proc = subprocess.run(
            [python, "-m", "sglpatch", "apply"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("sglpatch: error: needs Python 3.11+"), proc.stderr


@pytest.mark.bad_input
@pytest.mark.parametrize("name", ["build", ".venv", ".whl", ".gl"])
def test_an_ignored_folder_that_is_a_symlink_stays_ignored(tmp_path: Path, name: str):
    """build/ (or .venv) may be a symlink to a folder elsewhere: git status must not
    list it (a pattern ending in / matched folders only, so `git add -A` committed
    the link)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copyfile(ROOT / ".gitignore", repo / ".gitignore")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "file").write_text("x\n")
    (repo / name).symlink_to(tmp_path / "elsewhere")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status.splitlines() == ["?? .gitignore"]


@pytest.mark.bad_input
@pytest.mark.parametrize("how", ["in-the-folder", "make-C", "make-f"])
def test_a_repository_path_with_a_space_is_refused_in_one_line(tmp_path: Path, how: str):
    """A clone at "x y/p": make splits its path at the space (every target failed
    with `cd: can't cd to ... y/p`); refused before any recipe, naming the path."""
    repo = _sandbox_at(tmp_path / "x y" / "p")
    start = {"in-the-folder": repo, "make-C": tmp_path, "make-f": tmp_path}[how]
    flag = {
        "in-the-folder": [],
        "make-C": ["-C", str(repo)],
        "make-f": ["-f", str(repo / "Makefile")],
    }
    for target in ("apply", "help"):
        proc = _make(repo, *flag[how], target, cwd=start)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert f"this Makefile's path, '{repo}/Makefile', holds a space" in lines[0]
        assert not (repo / "build").exists() and not (tmp_path / "x").exists()
