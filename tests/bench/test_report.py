"""``report.compare``: iteration sums of the EAGLE phases only, inputs left as given."""

from __future__ import annotations

import copy

from mla_bench import report


def _figures(host_us, launches):
    return {"host_us": host_us, "gpu_us": None, "launches": launches, "alloc_bytes": 4 * launches}


def _run(scale):
    phases = {
        "draft_replay": _figures(100 * scale, 3 * scale),
        "verify_replay": _figures(10 * scale, 4 * scale),
        "extend_replay": _figures(1 * scale, 8 * scale),
        "draft_eager": _figures(1000 * scale, 10 * scale),
        "decode_replay": _figures(7 * scale, 1 * scale),
        # GPU-only figures, None on a CPU (as the worker writes them there).
        **{name: {"graph_us": None, "floor_us": None} for name in report.FILLS},
    }
    memory = {"8": {"draft": {"bytes": 64 * scale}}}
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
    assert "| 4096 | 1 | decode_replay | 14.0 | 7.0 |" in table


def test_ladder_table_has_a_column_per_figure():
    result = report.compare(_run(2), _run(1))
    table = report.ladder_markdown([("+01 patch", result)], _config())
    header, rule, line = table.splitlines()
    assert header.count("|") == rule.count("|") == line.count("|")
    assert "decode replay launches" in header and "| 2 -> 1 |" in line


def _config():
    cfg = {"steps": 3, "topk": 1, "draft_tokens": 4, "page_size": 64, "extend_mode": "v1"}
    cfg.update(cuda_graph_max_bs=4, device="cpu", repeats=2, memory_context=8192, memory_max_bs=[8])
    return cfg
