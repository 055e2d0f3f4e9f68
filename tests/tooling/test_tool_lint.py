"""``sglpatch lint-patched``: the real pre-commit runs hooks of the test's
own (``language: system``, no network) in place of the base's config; the
base file TARGET (v0.5.12's) has one deviation of each kind: a blank line
after a signature (line 970, which ``tidy`` drops as ruff format does) and
the word ``unpadding`` (line 142, which ``spell`` reports as codespell does)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sgltest import ROOT, TARGET, Workspace, commit_all, one_error_line, snapshot

NEW_FILE = "python/sglang/srt/layers/attention/sglpatch_note.py"
WRAPPER = """#!/usr/bin/env bash
# pre-commit with the test's hook config in place of the base's; logs each call.
printf '%s %s\\n' "$PWD" "$*" >> "$HOOK_LOG"
args=("$@")
for i in "${!args[@]}"; do
    if [ "${args[$i]}" = --config ]; then args[i + 1]=$HOOKS; fi
done
if [ -n "${FAKE_EXIT:-}" ]; then exit "$FAKE_EXIT"; fi
exec "$PYTHON" -m pre_commit "${args[@]}"
"""
# In the manner of ruff format (exit 0) or of pre-commit-hooks' fixers
# (--fixer: exit 1, "Fixing <file>"): drop a blank line after a line ending in ':'.
TIDY = """import sys
fixer = sys.argv[1] == "--fixer"
changed = []
for name in sys.argv[1 + fixer :]:
    with open(name) as handle:
        lines = handle.readlines()
    kept = [
        line
        for i, line in enumerate(lines)
        if not (line == "\\n" and i and lines[i - 1].rstrip().endswith(":"))
    ]
    if kept != lines:
        with open(name, "w") as handle:
            handle.writelines(kept)
        changed.append(name)
if fixer:
    print("".join(f"Fixing {name}\\n" for name in changed), end="")
else:
    print(f"{len(changed)} file(s) reformatted")
sys.exit(1 if fixer and changed else 0)
"""
# In the manner of codespell: "path:N: word ==> fix", exit 65.
SPELL = """import sys
found = False
for name in sys.argv[1:]:
    with open(name, errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if "unpadding" in line:
                print(f"{name}:{number}: unpadding ==> un-padding")
                found = True
sys.exit(65 if found else 0)
"""
# In the manner of check-ast on a file it cannot parse: no line to compare by.
CRASH = """import sys
bad = [name for name in sys.argv[1:] if "unpadding" in open(name).read()]
for name in bad:
    print(f"{name}: failed parsing with CPython 3.11.7:")
    print("    SyntaxError: invalid syntax")
sys.exit(1 if bad else 0)
"""
HOOK = """      - id: {id}
        name: {id}
        entry: {python} {script}
        args: {args}
        language: system
        types: [{types}]
"""


def _hooks(directory: Path, *hooks: tuple[str, str, list[str], str]) -> Path:
    """A pre-commit config of local hooks: (id, script text, args, file type)."""
    text = "repos:\n  - repo: local\n    hooks:\n"
    for hook_id, script, args, types in hooks:
        path = directory / f"{hook_id}.py"
        path.write_text(script)
        fields = dict(id=hook_id, python=sys.executable, script=path, args=args, types=types)
        text += HOOK.format(**fields)
    config = directory / f"hooks-{len(list(directory.glob('hooks-*')))}.yaml"
    config.write_text(text)
    return config


@pytest.fixture
def pre_commit(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "pre-commit"
    path.parent.mkdir()
    path.write_text(WRAPPER)
    path.chmod(0o755)
    return path


@pytest.fixture
def linted(workspace: Workspace, canonical_patches: Path) -> Workspace:
    """The three canonical patches applied: 0001 edits TARGET's imports, 0002
    appends a function to it, 0003 adds NEW_FILE."""
    workspace.use_patches(canonical_patches)
    workspace.ok("apply")
    return workspace


def _lint(space: Workspace, wrapper: Path, config: Path | None = None, **env: str):
    """Run lint-patched; return the process and the wrapper's calls (cwd, args)."""
    log = wrapper.parent / "log"
    log.unlink(missing_ok=True)
    if config is None:
        tidy = ("tidy", TIDY, [], "python")
        config = _hooks(wrapper.parent, tidy, ("spell", SPELL, [], "text"))
    home = str(wrapper.parent / "pre-commit-home")
    env = {"HOOK_LOG": str(log), "HOOKS": str(config), "PYTHON": sys.executable, **env}
    proc = space.tool(
        "lint-patched", "--pre-commit", str(wrapper), env={"PRE_COMMIT_HOME": home, **env}
    )
    calls = [line.split(" ", 1) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


def _commit(space: Workspace, path: str, old: str, new: str) -> None:
    """One more commit on ``patched``: ``old`` replaced by ``new`` in ``path``."""
    file = space.tree / path
    text = file.read_text()
    assert old in text, old
    file.write_text(text.replace(old, new, 1))
    commit_all(space.tree, "Test User <test@example.invalid>", "more", "2026-06-04T10:00:00+00:00")


def test_lint_runs_on_the_base_and_patched_in_scratch_worktrees(linted: Workspace, pre_commit):
    before = snapshot(linted.tree)
    proc, calls = _lint(linted, pre_commit)
    assert proc.returncode == 0, proc.stderr
    config = str(ROOT / "ci" / "sglang-pre-commit.yaml")
    (base_cwd, base_args), (cwd, args) = calls
    for where, argv in calls:
        assert where != str(linted.tree) and not Path(where).exists()
        assert argv.startswith(f"run --config {config} --color=never --files ")
    assert base_args.endswith(f"--files {TARGET}") and args.endswith(f"--files {NEW_FILE} {TARGET}")
    assert "2 finding(s) the hooks make on the base's own files" in proc.stderr
    assert snapshot(linted.tree) == before


@pytest.mark.parametrize("style", [[], ["--fixer"]], ids=["formatter", "fixer"])
def test_lint_leaves_the_base_files_own_findings_to_upstream(linted: Workspace, pre_commit, style):
    """The series shifts both deviations of the base file down a line: they
    are the base's, compared by content, not by line number."""
    _commit(linted, TARGET, "import math", "# a line above both deviations\nimport math")
    config = _hooks(
        pre_commit.parent, ("tidy", TIDY, style, "python"), ("spell", SPELL, [], "text")
    )
    proc, _ = _lint(linted, pre_commit, config)
    assert proc.returncode == 0, proc.stderr
    assert "2 finding(s) the hooks make on the base's own files" in proc.stderr


def test_lint_fails_on_a_rewrite_the_series_adds(linted: Workspace, pre_commit):
    """A second blank line after a signature: the base's own one still passes."""
    _commit(linted, TARGET, "def sglpatch_helper() -> int:\n", "def sglpatch_helper() -> int:\n\n")
    proc, _ = _lint(linted, pre_commit)
    assert proc.returncode == 1, proc.stderr
    assert "1 problem(s)" in proc.stderr
    lines = (linted.tree / TARGET).read_text().splitlines()
    blank = [i + 1 for i, line in enumerate(lines) if not line and lines[i - 1].endswith(":")]
    where = ",".join(map(str, blank))
    assert f"{TARGET}:{where}: tidy rewrote -'' (2 time(s); the base file: 1)" in proc.stderr


def test_lint_fails_on_a_report_the_series_adds(linted: Workspace, pre_commit):
    """Named by the line's text: the hook's line number counts the lines of the
    file that the hooks before it left (tidy dropped one above)."""
    _commit(linted, TARGET, "    return 42\n", "    return 42  # no unpadding\n")
    proc, _ = _lint(linted, pre_commit)
    assert proc.returncode == 1, proc.stderr
    assert "1 problem(s)" in proc.stderr
    shown = "spell: unpadding ==> un-padding, in 'return 42  # no unpadding' (1 time(s); the base"
    assert f"{TARGET}:" in proc.stderr and shown in proc.stderr


def test_lint_fails_on_a_deviation_in_a_file_the_series_adds(linted: Workspace, pre_commit):
    _commit(
        linted,
        NEW_FILE,
        'NOTE = "patched"\n',
        'NOTE = "patched"\n\n\ndef note():\n\n    return 1\n',
    )
    proc, _ = _lint(linted, pre_commit)
    assert proc.returncode == 1, proc.stderr
    assert f"{NEW_FILE}:7: tidy rewrote -'' (1 time(s); the base file: 0)" in proc.stderr


def test_lint_fails_on_output_it_cannot_compare(linted: Workspace, pre_commit):
    """A failure without a line to compare by fails, though the base's file
    fails the same way."""
    config = _hooks(pre_commit.parent, ("crash", CRASH, [], "python"))
    proc, calls = _lint(linted, pre_commit, config)
    assert proc.returncode == 1 and len(calls) == 2, proc.stderr
    assert f"crash: exit 1, output not comparable: {TARGET}: failed parsing" in proc.stderr


def test_lint_fails_when_pre_commit_fails(linted: Workspace, pre_commit):
    proc, _ = _lint(linted, pre_commit, FAKE_EXIT="3")
    assert proc.returncode == 1 and "pre-commit exited 3: no output" in proc.stderr


@pytest.mark.bad_input
def test_lint_missing_pre_commit(linted: Workspace, tmp_path: Path):
    proc = linted.tool("lint-patched", "--pre-commit", str(tmp_path / "none"))
    assert "pre-commit not found" in one_error_line(proc)


def test_lint_empty_series(workspace: Workspace, pre_commit):
    workspace.ok("apply")
    proc, calls = _lint(workspace, pre_commit)
    assert proc.returncode == 0 and "nothing to lint" in proc.stderr and calls == []


def test_hook_config_pins_upstream_tools():
    text = (ROOT / "ci" / "sglang-pre-commit.yaml").read_text()
    for pin in (
        "isort==5.13.2",
        "black==24.10.0",
        "codespell==2.4.1",
        "pre-commit-hooks==5.0.0",
    ):
        assert pin in text
    for entry in (
        "trailing-whitespace-fixer",
        "end-of-file-fixer",
        "check-ast",
        "check-merge-conflict",
        "debug-statement-hook",
    ):
        assert f"entry: {entry}" in text


def test_each_base_has_its_upstream_hook_config():
    """patches/bases.toml names each base's hook config; v0.5.23's upstream
    formats with ruff (its unpatched files are `ruff format` clean), not black."""
    from sgltest import DEFAULT, SECOND

    assert DEFAULT.lint_config == ROOT / "ci" / "sglang-pre-commit.yaml"
    assert SECOND.lint_config == ROOT / "ci" / "sglang-v0.5.23-pre-commit.yaml"
    text = SECOND.lint_config.read_text()
    assert "entry: ruff format --isolated\n" in text and "ruff==0.14.7" in text
    assert "black" not in text.split("repos:", 1)[1]
