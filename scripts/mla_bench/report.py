"""Comparison table (markdown), JSON record and chart of a base-vs-patched run."""

from __future__ import annotations

import statistics

from .config import ACCEPT_LENGTH, SEED_TPOT_SAVING_MS

REPLAY = ("draft_replay", "verify_replay", "extend_replay")  # one EAGLE iteration
SHOWN = (*REPLAY, "iteration", "draft_eager", "decode_replay")  # table rows per (context, bs)
CHARTED = (*REPLAY, "draft_eager", "decode_replay")
FILLS = ("draft_fill", "verify_fill", "extend_fill", "decode_fill")  # GPU only: graph_us
LADDER_COLUMNS = (
    ("iteration", ("host_us", "gpu_us", "launches")),
    ("draft_eager", ("host_us", "launches")),
    ("decode_replay", ("host_us", "launches")),
    ("verify_fill", ("graph_us",)),
)
MiB = 1024 * 1024


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def _index(run):
    return {(r["context"], r["bs"]): r["phases"] for r in run["rows"]}


def compare(base: dict, patched: dict) -> dict:
    """Per (context, bs): both trees' phases and the iteration sums (new
    dicts: the runs given are left as they are)."""
    b_idx, p_idx = _index(base), _index(patched)
    rows = []
    for key in b_idx:
        row = {
            "context": key[0],
            "bs": key[1],
            "base": dict(b_idx[key]),
            "patched": dict(p_idx[key]),
        }
        for tree in ("base", "patched"):
            phases = row[tree]
            phases["iteration"] = {
                "host_us": sum(phases[p]["host_us"] for p in REPLAY),
                "gpu_us": None
                if phases[REPLAY[0]]["gpu_us"] is None
                else sum(phases[p]["gpu_us"] for p in REPLAY),
                "launches": sum(phases[p]["launches"] for p in REPLAY),
                "alloc_bytes": sum(phases[p]["alloc_bytes"] for p in REPLAY),
            }
        saving_ms = (
            row["base"]["iteration"]["host_us"] - row["patched"]["iteration"]["host_us"]
        ) / 1e3
        row["tpot_saving_ms"] = saving_ms / ACCEPT_LENGTH
        rows.append(row)
    return {"rows": rows, "memory": {"base": base["memory"], "patched": patched["memory"]}}


def fill_markdown(result: dict) -> list[str]:
    """Each phase's metadata work alone in a CUDA graph (GPU only), or nothing."""
    first = result["rows"][0]["base"].get(FILLS[0]) if result["rows"] else None
    if first is None or first["graph_us"] is None:
        return []
    lines = [
        "",
        "Metadata work per replay, alone in a CUDA graph replayed back to back (GPU µs "
        "per replay): base, the replay call's add, copy and block-table launches; patched, "
        "the rebuild the captured forward runs; each beside a graph of one tiny kernel "
        "timed the same way right after it (the floor of any graph replay).",
        "",
        "| context | bs | phase | GPU µs base | GPU µs patched | one-kernel graph µs "
        "(patched run) | patched above it |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        for phase in FILLS:
            b, p = row["base"][phase], row["patched"][phase]
            lines.append(
                _row(
                    row["context"],
                    row["bs"],
                    phase,
                    _fmt(b["graph_us"], 2),
                    _fmt(p["graph_us"], 2),
                    _fmt(p["floor_us"], 2),
                    _fmt(p["graph_us"] - p["floor_us"], 2),
                )
            )
    return lines


# Columns of the main table, per tree: (header, figure, digits or None for an
# exact count).
COLUMNS = (
    ("host µs", "host_us", 1),
    ("GPU µs", "gpu_us", 1),
    ("launches", "launches", None),
    ("bytes alloc", "alloc_bytes", None),
)
# Figures only a CUDA run has (CPU runs record None): no column of theirs on CPU.
GPU_ONLY = {"gpu_us", "graph_us", "floor_us"}
# What a CPU run leaves out, and why, in one line.
LEFT_OUT_ON_CPU = (
    "Left out on CPU: GPU µs, the metadata-alone-in-a-graph table and the TPOT estimate"
    " (they need CUDA); host µs here time the Triton interpreter, not a GPU's launches,"
    " so compare launches and bytes."
)


def on_gpu(cfg: dict) -> bool:
    return cfg["device"] == "cuda"


def size(n: float) -> str:
    """Bytes with a unit that keeps small figures visible: 512 B, 4.0 KiB, 7.5 MiB."""
    if abs(n) < 1024:
        return f"{n:.0f} B"
    if abs(n) < MiB:
        return f"{n / 1024:.1f} KiB"
    return f"{n / MiB:.1f} MiB"


def markdown(result: dict, cfg: dict) -> str:
    """The tables of a run; what means nothing on its device is left out, and said so."""
    gpu = on_gpu(cfg)
    columns = [c for c in COLUMNS if gpu or c[1] not in GPU_ONLY]
    lines = [
        f"EAGLE {cfg['steps']} steps / topk {cfg['topk']} / {cfg['draft_tokens']} draft tokens, "
        f"page {cfg['page_size']}, draft extend {cfg['extend_mode']}, "
        + (f"DCP {cfg['dcp_size']} (rank 0), " if cfg.get("dcp_size", 1) > 1 else "")
        + f"CUDA-graph max bs {cfg['cuda_graph_max_bs']}, device {cfg['device']}, "
        f"{cfg['repeats']} repeats (median)",
        "",
        "Host µs and launches: the metadata call on the host before the runner replays its "
        "graph. "
        + (
            "GPU µs: CUDA-event span of that call plus, where the captured forward does "
            "metadata work of its own (the series rebuilds there), a replay of that work "
            "as a graph. "
            if gpu
            else ""
        )
        + "decode_replay: plain decode without speculation (a server of its own; not part of "
        "the iteration).",
    ]
    if not gpu:
        lines += ["", LEFT_OUT_ON_CPU]
    headers = [f"{name} {tree}" for name, *_ in columns for tree in ("base", "patched")]
    lines += [
        "",
        _row("context", "bs", "phase", *headers),
        "|---:|---:|---|" + "---:|" * len(headers),
    ]
    for row in result["rows"]:
        for phase in SHOWN:
            b, p = row["base"][phase], row["patched"][phase]
            name = "**iteration (sum of replays)**" if phase == "iteration" else phase
            cells = []
            for _, key, digits in columns:
                show = str if digits is None else (lambda x, d=digits: _fmt(x, d))
                cells += [show(b[key]), show(p[key])]
            lines.append(_row(row["context"], row["bs"], name, *cells))
    if gpu:
        lines += fill_markdown(result)
        lines += tpot_markdown(result)
    lines += memory_markdown(result, cfg)
    return "\n".join(lines)


def tpot_markdown(result: dict) -> list[str]:
    """The seed PR's TPOT arithmetic on this run's host saving (GPU runs only)."""
    lines = [
        "",
        f"TPOT effect = host saving per iteration / accept length {ACCEPT_LENGTH} "
        f"(seed PR on B200: {SEED_TPOT_SAVING_MS} ms):",
        "",
        "| context | bs | saving per iteration µs | TPOT effect ms |",
        "|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        saving = row["base"]["iteration"]["host_us"] - row["patched"]["iteration"]["host_us"]
        lines.append(
            f"| {row['context']} | {row['bs']} | {saving:.1f} | {row['tpot_saving_ms']:.3f} |"
        )
    return lines


def memory_markdown(result: dict, cfg: dict) -> list[str]:
    """Graph state per backend and max bs, base vs patched."""
    lines = [
        "",
        f"CUDA-graph state allocated by init_cuda_graph_state, context {cfg['memory_context']}:",
        "",
        "| max bs | backend | base | patched | returned |",
        "|---:|---|---:|---:|---:|",
    ]
    mem_b, mem_p = result["memory"]["base"], result["memory"]["patched"]
    for max_bs in mem_b:
        total_b = total_p = 0
        for backend in mem_b[max_bs]:
            b, p = mem_b[max_bs][backend]["bytes"], mem_p[max_bs][backend]["bytes"]
            total_b, total_p = total_b + b, total_p + p
            lines.append(_row(max_bs, backend, size(b), size(p), size(b - p)))
        lines.append(
            _row(max_bs, "**total**", size(total_b), size(total_p), size(total_b - total_p))
        )
    return lines


def regressions(result: dict) -> list[str]:
    """Phases where the patched tree launches, allocates or holds more than the base."""
    bad = []
    for row in result["rows"]:
        for phase in SHOWN:
            b, p = row["base"][phase], row["patched"][phase]
            for key in ("launches", "alloc_bytes"):
                if p[key] > b[key]:
                    where = f"context {row['context']} bs {row['bs']} {phase}"
                    bad.append(f"{where}: {key} {b[key]} -> {p[key]}")
    mem_b, mem_p = result["memory"]["base"], result["memory"]["patched"]
    for max_bs in mem_b:
        for backend in mem_b[max_bs]:
            if mem_p[max_bs][backend]["bytes"] > mem_b[max_bs][backend]["bytes"]:
                bad.append(f"memory max bs {max_bs} {backend}")
    return bad


def ratio(x: float) -> str:
    """A base / patched ratio as a bar label: ``12,900x``, ``23x``, ``1.4x``."""
    return f"{x:,.0f}x" if x >= 10 else f"{x:.1f}x"


def chart(result: dict, path, device: str = "cuda", base_name: str = "base"):
    """The run's chart in ``path`` (PNG): on a GPU, host µs per phase (``time_chart``);
    on a CPU, whose times are the Triton interpreter's, the exact figures instead
    (``cpu_chart``). ``base_name`` names the base tree in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    if device == "cpu":
        fig = cpu_chart(result, base_name)
    else:
        fig = time_chart(result, base_name)
    fig.savefig(path, dpi=130)
    return fig


def time_chart(result: dict, base_name: str = "base"):
    """Grouped bars: host µs per phase, base vs patched, one panel per context, on a
    log axis (so a bar 100,000 times shorter stays visible), each pair labelled with
    base / patched."""
    import matplotlib.pyplot as plt

    contexts = sorted({r["context"] for r in result["rows"]})
    phases = CHARTED
    fig, axes = plt.subplots(1, len(contexts), figsize=(6.5 * len(contexts), 4.8), squeeze=False)
    for ax, context in zip(axes[0], contexts, strict=True):
        rows = [r for r in result["rows"] if r["context"] == context]
        labels, base, patched = [], [], []
        for r in rows:
            for phase in phases:
                labels.append(f"{phase.replace('_', ' ')}\nbs {r['bs']}")
                base.append(r["base"][phase]["host_us"])
                patched.append(r["patched"][phase]["host_us"])
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], base, 0.4, label=base_name, color="#b0b0b0")
        ax.bar([i + 0.2 for i in x], patched, 0.4, label="patched", color="#2a7ab9")
        ax.set_yscale("log")
        for i, (b, p) in enumerate(zip(base, patched, strict=True)):
            if b > 0 and p > 0:
                ax.annotate(
                    ratio(b / p),
                    (i, max(b, p)),
                    textcoords="offset points",
                    xytext=(0, 2),
                    ha="center",
                    fontsize=5,
                )
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * 30)  # room for the legend above the tallest bar
        ax.set_xticks(list(x), labels, fontsize=6, rotation=90)
        ax.set_ylabel("host time per call (µs, median, log scale)")
        ax.set_title(f"trtllm_mla EAGLE metadata, context {context // 1024}K (GPU host)")
        ax.legend(loc="upper right", ncol=2, fontsize=7)
    fig.tight_layout()
    return fig


# The CPU chart's note on what it leaves out (the figure's footer).
CPU_CHART_NOTE = (
    "Host times are left out: on a CPU they time the Triton interpreter and are not"
    " comparable (latest.md lists them).\nLaunch counts and bytes are exact, on CPU and GPU alike."
)
_BASE_COLOR, _PATCHED_COLOR = "#9a9a9a", "#2a7ab9"


def cpu_chart(result: dict, base_name: str = "base"):
    """The figures a CPU run measures exactly: host launches per call for each
    phase (the EAGLE iteration's sum too), base vs patched, one panel per
    context on a linear axis fitted to the counts, each bar labelled with its
    count; and the CUDA-graph state per backend (log axis fitted to the sizes,
    each bar labelled). No times: ``CPU_CHART_NOTE`` says why, under the panels."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    contexts = sorted({r["context"] for r in result["rows"]})
    bars = [len(SHOWN) * sum(r["context"] == c for r in result["rows"]) for c in contexts]
    bars.append(max(6, 2 * sum(len(b) for b in result["memory"]["base"].values())))
    fig, axes = plt.subplots(
        1,
        len(bars),
        figsize=(3 + 0.6 * sum(bars), 6.4),
        squeeze=False,
        gridspec_kw={"width_ratios": bars},
    )
    for ax, context in zip(axes[0][:-1], contexts, strict=True):
        rows = [r for r in result["rows"] if r["context"] == context]
        labels, base, patched = [], [], []
        for r in rows:
            for phase in SHOWN:
                name = "iteration (sum)" if phase == "iteration" else phase.replace("_", " ")
                labels.append(f"{name}, bs {r['bs']}")
                base.append(r["base"][phase]["launches"])
                patched.append(r["patched"][phase]["launches"])
        _pairs(ax, labels, base, patched, base_name, str)
        top = max([*base, *patched, 1])
        ax.set_ylim(0, top * 1.2)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("host launches per call (exact)", fontsize=11)
        ax.set_title(f"Launches per metadata call, context {context // 1024}K", fontsize=12)
    _memory_panel(axes[0][-1], result["memory"], base_name)
    fig.text(0.5, 0.01, CPU_CHART_NOTE, ha="center", va="bottom", fontsize=10)
    fig.suptitle("trtllm_mla EAGLE metadata on CPU: exact figures", fontsize=13)
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    return fig


def _pairs(ax, labels: list, base: list, patched: list, base_name: str, label) -> None:
    """Base and patched bars side by side, each labelled with ``label(value)``
    (a zero too: its bar has no height)."""
    x = range(len(labels))
    for offset, values, name, color in (
        (-0.2, base, base_name, _BASE_COLOR),
        (0.2, patched, "patched", _PATCHED_COLOR),
    ):
        spots = [i + offset for i in x]
        bars = ax.bar(spots, values, 0.4, label=name, color=color)
        ax.bar_label(bars, [label(v) for v in values], padding=2, fontsize=9)
    ax.set_xticks(list(x), labels, fontsize=9, rotation=60, ha="right", rotation_mode="anchor")
    ax.tick_params(axis="y", labelsize=9)
    ax.legend(loc="upper right", fontsize=10)


def _memory_panel(ax, memory: dict, base_name: str) -> None:
    """CUDA-graph state per backend and max bs, base vs patched, log axis fitted."""
    labels, base, patched = [], [], []
    for max_bs in memory["base"]:
        for backend in memory["base"][max_bs]:
            labels.append(f"{backend}, max bs {max_bs}")
            base.append(memory["base"][max_bs][backend]["bytes"])
            patched.append(memory["patched"][max_bs][backend]["bytes"])
    _pairs(ax, labels, base, patched, base_name, size)
    positive = [v for v in (*base, *patched) if v > 0] or [1]
    ax.set_yscale("log")
    ax.set_ylim(min(positive) / 3, max(positive) * 20)  # room for the labels and legend
    ax.set_ylabel("bytes held (log scale)", fontsize=11)
    ax.set_title("CUDA-graph state held", fontsize=12)


def ladder_markdown(steps: list, cfg: dict) -> str:
    """One line per patch and (context, bs): ``LADDER_COLUMNS``, before -> after."""
    names = {
        "host_us": "host µs",
        "gpu_us": "GPU µs",
        "launches": "launches",
        "graph_us": "alone in a graph µs",
    }
    shown = [
        (phase, [k for k in keys if on_gpu(cfg) or k not in GPU_ONLY])
        for phase, keys in LADDER_COLUMNS
    ]
    shown = [(phase, keys) for phase, keys in shown if keys]
    columns = [f"{p.replace('_', ' ')} {names[k]}" for p, keys in shown for k in keys]
    lines = [
        _row(
            "patch",
            "context",
            "bs",
            *columns,
            f"graph state (max bs {max(cfg['memory_max_bs'])})",
        ),
        "|---|---:|---:|" + "---|" * (len(columns) + 1),
    ]
    for label, result in steps:
        mem_b, mem_p = result["memory"]["base"], result["memory"]["patched"]
        top = str(max(int(k) for k in mem_b))
        held_b, held_p = (sum(v["bytes"] for v in m[top].values()) for m in (mem_b, mem_p))
        for row in result["rows"]:
            b, p = row["base"], row["patched"]
            cells = [label, row["context"], row["bs"]]
            for phase, keys in shown:
                for key in keys:
                    fmt = _fmt if key.endswith("_us") else str
                    cells.append(f"{fmt(b[phase][key])} -> {fmt(p[phase][key])}")
            lines.append(_row(*cells, f"{size(held_b)} -> {size(held_p)}"))
    return "\n".join(lines)


RUNNER_PARTS = ("execute", "metadata", "buffers", "graph", "rest")  # runner_check.SECTIONS


def runner_rounds(times: dict) -> dict:
    """``--runners``' rounds joined: per tree and (setup, runner, bs, path),
    the list of the rounds' median µs of the whole ``execute`` and of each
    part of it (``RUNNER_PARTS``: the out-of-graph metadata call, the buffer
    copies, the graph launch, the rest; timed in calls of their own, every
    other call, so the section timers stay out of the whole-call times), of
    verify's ``load_batch`` where planned ahead (None in records before it), and the
    launches and device-to-host reads of one ``execute`` (exact: every round
    must count the same)."""
    joined = {}
    for tree, rounds in times.items():
        rows = {}
        for report in rounds:
            for r in report:
                if r.get("loop"):  # runner_loop_markdown's
                    continue
                key = (r["setup"], r["runner"], r["bs"], r["path"])
                row = rows.setdefault(key, {"counts": set(), **{p: [] for p in RUNNER_PARTS}})
                for part in RUNNER_PARTS:
                    row[part].append(r[f"{part}_us"])
                row.setdefault("load_batch", []).append(r.get("load_batch_us"))
                row["counts"].add((r["launches"], r["syncs"]))
        for key, row in rows.items():
            if len(row["counts"]) != 1:
                raise ValueError(f"{tree} {key}: launches differ between rounds: {row['counts']}")
            row["launches"], row["syncs"] = row["counts"].pop()
        joined[tree] = rows
    return joined


def _span(xs: list) -> str:
    """The rounds' median (their range)."""
    return f"{_fmt(statistics.median(xs))} ({_fmt(min(xs))}-{_fmt(max(xs))})"


def _share(xs: list) -> str:
    return f"{statistics.median(xs):.1%} ({min(xs):.1%}-{max(xs):.1%})"


def _minus(xs: list, ys: list) -> list:
    """Round by round: ``xs`` less ``ys``."""
    return [x - y for x, y in zip(xs, ys, strict=True)]


def runner_iterations(joined: dict, labels=("base", "patched")) -> dict:
    """Per (setup, bs) both trees (``labels``) measured every runner of an EAGLE
    iteration at (draft, verify alone, draft extend: not plain decode, not
    verify after ``load_batch``): per tree, each round's sums over those
    runners of every part (``RUNNER_PARTS``), and their launches."""
    base, patched = (joined[label] for label in labels)
    out = {}
    for k in sorted(base):
        if k not in patched or k[3] != "execute" or "(decode)" in k[1]:
            continue
        it = out.setdefault((k[0], k[2]), {"runners": 0})
        it["runners"] += 1
        for tree, row in (("base", base[k]), ("patched", patched[k])):
            t = it.setdefault(
                tree, {"launches": 0, **{p: [0.0] * len(row[p]) for p in RUNNER_PARTS}}
            )
            t["launches"] += row["launches"]
            for part in RUNNER_PARTS:
                t[part] = [x + y for x, y in zip(t[part], row[part], strict=True)]
    return {key: it for key, it in out.items() if it["runners"] == 3}


PLANNED = "load_batch, execute"  # runner_check's path of a verify planned ahead


def runner_planned_iterations(joined: dict, labels=("base", "patched")) -> dict:
    """Per (setup, bs), the EAGLE iteration as v0.5.23's EAGLE worker runs
    it, verify planned ahead (``eagle_utils.py:398-409``): per tree, each
    round's draft and draft-extend ``execute`` plus verify's ``load_batch``
    and ``execute`` on that path; only where every round timed that
    ``load_batch``."""
    out = {}
    for setup, runner, bs, path in sorted(joined[labels[0]]):
        if path != PLANNED:
            continue
        sums = {}
        for label in labels:
            rows = joined[label]
            verify = rows.get((setup, runner, bs, path))
            drafts = [
                rows.get((setup, name, bs, "execute"))
                for name in ("EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
            ]
            if verify is None or None in drafts or None in verify["load_batch"]:
                break
            parts = [verify["execute"], verify["load_batch"], *(d["execute"] for d in drafts)]
            sums[label] = [sum(xs) for xs in zip(*parts, strict=True)]
        else:
            out[setup, bs] = sums
    return out


def runner_report(times: dict, cpus: list) -> str:
    """``--runners``' tables: ``runner_markdown`` of each tree against the one
    before it (``--without-last``: v0.5.23 against the series less its last
    pull request, then that against the series), then ``runner_loop_markdown``
    where the rounds ran the loop."""
    names = list(times)
    parts = []
    for a, b in zip(names, names[1:], strict=False):
        table = runner_markdown(times, cpus, (a, b))
        parts.append(table if names == ["base", "patched"] else f"Trees {a} -> {b}:\n\n{table}")
    loop = runner_loop_markdown(times)
    return "\n\n".join(parts + ([loop] if loop else []))


def runner_loop_markdown(times: dict) -> str:
    """``--runner-loop``: per tree, setup and size, the back-to-back EAGLE
    iterations' host µs per iteration and the GPU's time between the
    iteration's graphs (``runner_check.TRANSITIONS``, and their sum), each the
    median over the rounds of each process's median (their range); '' when
    the rounds ran no loop."""
    rows = {}
    for tree, rounds in times.items():
        for report in rounds:
            for r in report:
                if r.get("loop"):
                    row = rows.setdefault((r["setup"], r["bs"], tree), {})
                    for key, value in r.items():
                        if key.endswith("_us"):
                            row.setdefault(key, []).append(value)
    if not rows:
        return ""
    gaps = ("draft_to_verify_us", "verify_to_extend_us", "extend_to_draft_us", "idle_us")
    lines = [
        "Back-to-back EAGLE iterations (draft, verify, draft extend execute, each on a batch"
        " built beforehand, verify planned ahead, its load_batch included (runner_check since"
        " 2026-12-05; before, every other one), nothing waiting for the GPU in between):"
        " host µs per iteration,"
        " and the GPU's µs between one runner's graph ending and the next one's starting"
        " (the GPU waiting for the host, plus the next runner's input copies), per"
        " transition and their sum; the median of the processes' medians (their range):",
        "",
        _row(
            "setup",
            "bs",
            "tree",
            "host µs / iteration",
            "draft -> verify",
            "verify -> extend",
            "extend -> next draft",
            "between graphs",
        ),
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    order = {tree: i for i, tree in enumerate(times)}
    keys = sorted(rows, key=lambda k: (k[0], k[1], order[k[2]]))
    for setup, bs, tree in keys:
        row = rows[(setup, bs, tree)]
        cells = [_span(row[g]) if g in row else "-" for g in gaps]
        lines.append(_row(setup, bs, tree, _span(row["host_us"]), *cells))
    return "\n".join(lines)


def runner_markdown(times: dict, cpus: list, labels=("base", "patched")) -> str:
    """``--runners``: per real runner and captured size, the launches of one
    ``execute`` and its host µs, whole and by part (the metadata call, the
    graph launch, the rest), each the median over the rounds of each
    process's median (whole ``execute``: with the rounds' range), base vs
    patched; then per setup and size the EAGLE iteration's sums
    (``runner_iterations``), with the share of each process's ``execute``
    its metadata calls take (measured inside one process, unlike a
    difference between two processes' times)."""
    joined = runner_rounds(times)
    a, b_name = labels
    base, patched = joined[a], joined[b_name]
    counts = len(times[a]), len(times[b_name])
    plural = "process" if counts[0] == 1 else "processes"
    processes = (
        f"{counts[0]} {plural} per tree"
        if counts[0] == counts[1]
        else f"{counts[0]} {plural} of {a} and {counts[1]} of {b_name}"
    )
    med = statistics.median
    pair = lambda b, p: f"{_fmt(b)} / {_fmt(p)}"  # noqa: E731
    lines = [
        "Host µs of v0.5.23's own graph runners' execute (the copies into their buffers, "
        "padding, the out-of-graph metadata call, the graph launch; the GPU idle before "
        "each call; one attention layer per forward; runner_check's own setups, not the "
        f"sizes above): {processes}, the trees alternating, each "
        f"pinned to CPUs {', '.join(map(str, cpus))}; the median of the processes' medians "
        "(execute: their range); the parts timed in every other execute call of the same "
        'process, the whole-call figures in the others (no section timers): "metadata '
        'call": the backend\'s init_forward_metadata_out_graph, "graph launch": the graph '
        'backend\'s replay, "outside the call": execute less the metadata call; launches: '
        "the host launches of one execute (exact; the graph replay is one):",
        "",
        _row(
            "setup",
            "runner",
            "bs",
            "path",
            "launches",
            "execute µs base",
            "execute µs patched",
            "metadata call base / patched",
            "graph launch base / patched",
            "outside the call base / patched",
        ),
        "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for k in sorted(base):
        if k not in patched:
            continue
        b, p = base[k], patched[k]
        lines.append(
            _row(
                *k,
                f"{b['launches']} -> {p['launches']}",
                _span(b["execute"]),
                _span(p["execute"]),
                pair(med(b["metadata"]), med(p["metadata"])),
                pair(med(b["graph"]), med(p["graph"])),
                pair(*(med(_minus(t["execute"], t["metadata"])) for t in (b, p))),
            )
        )
    lines += [
        "",
        "EAGLE iteration (draft + verify + draft extend execute; verify not planned ahead, "
        "its load_batch and metadata call inside its execute), per setup and size: "
        "each process's sums, their median (range); \"share\": the metadata calls' part of "
        'the same process\'s execute; "change": of the execute medians, between processes:',
        "",
        _row(
            "setup",
            "bs",
            "launches",
            "execute µs base",
            "execute µs patched",
            "change",
            "metadata calls base (share)",
            "metadata calls patched (share)",
            "graph launches base / patched",
            "outside the calls base / patched",
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (setup, bs), it in runner_iterations(joined, labels).items():
        b, p = it["base"], it["patched"]
        held = [[m / e for m, e in zip(t["metadata"], t["execute"], strict=True)] for t in (b, p)]
        lines.append(
            _row(
                setup,
                bs,
                f"{b['launches']} -> {p['launches']}",
                _span(b["execute"]),
                _span(p["execute"]),
                f"{med(p['execute']) / med(b['execute']) - 1:+.1%}",
                f"{_span(b['metadata'])}; {_share(held[0])}",
                f"{_span(p['metadata'])}; {_share(held[1])}",
                pair(med(b["graph"]), med(p["graph"])),
                pair(*(med(_minus(t["execute"], t["metadata"])) for t in (b, p))),
            )
        )
    planned = runner_planned_iterations(joined, labels)
    if planned:
        lines += [
            "",
            "EAGLE iteration as v0.5.23's EAGLE worker runs it, verify planned ahead "
            "(eagle_utils.py:398-409: its load_batch and mark, then its execute; the GPU "
            "idle before each): draft execute + verify load_batch + verify execute + draft "
            "extend execute, each process's sum, their median (range):",
            "",
            _row("setup", "bs", "µs base", "µs patched", "change"),
            "|---:|---:|---:|---:|---:|",
        ]
        for (setup, bs), sums in planned.items():
            b, p = sums[a], sums[b_name]
            lines.append(_row(setup, bs, _span(b), _span(p), f"{med(p) / med(b) - 1:+.1%}"))
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m mla_bench.report SOURCE``: the ``--runners`` tables of a
    saved run (a record's ``runners`` and ``runner_cpus``), or of the processes
    an unfinished run kept (its ``runner-rounds`` folder), as this report
    renders them."""
    import argparse
    import json
    from pathlib import Path

    from sglpatch.errors import UserError

    from .runner_rounds import kept

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument(
        "source",
        type=Path,
        metavar="SOURCE",
        help="a bench JSON record with --runners, or an unfinished run's runner-rounds folder",
    )
    args = parser.parse_args(argv)
    if args.source.is_dir():
        times, cpus, missing = kept(args.source)
        if len(times) < 2:
            raise UserError(f"{args.source}: processes of {len(times)} tree(s) kept; tables need 2")
        if missing:
            print(f"No process kept of {', '.join(missing)}: the tables leave it out.\n")
    else:
        try:
            record = json.loads(args.source.read_text())
        except (OSError, ValueError) as error:
            raise UserError(f"{args.source}: not a readable bench record ({error})") from None
        if not isinstance(record, dict) or not record.get("runners"):
            raise UserError(f"{args.source}: no --runners measurements in this record")
        times, cpus = record["runners"], record.get("runner_cpus") or []
    try:
        print(runner_report(times, cpus))
    except (KeyError, TypeError, ValueError) as error:  # rows of another shape, launches differ
        raise UserError(
            f"{args.source}: its runner reports do not render ({type(error).__name__}: {error})"
        ) from None
    return 0


if __name__ == "__main__":
    import sys

    from mla_harness import child

    sys.exit(child.report_errors("mla_bench.report", main))
