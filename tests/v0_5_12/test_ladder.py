"""``make bench --ladder``: per-patch trees from sglpatch's build tree and layout."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from mla_bench import ladder
from sglpatch.layout import Layout
from sglpatch.pin import load_pin
from sglpatch.queue import patch_commits
from sglpatch.series import load

BASE = "v0.5.12"


def test_one_step_per_patch_with_the_target_as_of_that_patch(trees, request, tmp_path):
    built = Layout.create(request.config.getoption("--build"), base=BASE)
    if not (built.sglang / ".git").exists():  # the trees of a bundle (a GPU host)
        pytest.skip(
            f"no build tree at {built.sglang} (its files only, as a bundle unpacks them):"
            " the ladder is read from the series' commits; run `make apply` first"
        )
    (tmp_path / "sglang").symlink_to(built.sglang)
    layout = replace(built, build=tmp_path)  # the ladder goes to tmp_path/ladder
    pin = load_pin(layout.pin_file)
    commits = patch_commits(layout)
    assert len(commits) == len(load(layout.patches))
    ladder.prepare(layout)
    steps = ladder.trees(layout, trees["base"])
    assert [label.split(" ", 1)[1] for label, _ in steps] == [subject for _, subject in commits]
    for (commit, _), (_, root) in zip(commits, steps, strict=True):
        want = subprocess.run(
            ["git", "-C", str(built.sglang), "show", f"{commit}:{pin.target}"],
            capture_output=True,
            check=True,
        ).stdout
        assert (root.parent / pin.target).read_bytes() == want
    last = steps[-1][1].parent / pin.target
    assert last.read_bytes() == (trees["patched"].parent / pin.target).read_bytes()
