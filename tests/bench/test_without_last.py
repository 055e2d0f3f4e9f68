"""``make bench --runners --without-last``'s third tree: the patched tree less
the series' last pull request (the patches the last description in
``patches/<base>/prs/`` lists), built from the build tree's commits."""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess

import pytest

from mla_bench import ladder
from sglpatch.errors import UserError
from sglpatch.layout import Layout
from sglpatch.queue import patch_commits

# Both tests write build/v0.5.23/without-last(-tree): one worker under make test.
pytestmark = [pytest.mark.base("v0.5.23"), pytest.mark.xdist_group("without-last")]


def test_the_files_the_last_pull_request_changes_are_as_before_it(trees_of, request):
    patched = trees_of("v0.5.23")["patched"]
    layout = Layout.create(request.config.getoption("--build"), base="v0.5.23")
    last_request = sorted((layout.patches / "prs").glob("*.md"))[-1].read_text()
    numbers = re.findall(r"^\| (\d{4}) \|", last_request, re.M)
    # The request's patches, all left out (PR 7's four were, while it was the
    # last; PR 8 is one).
    assert numbers, last_request
    root = ladder.without_last(layout, patched)
    commits = patch_commits(layout)
    series = (layout.patches / "series").read_text().split()
    assert [name[:4] for name in series[-len(numbers) :]] == numbers
    index = json.loads((layout.build / "without-last" / "index.json").read_text())
    assert index["patches"] == [subject for _, subject in commits[-len(numbers) :]]
    git = ["git", "-C", str(layout.sglang)]
    before = f"patched~{len(numbers)}"
    changed = subprocess.run(
        [*git, "diff", "--no-renames", "--name-status", before, "patched"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    package = [line.split("\t", 1) for line in changed if "\tpython/" in line]
    assert len(package) > 1, changed
    for status, path in package:
        target = root / path.removeprefix("python/")
        if status == "A":
            assert not target.exists(), path
            continue
        was = subprocess.run([*git, "show", f"{before}:{path}"], capture_output=True, check=True)
        assert target.read_bytes() == was.stdout, path
        assert target.read_bytes() != (patched / path.removeprefix("python/")).read_bytes()
    # Everything else is the patched tree's.
    untouched = "sglang/srt/layers/attention/trtllm_mla_backend.py"
    assert filecmp.cmp(root / untouched, patched / untouched, shallow=False)


def test_a_host_without_the_commits_builds_it_from_the_copied_folder(trees_of, tmp_path, request):
    # As on a GPU host from the bundle: no .git in the build tree, the
    # without-last folder copied beside it.
    patched = trees_of("v0.5.23")["patched"]
    layout = Layout.create(request.config.getoption("--build"), base="v0.5.23")
    with_git = ladder.without_last(layout, patched)
    copied = tmp_path / "v0.5.23"
    (copied / "sglang").mkdir(parents=True)  # a build tree without its commits
    shutil.copytree(layout.build / "without-last", copied / "without-last")
    bundled = Layout.create(tmp_path, base="v0.5.23")
    root = ladder.without_last(bundled, patched)
    index = json.loads((copied / "without-last" / "index.json").read_text())
    for path in index["restore"]:
        assert filecmp.cmp(root / path, with_git / path, shallow=False), path
    for path in index["remove"]:
        assert not (root / path).exists()
    shutil.rmtree(copied / "without-last")
    with pytest.raises(UserError, match="--without-last needs the commits"):
        ladder.without_last(bundled, patched)


def test_a_file_the_pull_request_deleted_is_restored_with_its_folder(trees_of, tmp_path):
    # A pull request that deletes a whole package folder: the tree without it
    # gets the folder back.
    patched = trees_of("v0.5.23")["patched"]
    material = tmp_path / "v0.5.23" / "without-last"
    gone = "sglang/srt/removed_by_the_pr/module.py"
    (material / "before" / gone).parent.mkdir(parents=True)
    (material / "before" / gone).write_text("# before the pull request\n")
    index = {"patches": ["[perf] gone"], "restore": [gone], "remove": []}
    (material / "index.json").write_text(json.dumps(index))
    (tmp_path / "v0.5.23" / "sglang").mkdir()  # a build tree without its commits
    root = ladder.without_last(Layout.create(tmp_path, base="v0.5.23"), patched)
    assert (root / gone).read_text() == "# before the pull request\n"
