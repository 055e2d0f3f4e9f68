"""``report``: iteration sums of the EAGLE phases only, inputs left as given;
what each device's tables show and leave out; sizes; the chart's axis."""

from __future__ import annotations

import copy
import json

import pytest

from mla_bench import report
from sglpatch.errors import UserError


def _figures(host_us, launches, gpu=False):
    gpu_us = 2.0 * host_us if gpu else None
    return {"host_us": host_us, "gpu_us": gpu_us, "launches": launches, "alloc_bytes": 4 * launches}


def _run(scale, gpu=False):
    phases = {
        "draft_replay": _figures(100 * scale, 3 * scale, gpu),
        "verify_replay": _figures(10 * scale, 4 * scale, gpu),
        "extend_replay": _figures(1 * scale, 8 * scale, gpu),
        "draft_eager": _figures(1000 * scale, 10 * scale, gpu),
        "decode_replay": _figures(7 * scale, 1 * scale, gpu),
    }
    for fill in report.FILLS:
        phases[fill] = {"graph_us": 3.0 * scale if gpu else None, "floor_us": 2.0 if gpu else None}
    memory = {"8": {"draft": {"bytes": 3 << (20 if scale > 1 else 10)}}}
    return {"rows": [{"context": 4096, "bs": 1, "phases": phases}], "memory": memory}


def test_compare_sums_the_iteration_and_leaves_its_inputs_alone():
    base, patched = _run(2), _run(1)
    before = copy.deepcopy((base, patched))
    result = report.compare(base, patched)
    assert (base, patched) == before
    row = result["rows"][0]
    assert row["base"]["iteration"]["launches"] == 2 * (3 + 4 + 8)  # decode is not in it
    assert row["patched"]["iteration"]["host_us"] == 111
    assert row["base"]["decode_replay"] == base["rows"][0]["phases"]["decode_replay"]
    assert report.regressions(result) == []
    assert report.regressions(report.compare(patched, base))  # the other way round regresses
    table = report.markdown(result, _config())
    assert "| 4096 | 1 | decode_replay | 14.0 | 7.0 | 2 | 1 | 8 | 4 |" in table


def test_a_cpu_run_shows_what_means_something_there_and_says_what_it_left_out():
    table = report.markdown(report.compare(_run(2), _run(1)), _config())
    assert report.LEFT_OUT_ON_CPU in table
    assert "GPU µs" not in table.replace(report.LEFT_OUT_ON_CPU, "")
    assert "TPOT" not in table.replace(report.LEFT_OUT_ON_CPU, "") and " - |" not in table
    assert "| 8 | draft | 3.0 MiB | 3.0 KiB | 3.0 MiB |" in table  # no 0.0 for kilobytes
    assert _tables(table) == 2  # the phase table and the memory table


def test_a_gpu_run_shows_gpu_times_fills_and_the_tpot_estimate():
    cfg = _config(device="cuda")
    table = report.markdown(report.compare(_run(2, gpu=True), _run(1, gpu=True)), cfg)
    assert report.LEFT_OUT_ON_CPU not in table
    assert "| host µs base | host µs patched | GPU µs base | GPU µs patched |" in table
    assert "| 4096 | 1 | decode_replay | 14.0 | 7.0 | 28.0 | 14.0 | 2 | 1 | 8 | 4 |" in table
    assert "TPOT effect" in table and "alone in a CUDA graph" in table
    assert _tables(table) == 4  # phases, fills, TPOT, memory


def test_sizes_keep_their_unit():
    assert [report.size(n) for n in (512, 4096, 7.5 * 2**20, 1150 * 2**20)] == [
        "512 B",
        "4.0 KiB",
        "7.5 MiB",
        "1150.0 MiB",
    ]


def test_ladder_table_has_a_column_per_figure():
    result = report.compare(_run(2, gpu=True), _run(1, gpu=True))
    table = report.ladder_markdown([("+01 patch", result)], _config(device="cuda"))
    header, rule, line = table.splitlines()
    assert header.count("|") == rule.count("|") == line.count("|")
    assert "decode replay launches" in header and "| 2 -> 1 |" in line
    assert "iteration GPU µs" in header and "| 3.0 MiB -> 3.0 KiB |" in line
    cpu = report.ladder_markdown([("+01 patch", report.compare(_run(2), _run(1)))], _config())
    assert "GPU µs" not in cpu and "alone in a graph" not in cpu


def test_the_gpu_chart_has_a_log_axis_and_the_ratios(tmp_path):
    fig = report.chart(report.compare(_run(1000), _run(1)), tmp_path / "c.png", "cuda", "base X")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    axis = fig.axes[0]
    assert axis.get_yscale() == "log" and "GPU host" in axis.get_title()
    assert {"1,000x"} <= {text.get_text() for text in axis.texts}
    assert [t.get_text() for t in axis.get_legend().get_texts()] == ["base X", "patched"]
    assert [report.ratio(x) for x in (12912.4, 23.3, 1.44)] == ["12,912x", "23x", "1.4x"]


def _bar_labels(axis) -> list[list[str]]:
    """The labels drawn on the bars, per series (base, patched)."""
    texts, count = [t.get_text() for t in axis.texts], len(axis.containers[0])
    return [texts[:count], texts[count:]]


def test_the_cpu_chart_shows_launches_and_graph_state_not_interpreter_times(tmp_path):
    """The CPU chart once labelled bars "198,723x" from interpreter times the
    text says not to compare, showed no launches, with 5-point labels and an axis
    running empty to 10^7."""
    result = report.compare(_run(3), _run(1))
    fig = report.chart(result, tmp_path / "c.png", "cpu", "base v0.5.12")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    launches, memory = fig.axes
    # launches per phase, the iteration's sum among them, exact and labelled
    shown = [t.get_text() for t in launches.get_xticklabels()]
    assert shown[:4] == [
        "draft replay, bs 1",
        "verify replay, bs 1",
        "extend replay, bs 1",
        "iteration (sum), bs 1",
    ]
    assert len(shown) == len(report.SHOWN)
    base = [3 * n for n in (3, 4, 8, 3 + 4 + 8, 10, 1)]
    patched = [3, 4, 8, 15, 10, 1]
    heights = [[bar.get_height() for bar in c] for c in launches.containers]
    assert heights == [base, patched]
    assert _bar_labels(launches) == [[str(n) for n in base], [str(n) for n in patched]]
    assert launches.get_yscale() == "linear"
    assert max(base) < launches.get_ylim()[1] <= 1.25 * max(base)  # fitted, not 10^7
    assert "launches" in launches.get_ylabel() and "µs" not in launches.get_ylabel()
    # no time anywhere: no ratio labels, no µs; the footer says why
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert len(texts) == 2 * len(report.SHOWN) + 2 and not any(t.endswith("x") for t in texts)
    figure_texts = [t.get_text() for t in fig.texts]  # the title and the footer
    assert report.CPU_CHART_NOTE in figure_texts and "not comparable" in report.CPU_CHART_NOTE
    # graph state: exact sizes, on a log axis fitted to them
    assert _bar_labels(memory) == [["3.0 MiB"], ["3.0 KiB"]]
    low, high = memory.get_ylim()
    assert memory.get_yscale() == "log" and 3 << 10 > low > 1 << 9 and 3 << 20 < high < 1 << 27
    # readable: labels at 9 points or more
    sizes = [t.get_fontsize() for t in launches.get_xticklabels()]
    sizes += [t.get_fontsize() for t in launches.texts]
    assert min(sizes) >= 9


def _tables(markdown: str) -> int:
    return sum(line.startswith("|---") for line in markdown.splitlines())


def _config(device="cpu"):
    cfg = {"steps": 3, "topk": 1, "draft_tokens": 4, "page_size": 64, "extend_mode": "v1"}
    cfg.update(
        cuda_graph_max_bs=4, device=device, repeats=2, memory_context=8192, memory_max_bs=[8]
    )
    return cfg


def _runner_rows(scale, launches, metadata=(50, 30, 20, 500)):
    # One process's report: each row's parts are the execute's, scaled by how
    # fast the process ran.
    out = []
    for (runner, us), meta in zip(
        (
            ("EAGLEDraftCudaGraphRunner", 100),
            ("DecodeCudaGraphRunner (target verify)", 60),
            ("EAGLEDraftExtendCudaGraphRunner", 40),
            ("DecodeCudaGraphRunner (decode)", 1000),
        ),
        metadata,
        strict=True,
    ):
        out.append(_runner_row(runner, "execute", us * scale, meta * scale, launches))
    out.append(
        _runner_row(
            "DecodeCudaGraphRunner (target verify)", "load_batch, execute", 5000, 0, launches
        )
    )
    return out


def _runner_row(runner, path, us, metadata, launches):
    return {
        "setup": 0,
        "runner": runner,
        "bs": 2,
        "path": path,
        "execute_us": us,
        "metadata_us": metadata,
        "buffers_us": 0.0,
        "graph_us": us / 10,
        "rest_us": us - metadata - us / 10,
        "launches": launches,
        "syncs": 0,
    }


RUNNER_TIMES = {  # three processes per tree, each running at its own speed
    "base": [_runner_rows(s, 30) for s in (1.0, 3.0, 0.9)],
    "patched": [_runner_rows(s, 20, metadata=(1, 1, 1, 1)) for s in (0.5, 0.4, 2.0)],
}


def test_runner_table_sums_the_iteration_without_plain_decode_or_preplanned_verify():
    # The table shows the median of the processes' medians (execute: with
    # their range); launches are the same in every round; the shares are
    # each process's own.
    text = report.runner_markdown(RUNNER_TIMES, [14, 15])
    assert "pinned to CPUs 14, 15" in text
    # Iteration, per process: base execute 200 s (100 + 60 + 40; plain decode's
    # 1000 left out), of it 100 s in the metadata calls (50 + 30 + 20: half);
    # patched execute 200 s, calls 3 s (1.5%); graph launches 20 s; outside
    # the calls 100 s and 197 s; medians over s = (1, 3, 0.9) and (0.5, 0.4, 2).
    iteration = (
        "| 0 | 2 | 90 -> 60 | 200.0 (180.0-600.0) | 100.0 (80.0-400.0) | -50.0% "
        "| 100.0 (90.0-300.0); 50.0% (50.0%-50.0%) | 1.5 (1.2-6.0); 1.5% (1.5%-1.5%) "
        "| 20.0 / 10.0 | 100.0 / 98.5 |"
    )
    assert iteration in text
    preplanned = (
        "| 0 | DecodeCudaGraphRunner (target verify) | 2 | load_batch, execute | 30 -> 20 "
        "| 5000.0 (5000.0-5000.0) | 5000.0 (5000.0-5000.0) | 0.0 / 0.0 | 500.0 / 500.0 "
        "| 5000.0 / 5000.0 |"
    )
    assert preplanned in text
    draft = (
        "| 0 | EAGLEDraftCudaGraphRunner | 2 | execute | 30 -> 20 | 100.0 (90.0-300.0) "
        "| 50.0 (40.0-200.0) | 50.0 / 0.5 | 10.0 / 5.0 | 50.0 / 49.5 |"
    )
    assert draft in text


def test_runner_table_sums_the_iteration_the_eagle_worker_runs_where_load_batch_was_timed():
    # Verify planned ahead (v0.5.23's EAGLE worker): draft + extend execute
    # (140 s) + verify's load_batch (10) and execute (5000) after it, per
    # process; none in a record whose rows lack load_batch_us.
    title = "EAGLE iteration as v0.5.23's EAGLE worker runs it"
    assert title not in report.runner_markdown(RUNNER_TIMES, [14, 15])
    times = copy.deepcopy(RUNNER_TIMES)
    for rounds in times.values():
        for rows in rounds:
            rows[-1]["load_batch_us"] = 10.0  # the pre-planned verify row
    text = report.runner_markdown(times, [14, 15])
    assert title in text
    assert "| 0 | 2 | 5150.0 (5136.0-5430.0) | 5080.0 (5066.0-5290.0) | -1.4% |" in text
    del times["patched"][1][-1]["load_batch_us"]  # one round without it: no row
    assert title not in report.runner_markdown(times, [14, 15])


def test_runner_tables_render_from_a_saved_record(tmp_path, capsys):
    record = tmp_path / "bench.json"
    record.write_text(json.dumps({"runners": RUNNER_TIMES, "runner_cpus": [14, 15]}))
    assert report.main([str(record)]) == 0
    assert capsys.readouterr().out.strip() == report.runner_markdown(RUNNER_TIMES, [14, 15])
    record.write_text(json.dumps({"runners": {}}))
    with pytest.raises(UserError, match="no --runners measurements"):
        report.main([str(record)])
    record.write_text("{")
    with pytest.raises(UserError, match="not a readable bench record"):
        report.main([str(record)])


def test_runner_rounds_refuse_launch_counts_that_differ():
    rounds = [_runner_rows(1.0, 30), _runner_rows(1.0, 31)]
    with pytest.raises(ValueError, match="launches differ between rounds"):
        report.runner_rounds({"base": rounds})


def _loop_row(setup, bs, host, gaps):
    row = {"loop": True, "setup": setup, "bs": bs, "iterations": 20, "host_us": host}
    names = ("draft_to_verify", "verify_to_extend", "extend_to_draft")
    for name, us in zip(names, gaps, strict=True):
        row[f"{name}_us"] = us
    row["idle_us"] = sum(gaps)
    return row


def test_three_trees_each_against_the_one_before_it_and_the_loop():
    # --without-last: v0.5.23, the series less its last patch, the series;
    # each round's report carries its loop rows after the execute rows.
    times = {
        "base": [_runner_rows(1.0, 30) + [_loop_row(0, 2, 900.0, (100, 200, 300))]] * 2,
        "without-last": [_runner_rows(0.8, 20) + [_loop_row(0, 2, 800.0, (90, 180, 270))]] * 2,
        "patched": [
            _runner_rows(0.5, 20) + [_loop_row(0, 2, 300.0, (10, 20, 30))],
            _runner_rows(0.5, 20) + [_loop_row(0, 2, 500.0, (20, 40, 60))],
        ],
    }
    text = report.runner_report(times, [14, 15])
    first, second = text.split("Trees base -> without-last:")[1].split(
        "Trees without-last -> patched:"
    )
    assert report.runner_markdown(times, [14, 15], ("base", "without-last")) in first
    assert report.runner_markdown(times, [14, 15], ("without-last", "patched")) in second
    assert "| 0 | 2 | 90 -> 60 |" in first and "| 0 | 2 | 60 -> 60 |" in second
    assert "| 0 | 2 | base | 900.0 (900.0-900.0) | 100.0 (100.0-100.0) " in second
    loop = (
        "| 0 | 2 | patched | 400.0 (300.0-500.0) | 15.0 (10.0-20.0) | 30.0 (20.0-40.0) "
        "| 45.0 (30.0-60.0) | 90.0 (60.0-120.0) |"
    )
    assert loop in second
    # Two trees, no loop: the table as before.
    assert report.runner_report(RUNNER_TIMES, [14, 15]) == report.runner_markdown(
        RUNNER_TIMES, [14, 15]
    )
