"""`make bench`'s command line: one-line refusals before any work, a help that
shows the real invocation and every default, the presets, and the recorded
command."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mla_bench import config, ladder
from mla_bench.__main__ import invocation
from mla_harness import subprocess_env
from sglpatch.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps", "0"], "--steps must be >= 1"),
        (["--batch-sizes", "1,x"], "expected comma-separated integers"),
        (["--batch-sizes", "128"], "--batch-sizes must not exceed --cuda-graph-max-bs"),
        (["--quick", "--batch-sizes", "8"], "--batch-sizes must not exceed --cuda-graph-max-bs"),
        (["--repeats", "0"], "--repeats must be >= 1"),
        (["--page-size", "16"], "invalid choice"),
        (["--quick", "--full"], "not allowed with argument"),
        (["--frobnicate"], "unrecognized arguments"),
        (["--without-last"], "go with --runners"),
        (["--runner-loop", "5"], "go with --runners"),
        (["--runner-batch-sizes", "1,64"], "go with --runners"),
        (["--runners", "--runner-batch-sizes", "0"], "--runner-batch-sizes needs batch sizes >= 1"),
        (["--resume"], "go with --runners"),
        (["--runners"], "--runners times real CUDA graphs: it needs a GPU"),
        (["--runners-only", "--check"], "--runners-only measures no metadata"),
        (["--runners-only", "--ladder"], "--runners-only measures no metadata"),
    ],
)
def test_bad_flags(flags, message, tmp_path):
    cmd = [sys.executable, "-m", "mla_bench", "--build", str(tmp_path), "--device", "cpu", *flags]
    proc = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr  # one line, no usage dump
    assert proc.stderr.startswith("make bench: error: ")
    assert not (tmp_path / "bench").exists()


def test_missing_trees_named(tmp_path):
    env = subprocess_env()
    env.pop("SGLPATCH_BASE_TREE", None)
    env.pop("SGLPATCH_PATCHED_TREE", None)
    cmd = [sys.executable, "-m", "mla_bench", "--build", str(tmp_path), "--device", "cpu"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "tree missing" in proc.stderr and "make apply" in proc.stderr


def test_help_through_make_shows_the_invocation_every_default_and_what_quick_sets():
    python = ROOT / ".venv" / "bin" / "python"
    proc = subprocess.run(
        ["make", "-s", "-o", "venv", "-o", "apply", "bench", "BENCH_ARGS=--help"],
        cwd=ROOT,
        env={**subprocess_env(), "MAKEFLAGS": "", "VENV": str(python.parent.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert text.startswith('usage: make bench BENCH_ARGS="[options]"')
    assert "--quick on CPU, where --full takes about 32 min on 2 cores" in text
    assert "contexts 4096, batch sizes 1,4, CUDA-graph max bs 4" in text  # what --quick sets
    assert "(default: --full 81920,163840; --quick 4096)" in text
    entries = re.split(r"\n  (?=-)", proc.stdout.split("options:", 1)[1])
    for action in config.parser()._actions:
        if action.nargs != 0:  # a flag with a value: its default is shown
            entry = next(e for e in entries if e.startswith(f"{action.option_strings[-1]} "))
            assert "(default: " in " ".join(entry.split()), entry


def test_help_names_the_paths_the_bench_uses(tmp_path):
    """--ladder's help once named <build>/ladder; the trees are per base. Every
    path the help names is <build>/<base>/X, and X is where the bench looks."""
    from sglpatch.layout import Layout

    text = " ".join(config.parser().format_help().split())
    named = re.findall(r"<build>/[\w<>/-]+", text)
    assert sorted(set(named)) == [
        "<build>/<base>/base",
        "<build>/<base>/bench",
        "<build>/<base>/ladder",
        "<build>/<base>/sglang",
        "<build>/<base>/without-last",
    ]
    layout = Layout.create(tmp_path)
    assert [layout.base, layout.sglang, layout.ladder] == [
        tmp_path / layout.name / leaf for leaf in ("base", "sglang", "ladder")
    ]
    with pytest.raises(UserError, match=re.escape(str(layout.build / "without-last"))):
        ladder.without_last(layout, tmp_path)  # no commits, no folder: it names where it looked
    assert "build/<base>" not in text.replace("<build>/<base>", "")


def _args(*flags: str) -> argparse.Namespace:
    return config.parser().parse_args(list(flags))


def test_the_cpu_default_is_quick_and_the_full_sizes_are_asked_for():
    cpu = config.from_args(_args(), cuda=False)
    assert (cpu.contexts, cpu.batch_sizes, cpu.repeats, cpu.warmup) == ([4096], [1, 4], 2, 0)
    full_cpu = config.from_args(_args("--full"), cuda=False)
    assert full_cpu.contexts == [81920, 163840] and (full_cpu.repeats, full_cpu.warmup) == (3, 1)
    gpu = config.from_args(_args(), cuda=True)
    assert gpu.batch_sizes == [1, 8, 32, 64] and (gpu.repeats, gpu.warmup) == (200, 20)
    assert config.from_args(_args("--quick"), cuda=True).contexts == [4096]
    given = config.from_args(_args("--quick", "--contexts", "8192", "--repeats", "5"), cuda=False)
    assert (given.contexts, given.repeats, given.batch_sizes) == ([8192], 5, [1, 4])


@pytest.mark.parametrize(
    ("env", "argv", "command"),
    [
        (
            {"SGLPATCH_MK_BENCH_ARGS": "--quick", "SGLPATCH_MK_BUILD": "build"},
            ["--build", "build", "--quick"],
            'make bench BENCH_ARGS="--quick"',
        ),
        (
            {"SGLPATCH_MK_BENCH_ARGS": "", "SGLPATCH_MK_BUILD": "/b"},
            ["--build", "/b"],
            "make bench BUILD=/b",
        ),
        (
            {},
            ["--build", "build", "--quick"],
            "PYTHONPATH=scripts python -m mla_bench --build build --quick",
        ),
        (
            {
                "SGLPATCH_MK_BENCH_ARGS": "",
                "SGLPATCH_MK_BUILD": "build",
                "SGLPATCH_MK_BASE": "v0.5.23",
            },
            ["--build", "build", "--base=v0.5.23"],
            "make bench BASE=v0.5.23",
        ),
        (  # make's variables inherited by a run make did not start (make test)
            {"SGLPATCH_MK_BENCH_ARGS": "", "SGLPATCH_MK_BUILD": "build"},
            ["--build", "build", "--quick"],
            "PYTHONPATH=scripts python -m mla_bench --build build --quick",
        ),
    ],
    ids=["make", "make-build", "module", "make-base", "inherited"],
)
def test_the_recorded_command_can_be_run(monkeypatch, env, argv, command):
    for key in ("SGLPATCH_MK_BENCH_ARGS", "SGLPATCH_MK_BUILD", "SGLPATCH_MK_BASE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert invocation(argv) == command
