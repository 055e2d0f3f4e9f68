"""The Makefile passes user values to programs as data, never as shell code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from sgltest import PIN, ROOT

# (target, variables): the values of issue 12 that ran `touch x` through a recipe,
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
}
# The variables users set: no recipe line, nor VPY or TOOL, may expand them.
USER_VARIABLES = re.compile(
    r"\$[({](PYTHON|VENV|BUILD|SOURCE|SGLANG_DIR|THREE_WAY|VERSION|BENCH_ARGS|PYTEST_ARGS)"
    r"[)}]|\$@|\$<|\$\^"
)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A folder with the Makefile and the tool, where a stray `touch x` would land."""
    (tmp_path / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    (tmp_path / "patches").mkdir()
    shutil.copyfile(PIN.path, tmp_path / "patches" / "base.toml")
    return tmp_path


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
