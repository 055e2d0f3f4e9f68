#!/usr/bin/env bash
# End-to-end EAGLE TPOT, base SGLang tree vs patched tree, on the trtllm_mla backend.
#
# For each tree (base, then patched) this starts `sglang.launch_server` with the
# tree first on PYTHONPATH, waits for /health, runs `sglang.bench_serving` on the
# generated-shared-prefix dataset at concurrency 1, reads the server's accept
# length, and stops the server (its whole process group). It then prints a
# markdown table: metric | base | patched | delta.
#
# It needs what trtllm_mla needs: NVIDIA Blackwell GPUs (SM100, compute
# capability 10.x), at least --tp of them. `--dry-run` prints the commands
# instead and needs neither a GPU nor sglang. Run `--help` for the flags.
#
# Exit status: 0 done; 1 a run failed (server died, timeout, bench error);
# 2 usage error (bad flag or value, tree without sglang/__init__.py);
# 3 this machine cannot run trtllm_mla (or lacks a needed tool).
set -euo pipefail

PROG="bench_eagle_tpot.sh"
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
TREES=(base patched)

# Defaults (one variable per flag); the trees are the default base's, where
# sglpatch's Layout puts them (build/<base>/, patches/bases.toml).
BASE_TREE="$ROOT/build/v0.5.23/base/python"
PATCHED_TREE="$ROOT/build/v0.5.23/sglang/python"
OUT="$ROOT/build/v0.5.23/bench/tpot"
MODEL="moonshotai/Kimi-K2.5"
DRAFT_MODEL=""
TP=4
HOST="127.0.0.1"
PORT=30000
STEPS=3
TOPK=1
DRAFT_TOKENS=4
CONTEXT=81920
SERVER_ARGS=""
STARTUP_TIMEOUT=1800
NUM_PROMPTS=64
GSP_NUM_GROUPS=1
GSP_PROMPTS_PER_GROUP=64
GSP_SYSTEM_PROMPT_LEN=80000
GSP_QUESTION_LEN=128
GSP_OUTPUT_LEN=1000
PYTHON="${PYTHON:-python3}"
DRY_RUN=0

HEALTH_POLL_S=2
STOP_GRACE_S=60
SERVER_PID=""

usage() {
    cat <<EOF
Usage: scripts/$PROG [options]

End-to-end EAGLE TPOT of the base and the patched SGLang tree on trtllm_mla
(NVIDIA Blackwell / SM100, compute capability 10.x). Per tree, in order base,
patched: launch_server -> wait for /health -> bench_serving -> stop server.
Prints a markdown table (mean/median TPOT, accept length) and writes it to
<out>/summary.md; bench_serving results go to <out>/<tree>.jsonl.

Trees and output:
  --base-tree DIR            base tree's python/ root    (default: build/v0.5.23/base/python)
  --patched-tree DIR         patched tree's python/ root (default: build/v0.5.23/sglang/python)
  --out DIR                  results directory           (default: build/v0.5.23/bench/tpot)
                             (defaults are relative to the repository root)
Server:
  --model PATH               --model-path                (default: $MODEL)
  --draft-model PATH         --speculative-draft-model-path (default: none, omitted)
  --tp N                     tensor parallel size        (default: $TP)
  --host HOST                                            (default: $HOST)
  --port N                                               (default: $PORT)
  --steps N                  --speculative-num-steps     (default: $STEPS)
  --topk N                   --speculative-eagle-topk    (default: $TOPK)
  --draft-tokens N           --speculative-num-draft-tokens (default: $DRAFT_TOKENS)
  --context N                --context-length            (default: $CONTEXT)
  --server-args "ARGS"       extra launch_server args, split on whitespace
  --startup-timeout SEC      wait this long for /health  (default: $STARTUP_TIMEOUT)
  --python EXE               interpreter with sglang's dependencies
                             (default: \$PYTHON or python3)
Benchmark (sglang.bench_serving, generated-shared-prefix, max concurrency 1):
  --num-prompts N                                        (default: $NUM_PROMPTS)
  --gsp-num-groups N                                     (default: $GSP_NUM_GROUPS)
  --gsp-prompts-per-group N                              (default: $GSP_PROMPTS_PER_GROUP)
  --gsp-system-prompt-len N                              (default: $GSP_SYSTEM_PROMPT_LEN)
  --gsp-question-len N                                   (default: $GSP_QUESTION_LEN)
  --gsp-output-len N                                     (default: $GSP_OUTPUT_LEN)
Other:
  --dry-run                  print every command for both trees and exit 0
                             (needs no GPU and no sglang)
  -h, --help                 show this help

Flags also accept --flag=VALUE. Exit status: 0 ok, 1 run failed,
2 usage error, 3 machine cannot run trtllm_mla.
EOF
}

die_usage() {
    echo "$PROG: error: $*" >&2
    exit 2
}

refuse() {
    echo "$PROG: refused: $*" >&2
    exit 3
}

fail() {
    echo "$PROG: failed: $*" >&2
    exit 1
}

log() {
    echo "[$PROG] $*" >&2
}

# ---------------------------------------------------------------- arguments

require_positive_int() {  # flag value
    [[ "$2" =~ ^[1-9][0-9]*$ ]] || die_usage "$1 needs a positive integer, got '$2'"
}

parse_args() {
    local flag value
    while (($# > 0)); do
        flag="$1"
        shift
        case "$flag" in
            -h | --help)
                usage
                exit 0
                ;;
            --dry-run)
                DRY_RUN=1
                continue
                ;;
            --*=*)
                value="${flag#*=}"
                flag="${flag%%=*}"
                ;;
            --*)
                if (($# == 0)); then
                    is_known_flag "$flag" || die_usage "unknown flag: $flag"
                    die_usage "$flag needs a value"
                fi
                value="$1"
                shift
                # A following flag is a missing value, except for --server-args.
                if [[ "$value" == --* && "$flag" != "--server-args" ]] && is_known_flag "$flag"; then
                    die_usage "$flag needs a value"
                fi
                ;;
            *)
                die_usage "unexpected argument: $flag"
                ;;
        esac
        set_flag "$flag" "$value"
    done
}

is_known_flag() {
    case "$1" in
        --base-tree | --patched-tree | --out | --model | --draft-model | --tp | --host | --port | \
            --steps | --topk | --draft-tokens | --context | --server-args | --startup-timeout | \
            --python | --num-prompts | --gsp-num-groups | --gsp-prompts-per-group | \
            --gsp-system-prompt-len | --gsp-question-len | --gsp-output-len)
            return 0
            ;;
    esac
    return 1
}

set_flag() {  # flag value
    local flag="$1" value="$2"
    case "$flag" in
        --base-tree) BASE_TREE="$value" ;;
        --patched-tree) PATCHED_TREE="$value" ;;
        --out) OUT="$value" ;;
        --model) MODEL="$value" ;;
        --draft-model) DRAFT_MODEL="$value" ;;
        --host) HOST="$value" ;;
        --server-args) SERVER_ARGS="$value" ;;
        --python) PYTHON="$value" ;;
        --tp) require_positive_int "$flag" "$value" && TP="$value" ;;
        --port) require_positive_int "$flag" "$value" && PORT="$value" ;;
        --steps) require_positive_int "$flag" "$value" && STEPS="$value" ;;
        --topk) require_positive_int "$flag" "$value" && TOPK="$value" ;;
        --draft-tokens) require_positive_int "$flag" "$value" && DRAFT_TOKENS="$value" ;;
        --context) require_positive_int "$flag" "$value" && CONTEXT="$value" ;;
        --startup-timeout) require_positive_int "$flag" "$value" && STARTUP_TIMEOUT="$value" ;;
        --num-prompts) require_positive_int "$flag" "$value" && NUM_PROMPTS="$value" ;;
        --gsp-num-groups) require_positive_int "$flag" "$value" && GSP_NUM_GROUPS="$value" ;;
        --gsp-prompts-per-group) require_positive_int "$flag" "$value" && GSP_PROMPTS_PER_GROUP="$value" ;;
        --gsp-system-prompt-len) require_positive_int "$flag" "$value" && GSP_SYSTEM_PROMPT_LEN="$value" ;;
        --gsp-question-len) require_positive_int "$flag" "$value" && GSP_QUESTION_LEN="$value" ;;
        --gsp-output-len) require_positive_int "$flag" "$value" && GSP_OUTPUT_LEN="$value" ;;
        *) die_usage "unknown flag: $flag" ;;
    esac
}

validate_args() {
    ((PORT <= 65535)) || die_usage "--port must be at most 65535, got '$PORT'"
    [[ -n "$MODEL" ]] || die_usage "--model must not be empty"
    [[ -n "$HOST" ]] || die_usage "--host must not be empty"
    [[ -n "$OUT" ]] || die_usage "--out must not be empty"
    BASE_TREE="$(resolve_tree base "$BASE_TREE")"
    PATCHED_TREE="$(resolve_tree patched "$PATCHED_TREE")"
}

resolve_tree() {  # name dir -> absolute dir on stdout
    local name="$1" dir="$2"
    [[ -f "$dir/sglang/__init__.py" ]] ||
        die_usage "$name tree '$dir' has no sglang/__init__.py (run \`make apply\` or pass --$name-tree)"
    (cd -- "$dir" && pwd -P)
}

tree_dir() {  # name
    if [[ "$1" == base ]]; then echo "$BASE_TREE"; else echo "$PATCHED_TREE"; fi
}

# ----------------------------------------------------------------- machine

check_machine() {
    command -v nvidia-smi >/dev/null 2>&1 ||
        refuse "nvidia-smi not found; trtllm_mla needs NVIDIA Blackwell (SM100, compute capability 10.x) GPUs"
    local caps cap count=0 capable=0 lowest=""
    caps="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null)" ||
        refuse "nvidia-smi could not list GPUs; trtllm_mla needs NVIDIA Blackwell (SM100) GPUs"
    while read -r cap; do
        [[ -n "$cap" ]] || continue
        count=$((count + 1))
        if [[ "$cap" =~ ^([0-9]+)\.[0-9]+$ ]] && ((BASH_REMATCH[1] >= 10)); then
            capable=$((capable + 1))
        elif [[ -z "$lowest" ]]; then
            lowest="$cap"
        fi
    done <<<"$caps"
    ((count > 0)) || refuse "nvidia-smi lists no GPU; trtllm_mla needs NVIDIA Blackwell (SM100) GPUs"
    ((capable > 0)) ||
        refuse "GPU compute capability $lowest is below 10.0; trtllm_mla needs NVIDIA Blackwell (SM100)"
    ((capable >= TP)) ||
        refuse "$capable GPU(s) with compute capability >= 10.0 (SM100/Blackwell), but --tp $TP needs $TP"
    local tool
    for tool in curl setsid "$PYTHON"; do
        command -v "$tool" >/dev/null 2>&1 || refuse "required command not found: $tool"
    done
}

# ----------------------------------------------------------------- commands

base_url() {
    echo "http://$HOST:$PORT"
}

# Prints a command the way a shell would read it back (single quotes where needed).
show() {
    local out="" word q="'"
    for word in "$@"; do
        if [[ "$word" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
            out+="$word "
        else
            out+="'${word//$q/$q\\$q$q}' "
        fi
    done
    echo "${out% }"
}

tree_env() {  # tree_dir -> PYTHONPATH=... (tree first, then the caller's)
    echo "PYTHONPATH=$1${PYTHONPATH:+:$PYTHONPATH}"
}

server_cmd() {  # tree_dir -> fills array SERVER_CMD
    local extra=()
    read -r -a extra <<<"$SERVER_ARGS" || true
    SERVER_CMD=(
        env "$(tree_env "$1")" "$PYTHON" -m sglang.launch_server
        --model-path "$MODEL"
        --tp "$TP"
        --host "$HOST"
        --port "$PORT"
        --attention-backend trtllm_mla
        --speculative-algorithm EAGLE3
        --speculative-num-steps "$STEPS"
        --speculative-eagle-topk "$TOPK"
        --speculative-num-draft-tokens "$DRAFT_TOKENS"
    )
    if [[ -n "$DRAFT_MODEL" ]]; then
        SERVER_CMD+=(--speculative-draft-model-path "$DRAFT_MODEL")
    fi
    SERVER_CMD+=(--context-length "$CONTEXT" --trust-remote-code)
    SERVER_CMD+=(${extra[@]+"${extra[@]}"})
}

bench_cmd() {  # tree_dir output_file -> fills array BENCH_CMD
    BENCH_CMD=(
        env "$(tree_env "$1")" "$PYTHON" -m sglang.bench_serving
        --backend sglang
        --host "$HOST"
        --port "$PORT"
        --dataset-name generated-shared-prefix
        --max-concurrency 1
        --num-prompts "$NUM_PROMPTS"
        --gsp-num-groups "$GSP_NUM_GROUPS"
        --gsp-prompts-per-group "$GSP_PROMPTS_PER_GROUP"
        --gsp-system-prompt-len "$GSP_SYSTEM_PROMPT_LEN"
        --gsp-question-len "$GSP_QUESTION_LEN"
        --gsp-output-len "$GSP_OUTPUT_LEN"
        --output-file "$2"
    )
}

import_check_cmd() {  # tree_dir -> fills array IMPORT_CMD
    IMPORT_CMD=(env "$(tree_env "$1")" "$PYTHON" -c "import sglang; print(sglang.__file__)")
}

health_cmd() {
    HEALTH_CMD=(curl -sf --max-time 5 -o /dev/null "$(base_url)/health")
}

info_cmd() {  # endpoint output_file -> fills array INFO_CMD
    INFO_CMD=(curl -sf --max-time 30 -o "$2" "$(base_url)/$1")
}

# ------------------------------------------------------------------ server

start_server() {  # name tree_dir log
    local name="$1" tree="$2" server_log="$3"
    health_cmd
    if "${HEALTH_CMD[@]}"; then
        fail "a server already answers on $(base_url); stop it or pass --port"
    fi
    server_cmd "$tree"
    log "$name: starting server (log: $server_log)"
    log "$name: $(show "${SERVER_CMD[@]}")"
    # setsid: the server and its workers get their own process group.
    setsid "${SERVER_CMD[@]}" >"$server_log" 2>&1 </dev/null &
    SERVER_PID=$!
}

wait_healthy() {  # name log
    local name="$1" server_log="$2" started="$SECONDS" deadline status=0
    deadline=$((started + STARTUP_TIMEOUT))
    health_cmd
    while ! "${HEALTH_CMD[@]}"; do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            wait "$SERVER_PID" || status=$?
            SERVER_PID=""
            tail -n 40 "$server_log" >&2 || true
            fail "$name server exited with status $status before /health answered; log: $server_log"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 40 "$server_log" >&2 || true
            fail "$name server not healthy after ${STARTUP_TIMEOUT}s (--startup-timeout); log: $server_log"
        fi
        sleep "$HEALTH_POLL_S"
    done
    log "$name: server healthy after $((SECONDS - started))s"
}

stop_server() {
    [[ -n "$SERVER_PID" ]] || return 0
    local pgid="$SERVER_PID" deadline=$((SECONDS + STOP_GRACE_S))
    SERVER_PID=""
    log "stopping server process group $pgid"
    kill -TERM -- "-$pgid" 2>/dev/null || true
    while kill -0 -- "-$pgid" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.5
    done
    kill -KILL -- "-$pgid" 2>/dev/null || true
    wait "$pgid" 2>/dev/null || true
}

on_exit() {
    local status=$?
    stop_server
    exit "$status"
}

# ------------------------------------------------------------------- steps

fetch_server_info() {  # output_file: /get_server_info, else /server_info
    info_cmd get_server_info "$1"
    "${INFO_CMD[@]}" && return 0
    info_cmd server_info "$1"
    "${INFO_CMD[@]}" || {
        log "could not read the server info; accept length falls back to the jsonl only"
        rm -f -- "$1"
    }
}

verify_import() {  # name tree_dir
    local name="$1" tree="$2" file
    import_check_cmd "$tree"
    file="$("${IMPORT_CMD[@]}")" || fail "$name tree: 'import sglang' failed with $PYTHON"
    [[ "$file" == "$tree"/* ]] ||
        fail "$name tree: 'import sglang' loads $file, not the tree at $tree"
}

run_tree() {  # name
    local name="$1" tree jsonl
    tree="$(tree_dir "$name")"
    jsonl="$OUT/$name.jsonl"
    verify_import "$name" "$tree"
    start_server "$name" "$tree" "$OUT/$name.server.log"
    wait_healthy "$name" "$OUT/$name.server.log"
    rm -f -- "$jsonl"  # bench_serving appends
    bench_cmd "$tree" "$jsonl"
    log "$name: $(show "${BENCH_CMD[@]}")"
    "${BENCH_CMD[@]}" || fail "$name: bench_serving failed"
    [[ -s "$jsonl" ]] || fail "$name: bench_serving wrote no result to $jsonl"
    fetch_server_info "$OUT/$name.server_info.json"
    stop_server
}

dry_run_tree() {  # name
    local name="$1" tree jsonl
    tree="$(tree_dir "$name")"
    jsonl="$OUT/$name.jsonl"
    echo "# --- $name tree: $tree"
    import_check_cmd "$tree"
    show "${IMPORT_CMD[@]}"
    server_cmd "$tree"
    echo "setsid $(show "${SERVER_CMD[@]}") > $(show "$OUT/$name.server.log") 2>&1 &"
    health_cmd
    echo "# wait for /health: every ${HEALTH_POLL_S}s up to ${STARTUP_TIMEOUT}s, fail if the server exits"
    echo "until $(show "${HEALTH_CMD[@]}"); do sleep $HEALTH_POLL_S; done"
    echo "rm -f -- $(show "$jsonl")"
    bench_cmd "$tree" "$jsonl"
    show "${BENCH_CMD[@]}"
    info_cmd get_server_info "$OUT/$name.server_info.json"
    echo "$(show "${INFO_CMD[@]}")  # else /server_info"
    echo "kill -TERM -- -<server pgid>  # then -KILL after ${STOP_GRACE_S}s"
}

# Reads both trees' results and prints the markdown table.
summarize() {
    "$PYTHON" - "$OUT" "${TREES[@]}" <<'PY'
import json
import sys
from pathlib import Path

out, trees = Path(sys.argv[1]), sys.argv[2:]


def last_record(path):
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}


def accept_from_info(path):
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    if info.get("avg_spec_accept_length") is not None:
        return info["avg_spec_accept_length"]
    states = info.get("internal_states") or [{}]
    return states[0].get("avg_spec_accept_length")


values = {}
for tree in trees:
    record = last_record(out / f"{tree}.jsonl")
    accept = record.get("accept_length")
    if accept is None:
        accept = accept_from_info(out / f"{tree}.server_info.json")
    values[tree] = {
        "mean TPOT (ms)": record.get("mean_tpot_ms"),
        "median TPOT (ms)": record.get("median_tpot_ms"),
        "accept length": accept,
    }


def cell(value):
    return "n/a" if value is None else f"{float(value):.2f}"


def delta(base, patched):
    if base is None or patched is None:
        return "n/a"
    diff = float(patched) - float(base)
    text = f"{diff:+.2f}"
    if float(base):
        text += f" ({diff / float(base) * 100:+.1f}%)"
    return text


base, patched = trees
print("| metric | base | patched | delta |")
print("| --- | ---: | ---: | ---: |")
for metric in values[base]:
    b, p = values[base][metric], values[patched][metric]
    print(f"| {metric} | {cell(b)} | {cell(p)} | {delta(b, p)} |")
PY
}

config_line() {
    echo "model=$MODEL tp=$TP EAGLE3 steps=$STEPS topk=$TOPK draft_tokens=$DRAFT_TOKENS" \
        "context=$CONTEXT gsp=${GSP_NUM_GROUPS}x${GSP_PROMPTS_PER_GROUP}" \
        "system=$GSP_SYSTEM_PROMPT_LEN question=$GSP_QUESTION_LEN output=$GSP_OUTPUT_LEN" \
        "concurrency=1"
}

main() {
    parse_args "$@"
    validate_args
    local name
    if ((DRY_RUN)); then
        echo "# dry run: $(config_line)"
        echo "mkdir -p -- $(show "$OUT")"
        for name in "${TREES[@]}"; do
            dry_run_tree "$name"
        done
        echo "# summary: mean/median TPOT and accept length of $(show "$OUT")/{base,patched}.jsonl" \
            "-> markdown table, also written to $(show "$OUT/summary.md")"
        return 0
    fi
    check_machine
    mkdir -p -- "$OUT"
    trap on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    for name in "${TREES[@]}"; do
        run_tree "$name"
    done
    {
        echo "EAGLE TPOT, trtllm_mla: $(config_line)"
        echo
        summarize
    } | tee "$OUT/summary.md"
}

main "$@"
