"""``mla_bench.ranks``: each runner process's EAGLE-iteration figures and the
exact one-sided rank test between two trees (no trees, no torch).

The p-value is checked against a count over every split of the pooled values
(a computation of its own), the figures against sums written out here, and
the command on a folder of reports and on a bench record."""

from __future__ import annotations

import itertools
import json
from math import comb

import pytest

from mla_bench import ranks
from sglpatch.errors import UserError


def _by_enumeration(a, b):
    pooled, n = a + b, len(a)
    seen = sum(x < y for x in a for y in b)
    hits = 0
    for pick in itertools.combinations(range(len(pooled)), n):
        xs = [pooled[i] for i in pick]
        ys = [pooled[i] for i in range(len(pooled)) if i not in pick]
        hits += sum(x < y for x in xs for y in ys) >= seen
    return seen, hits / comb(len(pooled), n)


@pytest.mark.parametrize(
    "a, b",
    [
        ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
        ([1.0, 5.0, 3.0, 7.0], [2.0, 6.0, 4.0]),
        ([9.0, 8.0], [1.0, 2.0, 3.0]),
        ([1.5, 2.5, 9.5, 0.5, 4.5], [3.0, 7.0, 8.0, 6.0, 5.0]),
    ],
)
def test_p_lower_is_the_exact_tail(a, b):
    seen, p = ranks.p_lower(a, b)
    want_seen, want_p = _by_enumeration(a, b)
    assert seen == want_seen and p == pytest.approx(want_p)


def test_five_against_five_all_lower_gives_one_split_in_252():
    assert ranks.p_lower([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == (25, pytest.approx(1 / 252))


def _process(draft, extend, alone, planned, load_batch, loop, bs=1):
    row = {"bs": bs, "launches": 2, "syncs": 0}
    return [
        {**row, "runner": "EAGLEDraftCudaGraphRunner", "path": "execute", "execute_us": draft},
        {**row, "runner": ranks.VERIFY, "path": "execute", "execute_us": alone},
        {
            **row,
            "runner": ranks.VERIFY,
            "path": ranks.PLANNED,
            "execute_us": planned,
            "load_batch_us": load_batch,
        },
        {
            **row,
            "runner": "EAGLEDraftExtendCudaGraphRunner",
            "path": "execute",
            "execute_us": extend,
        },
        {**row, "runner": "DecodeCudaGraphRunner (decode)", "path": "execute", "execute_us": 999.0},
        {"loop": True, "bs": bs, "host_us": loop},
    ]


def test_figures_sum_each_way_and_leave_plain_decode_out():
    rows = _process(50.0, 100.0, 80.0, 40.0, 60.0, 250.0)
    # alone: 50 + 80 + 100; as the EAGLE worker: 50 + (60 + 40) + 100.
    assert ranks.figures(rows, 1) == (230.0, 250.0, 250.0)
    old = [r for r in rows if "load_batch_us" not in r]  # a record before load_batch_us
    assert ranks.figures(old, 1) == (230.0, None, 250.0)


def test_the_command_on_a_folder_and_on_a_record(tmp_path, capsys):
    folder = tmp_path / "rounds"
    folder.mkdir()
    for i, (tree, scale) in enumerate(
        [("before", 1.0), ("after", 0.5), ("after", 0.6), ("before", 1.1)], start=1
    ):
        rows = _process(50 * scale, 100 * scale, 80 * scale, 40 * scale, 60 * scale, 300 * scale)
        (folder / f"{(i + 1) // 2}-{tree}.json").write_text(json.dumps(rows))
    assert ranks.main([str(folder)]) == 0
    text = capsys.readouterr().out
    assert "bs  1 as the EAGLE worker, µs / iteration" in text
    assert "  before       [250.0, 275.0]" in text
    assert "  after < before: U = 4 of 4, p = 0.17" in text
    record = tmp_path / "bench.json"
    runners = {"without-last": [], "patched": []}
    for path in sorted(folder.glob("*.json")):
        tree = "patched" if path.stem.endswith("after") else "without-last"
        runners[tree].append(json.loads(path.read_text()))
    record.write_text(json.dumps({"runners": runners}))
    assert ranks.main([str(record), "without-last", "patched"]) == 0
    assert "patched < without-last: U = 4 of 4" in capsys.readouterr().out
    # The benchmark's kept rounds (each report under "report"), beside its settings.
    kept = tmp_path / "runner-rounds"
    kept.mkdir()
    (kept / "settings.json").write_text(json.dumps({"rounds": 5}))
    for path in sorted(folder.glob("*.json")):
        report = {"round": 1, "tree": path.stem, "report": json.loads(path.read_text())}
        (kept / path.name).write_text(json.dumps(report))
    assert ranks.main([str(kept)]) == 0
    assert "  after < before: U = 4 of 4, p = 0.17" in capsys.readouterr().out


def test_refused_in_one_line(tmp_path):
    with pytest.raises(UserError, match="no processes of after"):
        ranks.table({"before": [[]]}, "before", "after")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UserError, match="not runner reports nor a --runners record"):
        ranks.load(tmp_path / "bad.json")
    rounds = tmp_path / "rounds"
    rounds.mkdir()
    (rounds / "1-before.json").write_text(json.dumps(["not a row"]))
    refused = r"1-before.json: not a runner process.s result \(no report rows\)"
    with pytest.raises(UserError, match=refused):
        ranks.load(rounds)
    for tree in ("before", "after"):  # rows of another shape
        (rounds / f"1-{tree}.json").write_text(json.dumps([{"bs": 1}]))
    with pytest.raises(UserError, match="reports do not rank .KeyError") as error:
        ranks.main([str(rounds)])
    assert len(str(error.value).splitlines()) == 1
    with pytest.raises(UserError, match="two trees"):
        ranks.main([str(tmp_path), "only-one"])
