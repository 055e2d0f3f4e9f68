"""``--runners``' processes kept as each ends (``<out-dir>/runner-rounds``):
a run stopped after k processes keeps k results, ``--resume`` runs only the
missing ones and renders what a run never stopped renders, a stopped run's
tables render from what it kept, other settings are refused in one line, and
the rounds still alternate the trees' order.

``runner_check --time`` needs CUDA: its launch (``child.run``, which the
bench calls as ``run_child``) is the one thing replaced here, by a stand-in
that answers a report naming its tree and how many processes that tree had
run before it; everything else is the bench's own code. It is replaced as the
bench's name only: ``child.run`` itself starts the harness's other children,
which the suite's background jobs run in this process at the same time."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from mla_bench import __main__ as bench
from mla_bench import runner_rounds, worker
from sglpatch.errors import UserError


class Stopped(Exception):
    """The run's process ending part way (a GPU call's time limit)."""


class FakeRunner:
    """``child.run`` for ``runner_check``: records the trees it ran, answers a
    one-row report whose figures are (tree, its process count), stops the
    run at the process numbered ``stop_at``."""

    def __init__(self, paths: dict, stop_at: int | None = None):
        self.names = {str(path): name for name, path in paths.items()}
        self.ran: list[str] = []
        self.per_tree: Counter = Counter()
        self.stop_at = stop_at

    def __call__(self, module, tree, device, *args, cpus=None):
        assert (module, device, args[:2]) == ("mla_harness.runner_check", "cuda", ("--time", "2"))
        if self.stop_at is not None and len(self.ran) + 1 == self.stop_at:
            raise Stopped
        name = self.names[str(tree)]
        self.ran.append(name)
        self.per_tree[name] += 1
        scale = {"base": 1.0, "without-last": 0.8, "patched": 0.5}[name]
        row = {
            "setup": 0,
            "runner": "EAGLEDraftCudaGraphRunner",
            "bs": 2,
            "path": "execute",
            "execute_us": 100.0 * scale * self.per_tree[name],
            "metadata_us": 50.0 * scale,
            "buffers_us": 0.0,
            "graph_us": 10.0,
            "rest_us": 40.0,
            "launches": 30 if name == "base" else 20,
            "syncs": 0,
        }
        return "progress\n" + json.dumps([row]) + "\n"


def _trees(root, names=("base", "without-last", "patched")) -> list:
    out = []
    for name in names:
        package = root / name / "python" / "sglang"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"# {name}\n")
        out.append((name, root / name / "python"))
    return out


CFG = {"device": "cuda", "repeats": 2}


@pytest.fixture(autouse=True)
def _no_gpu_names(monkeypatch):
    # The settings record the machine; this one has no GPU to name.
    monkeypatch.setattr(worker, "machine", lambda: {"gpu": "test GPU"})


def _store(out, trees, resume=False, rounds=3, repeats=2):
    cfg = {**CFG, "repeats": repeats}
    wanted = runner_rounds.settings(trees, cfg, rounds, 0, None, bench.runner_cpus())
    return runner_rounds.Store(out, wanted, resume, "the command")


def test_the_rounds_alternate_the_trees_order(tmp_path, monkeypatch):
    trees = _trees(tmp_path)
    fake = FakeRunner(dict(trees))
    monkeypatch.setattr(bench, "run_child", fake)
    times = bench.runner_times(trees, CFG, 4)
    forward = ["base", "without-last", "patched"]
    assert fake.ran == forward + forward[::-1] + forward + forward[::-1]
    # Each tree's reports in round order.
    assert [r[0]["execute_us"] for r in times["base"]] == [100.0, 200.0, 300.0, 400.0]
    assert runner_rounds.order(["a", "b"], 3) == [(1, "a"), (1, "b"), (2, "b"), (2, "a")] + [
        (3, "a"),
        (3, "b"),
    ]


def test_a_stopped_run_keeps_each_finished_process_and_a_resumed_one_runs_the_rest(
    tmp_path, monkeypatch
):
    trees = _trees(tmp_path, ("base", "patched"))
    whole = FakeRunner(dict(trees))
    monkeypatch.setattr(bench, "run_child", whole)
    single = bench.runner_times(trees, CFG, 3, store=_store(tmp_path / "single", trees))

    out = tmp_path / "split"
    first = FakeRunner(dict(trees), stop_at=4)  # stopped in its 4th process
    monkeypatch.setattr(bench, "run_child", first)
    with pytest.raises(Stopped):
        bench.runner_times(trees, CFG, 3, store=_store(out, trees))
    kept = sorted(p.name for p in (out / runner_rounds.FOLDER).iterdir())
    assert kept == ["1-base.json", "1-patched.json", "2-patched.json", "settings.json"]
    assert json.loads((out / runner_rounds.FOLDER / "settings.json").read_text())["command"]

    # The same command again, with --resume: only the missing processes run,
    # the figures the same as the run never stopped.
    second = FakeRunner(dict(trees))
    second.per_tree = first.per_tree.copy()  # the trees' next processes, as in one run
    monkeypatch.setattr(bench, "run_child", second)
    store = _store(out, trees, resume=True)
    resumed = bench.runner_times(trees, CFG, 3, store=store)
    assert second.ran == ["base", "base", "patched"]  # (2, base), (3, base), (3, patched)
    assert resumed == single
    assert report_of(resumed) == report_of(single)
    assert [row[:2] for row in store.dates()] == [
        [1, "base"],
        [1, "patched"],
        [2, "base"],
        [2, "patched"],
        [3, "base"],
        [3, "patched"],
    ]
    # Everything there already: nothing runs.
    third = FakeRunner(dict(trees))
    monkeypatch.setattr(bench, "run_child", third)
    assert bench.runner_times(trees, CFG, 3, store=_store(out, trees, resume=True)) == single
    assert third.ran == []


def report_of(times):
    from mla_bench import report

    return report.runner_report(times, [0, 1])


def _stopped(tmp_path, monkeypatch, rounds: int, stop_at: int):
    """A three-tree run of ``rounds`` stopped in its process ``stop_at``: its
    ``runner-rounds`` folder, and the trees."""
    trees = _trees(tmp_path)
    monkeypatch.setattr(bench, "run_child", FakeRunner(dict(trees), stop_at=stop_at))
    with pytest.raises(Stopped):
        bench.runner_times(trees, CFG, rounds, store=_store(tmp_path, trees, rounds=rounds))
    return tmp_path / runner_rounds.FOLDER, trees


def test_the_tables_of_a_stopped_run_render_from_what_it_kept(tmp_path, monkeypatch, capsys):
    # `python -m mla_bench.report <out-dir>/runner-rounds`: a GPU call cut
    # part way still gets its tables, of the processes kept, in the trees'
    # order and each tree's processes in round order (round 10 after 9).
    from mla_bench import ranks, report

    folder, _ = _stopped(tmp_path, monkeypatch, rounds=11, stop_at=32)
    (folder / "notes-by-hand.json").write_text("{}")  # not a process: not read
    times, cpus, missing = runner_rounds.kept(folder)
    assert (list(times), missing) == (["base", "without-last", "patched"], [])
    # 31 processes: rounds 1-10 whole, then round 11's base.
    assert [len(rounds) for rounds in times.values()] == [11, 10, 10]
    assert [r[0]["execute_us"] for r in times["base"]] == [100.0 * n for n in range(1, 12)]
    assert ranks.load(folder)["base"] == times["base"]  # the rank test reads the same
    assert cpus == sorted(bench.runner_cpus())
    assert report.main([str(folder)]) == 0
    text = capsys.readouterr().out
    assert "Trees base -> without-last:" in text and "Trees without-last -> patched:" in text
    assert "11 processes of base and 10 of without-last, the trees alternating" in text
    assert "10 processes per tree" in text
    # Base 100-1100 µs against without-last 80-800: the medians of each.
    assert "| 600.0 (100.0-1100.0) | 440.0 (80.0-800.0) |" in text


def test_a_stopped_runs_tables_name_the_trees_it_has_no_process_of(tmp_path, monkeypatch, capsys):
    # Cut in round 1's third process: two trees, neither of them "patched";
    # each table says which trees it sets against each other.
    from mla_bench import report

    folder, trees = _stopped(tmp_path, monkeypatch, rounds=2, stop_at=3)
    assert report.main([str(folder)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("No process kept of patched: the tables leave it out.")
    assert "Trees base -> without-last:" in text
    assert "1 process per tree" in text

    # What cannot be rendered: one line each, nothing changed.
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    (folder / "1-without-last.json").rename(folder / "1-without-last.json.away")
    with pytest.raises(UserError, match="processes of 1 tree"):
        report.main([str(folder)])
    (folder / "1-without-last.json.away").rename(folder / "1-without-last.json")
    broken = folder / "2-patched.json"
    for content, why in (
        ("{", "Expecting"),
        ('{"report": null, "date": "d"}', "no report rows"),
        ('[{"setup": 0}]', "no report rows"),  # a bare report: not a kept process
    ):
        broken.write_text(content)
        refused = f"2-patched.json: not a runner process's result.*{why}"
        with pytest.raises(UserError, match=refused):
            report.main([str(folder)])
        with pytest.raises(UserError, match=refused):  # nor resumed
            _store(tmp_path, trees, resume=True, rounds=2).done()
    broken.write_text('{"report": [{"setup": 0}], "date": "d"}')  # rows of another shape
    with pytest.raises(UserError, match="reports do not render .KeyError") as error:
        report.main([str(folder)])
    assert len(str(error.value).splitlines()) == 1
    broken.rename(folder / "2-other.json")
    with pytest.raises(UserError, match=r"trees its run does not measure: \['other'\]"):
        report.main([str(folder)])
    (folder / "2-other.json").unlink()
    other = json.loads((folder / "1-base.json").read_text())
    other["report"][0]["launches"] += 1
    (folder / "2-base.json").write_text(json.dumps(other))
    with pytest.raises(UserError, match="launches differ between rounds") as error:
        report.main([str(folder)])
    assert len(str(error.value).splitlines()) == 1
    (folder / "2-base.json").unlink()
    (folder / runner_rounds.SETTINGS).unlink()
    with pytest.raises(UserError, match="not a runner-rounds folder"):
        report.main([str(folder)])
    del before[runner_rounds.SETTINGS]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_an_unfinished_run_is_not_overwritten_nor_resumed_with_other_settings(
    tmp_path, monkeypatch
):
    trees = _trees(tmp_path, ("base", "patched"))
    monkeypatch.setattr(bench, "run_child", FakeRunner(dict(trees), stop_at=2))
    with pytest.raises(Stopped):
        bench.runner_times(trees, CFG, 3, store=_store(tmp_path, trees))
    folder = tmp_path / runner_rounds.FOLDER
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(UserError, match="holds 1 runner processes of an unfinished run: --resume"):
        _store(tmp_path, trees)
    with pytest.raises(UserError, match=r"with other repeats than this run's") as error:
        _store(tmp_path, trees, resume=True, repeats=5)
    assert len(str(error.value).splitlines()) == 1
    with pytest.raises(UserError, match=r"with other rounds than"):
        _store(tmp_path, trees, resume=True, rounds=4)
    # The same paths, other files (the series re-applied): other trees.
    (trees[1][1] / "sglang" / "__init__.py").write_text("# changed\n")
    with pytest.raises(UserError, match=r"with other trees than"):
        _store(tmp_path, trees, resume=True)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing lost
    # The same trees elsewhere (another checkout of the GPU host): the same run.
    (trees[1][1] / "sglang" / "__init__.py").write_text("# patched\n")
    moved = _trees(tmp_path / "elsewhere", ("base", "patched"))
    assert _store(tmp_path, moved, resume=True).done()


def test_a_resume_with_nothing_to_resume_is_refused_before_measuring(tmp_path, monkeypatch):
    # A run that finished removed its folder; --resume then would measure
    # every process again (minutes of GPU time): refused, naming the folder.
    trees = _trees(tmp_path, ("base", "patched"))
    fake = FakeRunner(dict(trees))
    monkeypatch.setattr(bench, "run_child", fake)
    store = _store(tmp_path, trees)
    bench.runner_times(trees, CFG, 3, store=store)
    store.remove()
    with pytest.raises(UserError, match=r"--resume: .*runner-rounds holds no process") as error:
        _store(tmp_path, trees, resume=True)
    assert len(str(error.value).splitlines()) == 1
    assert not (tmp_path / runner_rounds.FOLDER).exists()
    # A folder whose run ended no process: the same.
    (tmp_path / runner_rounds.FOLDER).mkdir()
    with pytest.raises(UserError, match="holds no process of an unfinished run"):
        _store(tmp_path, trees, resume=True)


def test_the_bench_resumed_writes_the_record_and_tables_of_one_run(tmp_path, monkeypatch):
    # make bench --runners-only, whole; then stopped after 3 processes and
    # resumed: the same tables, the same record but for its dates.
    for key in ("SGLPATCH_BASE_TREE", "SGLPATCH_PATCHED_TREE"):
        monkeypatch.delenv(key, raising=False)
    build = tmp_path / "build"
    for leaf in ("base", "sglang"):
        package = build / "v0.5.23" / leaf / "python" / "sglang"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"# {leaf}\n")
    paths = {"base": build / "v0.5.23" / "base" / "python"}
    paths["patched"] = build / "v0.5.23" / "sglang" / "python"
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def bench_run(out, fake, *flags):
        monkeypatch.setattr(bench, "run_child", fake)
        argv = ["--build", str(build), "--base", "v0.5.23", "--device", "cuda", "--repeats", "2"]
        return bench.main(
            [*argv, "--runners-only", "--runner-rounds", "3", "--out-dir", out, *flags]
        )

    assert bench_run(str(tmp_path / "one"), FakeRunner(paths)) == 0
    stopped = FakeRunner(paths, stop_at=4)
    with pytest.raises(Stopped):
        bench_run(str(tmp_path / "two"), stopped)
    with pytest.raises(UserError, match="--resume continues it"):
        bench_run(str(tmp_path / "two"), FakeRunner(paths))
    again = FakeRunner(paths)
    again.per_tree = stopped.per_tree.copy()
    assert bench_run(str(tmp_path / "two"), again, "--resume") == 0
    assert len(again.ran) == 3
    one, two = (json.loads((tmp_path / d / "latest.json").read_text()) for d in ("one", "two"))
    assert (tmp_path / "one" / "latest.md").read_text() == (
        tmp_path / "two" / "latest.md"
    ).read_text()
    assert one["runners"] == two["runners"] and one["table"] == two["table"]
    assert one["result"] is None and one["machine"] == {"gpu": "test GPU"}
    assert "EAGLEDraftCudaGraphRunner" in one["table"]
    assert len(two["runner_processes"]) == 6
    assert not (tmp_path / "two" / runner_rounds.FOLDER).exists()  # all in the record now
    assert not list((tmp_path / "two").glob("*.png"))  # no metadata, no chart
    # Resumed once more, the run being whole: refused, nothing measured.
    idle = FakeRunner(paths)
    with pytest.raises(UserError, match="holds no process of an unfinished run"):
        bench_run(str(tmp_path / "two"), idle, "--resume")
    assert idle.ran == []
