"""Fixtures of the sglpatch tests: an offline environment, workspaces, patches.

Everything is built in temporary folders. The only inputs from outside are the
pinned wheels of the two bases, taken from build/<base>/cache (or, for
v0.5.12, SGLPATCH_TEST_WHEEL) and downloaded once into it when none of those
has them (`make test` applies every base first, which puts them there).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sgltest import (  # noqa: E402
    DEFAULT,
    PIN,
    PIN_23,
    SCRIPTS,
    SECOND,
    TARGET,
    Workspace,
    commit_all,
    edit_target,
    git,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "bad_input: one bad input or fault per test case, counted in the README"
        " (pytest tests/tooling -m bad_input --collect-only -q)",
    )


@pytest.fixture(scope="session")
def offline_env(tmp_path_factory: pytest.TempPathFactory):
    """No user git config, a fixed identity, and a pip that cannot reach an index."""
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Test User\n\temail = test@example.invalid\n")
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(("GIT_", "SGLPATCH_", "PIP_"))]:
        del os.environ[key]
    os.environ.update(
        GIT_CONFIG_GLOBAL=str(gitconfig),
        GIT_CONFIG_NOSYSTEM="1",
        PIP_NO_INDEX="1",
        PIP_CONFIG_FILE=os.devnull,
        PIP_FIND_LINKS=str(home),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONPATH=str(SCRIPTS),
    )
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def pinned_wheel(offline_env) -> Path:
    """The pinned wheel, verified; fetched once into build/cache if need be."""
    from sglpatch.upstream import fetch_pinned_wheel

    cache = DEFAULT.cache
    candidate = os.environ.get("SGLPATCH_TEST_WHEEL")
    if candidate and Path(candidate).is_file() and not (cache / PIN.wheel).exists():
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(candidate, cache / PIN.wheel)
    offline = {k: os.environ.pop(k) for k in ("PIP_NO_INDEX", "PIP_CONFIG_FILE")}
    try:  # the one download the tests may make, when no copy is around
        return fetch_pinned_wheel(PIN, cache).path
    finally:
        os.environ.update(offline)


@pytest.fixture(scope="session")
def second_wheel(offline_env) -> Path:
    """The second base's pinned wheel (v0.5.23), verified, from its cache, where
    `make apply` (every base, as `make test` runs it) put it; fetched once if not."""
    from sglpatch.upstream import fetch_pinned_wheel

    offline = {k: os.environ.pop(k) for k in ("PIP_NO_INDEX", "PIP_CONFIG_FILE")}
    try:
        return fetch_pinned_wheel(PIN_23, SECOND.cache).path
    finally:
        os.environ.update(offline)


def scratch_root(tmp_path: Path) -> tuple[Path, bool]:
    """Where a workspace goes: tmpfs when there is room (these tests are I/O
    bound), else ``tmp_path``. The flag says whether it must be removed."""
    shm = Path("/dev/shm")
    wanted = os.environ.get("SGLPATCH_TEST_TMPFS", "1") != "0"
    if wanted and shm.is_dir() and os.access(shm, os.W_OK):
        if shutil.disk_usage(shm).free > 4 << 30:
            return Path(tempfile.mkdtemp(prefix="sglpatch-test-", dir=shm)), True
    return tmp_path, False


@pytest.fixture
def workspace(tmp_path: Path, pinned_wheel: Path):
    """A fresh workspace whose cache already holds the pinned wheel.

    Its build trees are deleted afterwards: they are large.
    """
    root, temporary = scratch_root(tmp_path)
    yield Workspace.create(root, pinned_wheel)
    shutil.rmtree(root if temporary else root / "build", ignore_errors=True)


@pytest.fixture(scope="session")
def raw_patches(tmp_path_factory: pytest.TempPathFactory, pinned_wheel: Path) -> Path:
    """Three patches made by plain ``git format-patch`` against the real base.

    0001 edits the imports, 0002 appends a function, 0003 adds a new file.
    """
    root = tmp_path_factory.mktemp("raw")
    space = Workspace.create(root, pinned_wheel)
    space.ok("apply")
    tree = space.tree
    edit_target(tree, "import math\n", "import math  # [perf] used by the page math\n")
    commit_all(
        tree,
        "Alice Dev <alice@example.com>",
        "[perf] Skip a needless fill",
        "2026-06-01T10:00:00+02:00",
    )
    with (tree / TARGET).open("a") as handle:
        handle.write("\n\ndef sglpatch_helper() -> int:\n    return 42\n")
    commit_all(
        tree,
        "Bob Dev <bob@example.com>",
        "[fix] Add a helper\n\nWith a body line.",
        "2026-06-02T11:30:00+00:00",
    )
    new_file = tree / "python/sglang/srt/layers/attention/sglpatch_note.py"
    new_file.write_text('"""A file the series adds."""\n\nNOTE = "patched"\n')
    commit_all(
        tree,
        "Alice Dev <alice@example.com>",
        "[feat] Add a note module",
        "2026-06-03T09:15:00-07:00",
    )
    out = root / "out"
    git(tree, "format-patch", "-q", "-o", str(out), "base/v0.5.12..HEAD")
    return out


@pytest.fixture(scope="session")
def canonical_patches(
    tmp_path_factory: pytest.TempPathFactory, raw_patches: Path, pinned_wheel: Path
) -> Path:
    """The raw patches applied and exported by sglpatch: the canonical form."""
    space = Workspace.create(tmp_path_factory.mktemp("canonical"), pinned_wheel)
    space.use_patches(raw_patches)
    space.ok("apply")
    space.ok("export")  # rewrites the raw files the tree was built from
    return space.patches
