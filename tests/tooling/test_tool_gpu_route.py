"""The GPU host's route: tests/README.md's commands over an unpacked bundle.

On the air-gapped GPU host the repository comes with a bundle and no git: the
bundle's install.sh unpacks the trees, and the pytest line tests/README.md
gives for each base must pass there as it stands, no file excluded by hand.
On the H200, v0.5.23's registered test was missing there (the bundle carried
python/ only) and test_ladder failed instead of skipping. Here each base's
bundle is made from this checkout's build tree (a demo wheel stands for the
GPU wheels, which this path only installs), unpacked into a copy of the
repository with no ``.git`` anywhere, and the README's lines run: install.sh as
written; pytest's collection of the line; and the cases whose skip decisions a
bundle host changes. Needs `make apply` (as `make test` runs it first).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from sgltest import ROOT, demo_wheel, run

from sglpatch.bundle import assemble
from sglpatch.layout import Layout
from sglpatch.pin import load_pin

README = ROOT / "tests" / "README.md"
# What a copied repository holds (no build/, no .git, no venv).
COPIED = ("scripts", "tests", "patches", "ci", "pyproject.toml")
# The cases (of v0.5.12's line) whose outcome on a bundle host is a skip, and why.
SKIPS = {
    "test_ladder": "no build tree at {tree} (its files only, as a bundle unpacks them)",
    "test_each_prefix": "the ladder needs the commits in {tree} (`make apply`)",
}


def readme_lines() -> dict[str, list[str]]:
    """base -> the lines of its ```sh block in tests/README.md's "On a GPU"."""
    section = README.read_text().split("\n## On a GPU\n", 1)[1].split("\n## ", 1)[0]
    found = {}
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
        lines = [line for line in lines if line]
        base = re.match(r"bash build/([^/]+)/bundle/install\.sh ", lines[0])
        assert base, f"tests/README.md: a GPU block that does not start with install.sh: {lines}"
        found[base[1]] = lines
    return found


LINES = readme_lines()


def test_the_readme_gives_each_base_its_lines():
    assert sorted(LINES) == ["v0.5.12", "v0.5.23"]
    for base, lines in LINES.items():
        assert len(lines) == 3, lines
        assert lines[1].startswith("export PYTHONPATH=scripts:")
        assert lines[2].startswith("python3 -m pytest ") and f"--base {base}" in lines[2]


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> Path:
    """A copy of the repository without git, each base's bundle in build/<base>/bundle."""
    root = tmp_path_factory.mktemp("gpu-host") / "repo"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            shutil.copyfile(source, root / name)
    for base in LINES:
        built = Layout.create(ROOT / "build", base=base)
        if not (built.sglang / ".git").is_dir():
            pytest.fail(f"no build tree at {built.sglang}: run `make apply` first")
        aside = tmp_path_factory.mktemp(f"bundle-{base}")
        (aside / "sglang").symlink_to(built.sglang)
        layout = replace(built, build=aside)
        assemble(layout, load_pin(layout.pin_file), [demo_wheel(aside)])
        shutil.copytree(layout.bundle, root / "build" / base / "bundle")
    assert not list(root.rglob(".git"))
    return root


def _shell_words(line: str, site: Path) -> list[str]:
    """A README line as argv: /tmp/site is the test's, python3 this interpreter."""
    words = line.replace("/tmp/site", str(site)).split()
    return [sys.executable if word == "python3" else word for word in words]


@pytest.fixture(scope="module")
def installed(host: Path) -> dict[str, dict]:
    """Per base: install.sh run as the README writes it; the environment its
    export line gives."""
    out = {}
    for base, (install, export, _) in LINES.items():
        site = host.parent / f"site-{base}"
        drop = ("SGLPATCH_", "PYTEST_", "BUILD")  # none of make's, this run's or a build's
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        proc = run(_shell_words(install, site), cwd=host, env={**env, "PYTHON": sys.executable})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        name, _, value = export.removeprefix("export ").partition("=")
        env[name] = value.replace("/tmp/site", str(site))
        out[base] = {"env": env, "install": proc.stdout}
    return out


@pytest.mark.parametrize("base", sorted(LINES))
def test_install_sh_as_the_readme_writes_it(host: Path, installed: dict, base: str):
    """The trees are where the tests read them, every file the series changes
    among them, and no git anywhere."""
    tree = host / "build" / base / "sglang"
    assert f"unpacked the patched tree into {tree}" in installed[base]["install"]
    built = Layout.create(ROOT / "build", base=base)
    changed = subprocess.run(
        ["git", "diff", "--name-only", f"base/{base}", "patched"],
        cwd=built.sglang,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert changed
    for name in changed:
        assert (tree / name).read_bytes() == (built.sglang / name).read_bytes(), name
    assert not (tree / ".git").exists() and not (host / "build" / base / "base" / ".git").exists()


def _pytest(host: Path, installed: dict, base: str, *extra: str) -> subprocess.CompletedProcess:
    """The README's pytest line of ``base`` in the host, with ``extra`` options."""
    argv = _shell_words(LINES[base][2], host.parent / f"site-{base}")
    argv += ["-p", "no:cacheprovider", *extra]
    return subprocess.run(
        argv, cwd=host, env=installed[base]["env"], capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("base", sorted(LINES))
def test_the_readmes_pytest_line_collects_there(host: Path, installed: dict, base: str):
    proc = _pytest(host, installed, base, "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    counts = re.search(r"^(\d+)(?:/\d+)? tests collected", proc.stdout, re.M)
    assert counts and int(counts[1]) > 0, proc.stdout[-2000:]
    assert "error" not in proc.stdout.lower().split("tests collected")[-1], proc.stdout[-2000:]


def test_what_needs_the_series_commits_skips_there_saying_why(host: Path, installed: dict):
    """test_ladder failed there ("no build tree ...: run `make apply` first") and
    test_series_prefixes was excluded by hand: both skip, with the reason."""
    tree = host / "build" / "v0.5.12" / "sglang"
    wanted = {name: why.format(tree=tree) for name, why in SKIPS.items()}
    proc = _pytest(host, installed, "v0.5.12", "-q", "-rs", "-k", " or ".join(wanted))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert not re.search(r"\d+ (failed|error)", out), out[-4000:]
    assert re.search(r"\d+ skipped", out) and not re.search(r"\d+ passed", out), out[-4000:]
    for why in wanted.values():
        assert why in out, out[-4000:]


def test_the_registered_test_reaches_the_host(host: Path, installed: dict):
    """v0.5.23's registered tests (the series adds them under test/): all 16
    cases of test_registered23.py errored on the H200 with "upstream test file
    missing"."""
    source = (ROOT / "tests" / "v0_5_23" / "test_registered23.py").read_text()
    paths = re.findall(r'^    "\w+": "(test/registered/[^"]+)",$', source, re.M)  # FILES
    assert paths, "test_registered23.FILES names no upstream file"
    built = Layout.create(ROOT / "build", base="v0.5.23")
    for path in paths:
        there = host / "build" / "v0.5.23" / "sglang" / path
        assert there.read_bytes() == (built.sglang / path).read_bytes()
