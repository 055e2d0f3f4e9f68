"""scripts/bench_eagle_tpot.sh: CLI, dry run, refusals, and a stubbed end-to-end run.

No test starts a real server: the dry run only prints, the refusals stop before
any launch, and the end-to-end test puts stand-ins for ``python``, ``curl`` and
``nvidia-smi`` first on PATH (the stand-in "server" is a ``sleep``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_eagle_tpot.sh"
BASH = shutil.which("bash")
PROG = "bench_eagle_tpot.sh"


def run(*args, env=None, timeout=120):
    return subprocess.run(
        [BASH, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        env=env if env is not None else os.environ.copy(),
        timeout=timeout,
    )


def make_tree(root: Path) -> Path:
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    return root


@pytest.fixture
def tree_args(tmp_path):
    base = make_tree(tmp_path / "base" / "python")
    patched = make_tree(tmp_path / "patched" / "python")
    return ["--base-tree", base, "--patched-tree", patched, "--out", tmp_path / "out"]


def write_exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_nvidia_smi(bindir: Path, caps: list[str]) -> None:
    lines = "\n".join(caps)
    gpus = "\n".join(f"GPU {i}: NVIDIA Fake (UUID: GPU-{i})" for i in range(len(caps)))
    write_exe(
        bindir / "nvidia-smi",
        f"""#!/usr/bin/env bash
case "$*" in
  *compute_cap*) printf '%s\\n' "{lines}" ;;
  *) printf '%s\\n' "{gpus}" ;;
esac
""",
    )


def one_error_line(proc, code):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# ------------------------------------------------------------------ CLI


def test_help():
    proc = run("--help")
    assert proc.returncode == 0
    for flag in (
        "--dry-run",
        "--base-tree",
        "--patched-tree",
        "--model",
        "--draft-model",
        "--tp",
        "--steps",
        "--topk",
        "--draft-tokens",
        "--context",
        "--server-args",
        "--startup-timeout",
        "--num-prompts",
        "--gsp-system-prompt-len",
        "--out",
    ):
        assert flag in proc.stdout
    assert "moonshotai/Kimi-K2.5" in proc.stdout and "81920" in proc.stdout
    assert proc.stdout.startswith("Usage:")


def launch_lines(out):
    return [line for line in out.splitlines() if "sglang.launch_server" in line]


def bench_lines(out):
    return [line for line in out.splitlines() if "sglang.bench_serving" in line]


def test_dry_run_default_commands(tree_args, tmp_path):
    proc = run("--dry-run", *tree_args)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    launches = launch_lines(out)
    assert len(launches) == 2
    base, patched = (str(tmp_path / t / "python") for t in ("base", "patched"))
    assert f"PYTHONPATH={base}" in launches[0] and f"PYTHONPATH={patched}" in launches[1]
    for line in launches:
        words = line.split()
        for flag, value in [
            ("--model-path", "moonshotai/Kimi-K2.5"),
            ("--tp", "4"),
            ("--port", "30000"),
            ("--host", "127.0.0.1"),
            ("--attention-backend", "trtllm_mla"),
            ("--speculative-algorithm", "EAGLE3"),
            ("--speculative-num-steps", "3"),
            ("--speculative-eagle-topk", "1"),
            ("--speculative-num-draft-tokens", "4"),
            ("--context-length", "81920"),
        ]:
            assert words[words.index(flag) + 1] == value, (flag, line)
        assert "--trust-remote-code" in words
        assert "--speculative-draft-model-path" not in words  # empty by default: omitted
    benches = bench_lines(out)
    assert len(benches) == 2
    for tree, line in zip(("base", "patched"), benches, strict=True):
        words = line.split()
        for flag, value in [
            ("--backend", "sglang"),
            ("--dataset-name", "generated-shared-prefix"),
            ("--max-concurrency", "1"),
            ("--num-prompts", "64"),
            ("--gsp-num-groups", "1"),
            ("--gsp-prompts-per-group", "64"),
            ("--gsp-system-prompt-len", "80000"),
            ("--gsp-question-len", "128"),
            ("--gsp-output-len", "1000"),
            ("--output-file", str(tmp_path / "out" / f"{tree}.jsonl")),
        ]:
            assert words[words.index(flag) + 1] == value, (flag, line)
    # Per tree, in order: launch, health wait, bench, kill; base entirely before patched.
    lines = out.splitlines()
    order = [
        i
        for i, line in enumerate(lines)
        if "sglang.launch_server" in line
        or "/health" in line
        or "sglang.bench_serving" in line
        or line.startswith("kill ")
    ]
    kinds = [
        (
            "launch"
            if "launch_server" in lines[i]
            else (
                "bench"
                if "bench_serving" in lines[i]
                else "kill"
                if lines[i].startswith("kill ")
                else "health"
            )
        )
        for i in order
    ]
    assert kinds == ["launch", "health", "health", "bench", "kill"] * 2
    assert not (tmp_path / "out").exists(), "a dry run creates nothing"


def test_dry_run_overrides(tree_args):
    proc = run(
        "--dry-run",
        *tree_args,
        "--steps",
        "2",
        "--draft-tokens",
        "3",
        "--tp",
        "8",
        "--context",
        "163840",
        "--topk=2",
        "--model",
        "/models/k2",
        "--draft-model",
        "/models/eagle3",
        "--port",
        "31000",
        "--server-args",
        "--mem-fraction-static 0.85 --cuda-graph-max-bs 8",
        "--gsp-output-len",
        "512",
        "--num-prompts",
        "16",
    )
    assert proc.returncode == 0, proc.stderr
    for line in launch_lines(proc.stdout):
        words = line.split()
        for flag, value in [
            ("--speculative-num-steps", "2"),
            ("--speculative-num-draft-tokens", "3"),
            ("--tp", "8"),
            ("--context-length", "163840"),
            ("--speculative-eagle-topk", "2"),
            ("--model-path", "/models/k2"),
            ("--speculative-draft-model-path", "/models/eagle3"),
            ("--port", "31000"),
            ("--mem-fraction-static", "0.85"),
            ("--cuda-graph-max-bs", "8"),
        ]:
            assert words[words.index(flag) + 1] == value, (flag, line)
    for line in bench_lines(proc.stdout):
        words = line.split()
        assert words[words.index("--gsp-output-len") + 1] == "512"
        assert words[words.index("--num-prompts") + 1] == "16"
        assert words[words.index("--port") + 1] == "31000"


def test_dry_run_needs_no_gpu_or_sglang(tree_args, tmp_path):
    """PATH without nvidia-smi or python: the dry run still works."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("dirname",):
        (bindir / tool).symlink_to(shutil.which(tool))
    proc = run("--dry-run", *tree_args, env={"PATH": str(bindir)})
    assert proc.returncode == 0, proc.stderr
    assert len(launch_lines(proc.stdout)) == 2


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--bogus"], "unknown flag: --bogus"),
        (["--bogus", "1"], "unknown flag: --bogus"),
        (["positional"], "unexpected argument"),
        (["--tp"], "--tp needs a value"),
        (["--model"], "--model needs a value"),
        (["--tp", "--steps", "2"], "--tp needs a value"),
        (["--tp", "four"], "--tp needs a positive integer"),
        (["--steps", "0"], "--steps needs a positive integer"),
        (["--context", "-5"], "--context needs a positive integer"),
        (["--draft-tokens", "3.5"], "--draft-tokens needs a positive integer"),
        (
            ["--gsp-system-prompt-len", ""],
            "--gsp-system-prompt-len needs a positive integer",
        ),
        (["--startup-timeout=0"], "--startup-timeout needs a positive integer"),
        (["--port", "70000"], "--port must be at most 65535"),
    ],
)
def test_usage_errors_exit_2(tree_args, args, needle):
    for extra in (["--dry-run"], []):
        proc = run(*extra, *tree_args, *args)
        line = one_error_line(proc, 2)
        assert line.startswith(f"{PROG}: error: ") and needle in line, line
        assert proc.stdout == ""


@pytest.mark.parametrize("which", ["base", "patched"])
@pytest.mark.parametrize("dry", [True, False])
def test_tree_without_sglang_exit_2(tmp_path, which, dry):
    good = make_tree(tmp_path / "good")
    bad = tmp_path / "bad"
    (bad / "sglang").mkdir(parents=True)  # no __init__.py
    paths = {"base": good, "patched": good, which: bad}
    args = ["--base-tree", paths["base"], "--patched-tree", paths["patched"]]
    proc = run(*(["--dry-run"] if dry else []), *args)
    line = one_error_line(proc, 2)
    assert f"{which} tree" in line and "sglang/__init__.py" in line


# ------------------------------------------------------------- refusals


def path_env(bindir: Path, keep_path=True):
    env = os.environ.copy()
    env["PATH"] = f"{bindir}:{env['PATH']}" if keep_path else str(bindir)
    return env


@pytest.mark.parametrize("cap", ["9.0", "8.0"])
def test_refuses_pre_blackwell_gpu(tree_args, tmp_path, cap):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_nvidia_smi(bindir, [cap] * 8)
    proc = run(*tree_args, env=path_env(bindir))
    line = one_error_line(proc, 3)
    assert "SM100" in line and "Blackwell" in line and cap in line
    assert not (tmp_path / "out").exists()


def test_refuses_too_few_gpus(tree_args, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_nvidia_smi(bindir, ["10.0", "10.0"])
    line = one_error_line(run(*tree_args, env=path_env(bindir)), 3)
    assert "--tp 4" in line and "SM100" in line
    line = one_error_line(run(*tree_args, "--tp", "3", env=path_env(bindir)), 3)
    assert "--tp 3" in line


def test_refuses_without_nvidia_smi(tree_args, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "dirname", "env"):
        (bindir / tool).symlink_to(shutil.which(tool))
    proc = run(*tree_args, env={"PATH": str(bindir)})
    line = one_error_line(proc, 3)
    assert "nvidia-smi not found" in line and "SM100" in line and "Blackwell" in line


# ------------------------------------------------- stubbed end-to-end run

FAKE_PYTHON = """#!/usr/bin/env bash
# Stand-in for the sglang interpreter: launch_server sleeps, bench_serving writes a result.
set -euo pipefail
if [[ "${1:-}" == -m && "${2:-}" == sglang.launch_server ]]; then
    echo "$PYTHONPATH" >> "$STUB_DIR/launches"
    # A failing server never answers /health: it exits before writing the pid
    # file the fake curl reads (written first, /health could answer 0 while the
    # doomed server still ran, and the run would go on to the patched tree).
    [[ -z "${STUB_SERVER_FAIL:-}" ]] || { echo "boom: no GPU memory"; exit 7; }
    echo "$$" > "$STUB_DIR/server.pid"
    sleep 300 &  # a worker process, like the scheduler of a TP rank
    echo "$!" > "$STUB_DIR/worker.pid"
    exec sleep 300
fi
if [[ "${1:-}" == -m && "${2:-}" == sglang.bench_serving ]]; then
    [[ -z "${STUB_BENCH_FAIL:-}" ]] || exit 1
    out=""
    while (($#)); do [[ "$1" == --output-file ]] && out="$2"; shift; done
    n=$(wc -l < "$STUB_DIR/launches")
    if ((n == 1)); then
        echo '{"mean_tpot_ms": 2.47, "median_tpot_ms": 2.45, "accept_length": 3.94}' >> "$out"
    else  # no accept_length here: the server info must supply it
        echo '{"mean_tpot_ms": 2.41, "median_tpot_ms": 2.40, "accept_length": null}' >> "$out"
    fi
    exit 0
fi
exec "$REAL_PYTHON" "$@"
"""

FAKE_CURL = """#!/usr/bin/env bash
# Stand-in for curl: /health answers while the stub server lives.
out=/dev/null
url=""
while (($#)); do
    case "$1" in -o) out="$2"; shift ;; http*) url="$1" ;; esac
    shift
done
pid=$(cat "$STUB_DIR/server.pid" 2>/dev/null) || exit 7
kill -0 "$pid" 2>/dev/null || exit 7
case "$url" in
    */health) exit 0 ;;
    */get_server_info) echo '{"internal_states": [{"avg_spec_accept_length": 3.94}]}' > "$out" ;;
    *) exit 22 ;;
esac
"""


@pytest.fixture
def stubs(tmp_path):
    bindir = tmp_path / "stubbin"
    bindir.mkdir()
    fake_nvidia_smi(bindir, ["10.0"] * 4)
    write_exe(bindir / "fakepython", FAKE_PYTHON)
    write_exe(bindir / "curl", FAKE_CURL)
    env = path_env(bindir)
    env.update(STUB_DIR=str(tmp_path), REAL_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    return env, ["--python", bindir / "fakepython"]


def assert_dead(pid: int):
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"stub server {pid} still running")


def test_stubbed_run_prints_table(tree_args, tmp_path, stubs):
    env, python = stubs
    proc = run(*tree_args, *python, env=env)
    assert proc.returncode == 0, proc.stderr
    launched = (tmp_path / "launches").read_text().split()
    assert launched == [
        str(tmp_path / "base" / "python"),
        str(tmp_path / "patched" / "python"),
    ]
    table = proc.stdout
    assert "| metric | base | patched | delta |" in table
    assert "| mean TPOT (ms) | 2.47 | 2.41 | -0.06 (-2.4%) |" in table
    assert "| median TPOT (ms) | 2.45 | 2.40 | -0.05 (-2.0%) |" in table
    assert "| accept length | 3.94 | 3.94 | +0.00 (+0.0%) |" in table
    assert (tmp_path / "out" / "summary.md").read_text() == table
    assert_dead(int((tmp_path / "server.pid").read_text()))
    assert_dead(int((tmp_path / "worker.pid").read_text()))  # the whole process group


def test_stubbed_accept_length_absent_is_na(tree_args, tmp_path, stubs):
    env, python = stubs
    curl = Path(env["PATH"].split(":")[0]) / "curl"
    curl.write_text(FAKE_CURL.replace("avg_spec_accept_length", "other"))
    proc = run(*tree_args, *python, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "| accept length | 3.94 | n/a | n/a |" in proc.stdout


def test_stubbed_server_death_fails_clearly(tree_args, tmp_path, stubs):
    env, python = stubs
    env["STUB_SERVER_FAIL"] = "1"
    proc = run(*tree_args, *python, env=env)
    assert proc.returncode == 1
    assert "base server exited with status 7 before /health answered" in proc.stderr
    assert "boom: no GPU memory" in proc.stderr  # the log tail
    assert (tmp_path / "launches").read_text().count("\n") == 1  # patched never launched


def test_stubbed_bench_failure_still_stops_server(tree_args, tmp_path, stubs):
    env, python = stubs
    env["STUB_BENCH_FAIL"] = "1"
    proc = run(*tree_args, *python, env=env)
    assert proc.returncode == 1
    assert "base: bench_serving failed" in proc.stderr
    assert_dead(int((tmp_path / "server.pid").read_text()))  # stopped by the EXIT trap
    assert_dead(int((tmp_path / "worker.pid").read_text()))


def test_default_trees_are_the_layouts():
    """The recipe runs without Python (``--dry-run`` needs neither a GPU nor
    sglang), so it spells its default trees itself: they must be sglpatch's
    ``Layout``, where ``make apply`` and the bundle put them."""
    from sglpatch.layout import Layout

    layout = Layout.create()
    text = SCRIPT.read_text()
    root = layout.root
    assert f'BASE_TREE="$ROOT/{layout.base_tree.relative_to(root)}"' in text
    assert f'PATCHED_TREE="$ROOT/{layout.patched_tree.relative_to(root)}"' in text
    assert f'OUT="$ROOT/{(layout.build / "bench" / "tpot").relative_to(root)}"' in text
