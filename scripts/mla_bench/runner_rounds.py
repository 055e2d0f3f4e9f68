"""``--runners``' processes kept as each ends: one JSON file per (round, tree)
in ``<out-dir>/runner-rounds/``, beside the settings they were measured with,
so a run stopped part way (a GPU call's time limit) loses only the process it
was in, and ``--resume`` runs only the missing ones."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
from pathlib import Path

from sglpatch.errors import UserError

FOLDER = "runner-rounds"
SETTINGS = "settings.json"
SHOWN_ONLY = ("paths",)  # recorded, not compared


def order(names: list[str], rounds: int) -> list[tuple[int, str]]:
    """(round, tree) in the order they run: rounds from 1, the trees as given
    in odd rounds and reversed in even ones."""
    return [(i, name) for i in range(1, rounds + 1) for name in (names if i % 2 else names[::-1])]


def tree_digest(tree: Path) -> str:
    """sha256 over the ``sglang`` package's ``.py`` files under ``tree`` (their
    paths and bytes): a tree re-applied or changed has another."""
    digest = hashlib.sha256()
    package = tree / "sglang"
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(tree)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def settings(trees: list, cfg: dict, rounds: int, loop: int, sizes, cpus) -> dict:
    """What decides a runner process's figures: the trees (name, content),
    the rounds, ``runner_check``'s flags, the CPUs it is pinned to, the
    machine; and where the trees were (``SHOWN_ONLY``: a resume from another
    checkout of the same trees is the same measurement)."""
    from .worker import machine

    return {
        "trees": [{"name": name, "digest": tree_digest(path)} for name, path in trees],
        "paths": [str(path) for _, path in trees],
        "rounds": rounds,
        "repeats": cfg["repeats"],
        "loop": loop,
        "sizes": list(sizes) if sizes else None,
        "cpus": sorted(cpus),
        "machine": machine(),
    }


def _write(path: Path, data) -> None:
    """``data`` as JSON at ``path``, whole or not at all (a temporary file renamed)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data, indent=1))
    os.replace(temporary, path)


def process_files(folder: Path) -> dict:
    """(round, tree) -> file, for the files in ``folder`` named
    ``<round>-<tree>.json`` (the round in digits), by round; nothing else."""
    found = {}
    for path in Path(folder).glob("*-*.json"):
        number, _, name = path.stem.partition("-")
        if number.isdecimal() and number.isascii():
            found[int(number), name] = path
    return dict(sorted(found.items()))


def processes(folder: Path, dated: bool = False) -> dict:
    """(round, tree) -> report rows of each process ``folder`` holds
    (``process_files``): a process this module kept (its rows under
    ``report``, beside its ``date``) or, unless ``dated``, a ``runner_check``
    report (the rows)."""
    found = {}
    for pair, path in process_files(folder).items():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise UserError(f"{path}: not a runner process's result ({error})") from None
        if isinstance(data, dict):
            rows = data.get("report") if "date" in data or not dated else None
        else:
            rows = None if dated else data
        if not (isinstance(rows, list) and all(isinstance(row, dict) for row in rows)):
            raise UserError(f"{path}: not a runner process's result (no report rows)")
        found[pair] = rows
    return found


def kept(folder: Path) -> tuple[dict, list, list]:
    """What an unfinished run's ``runner-rounds`` ``folder`` holds: tree -> its
    processes' reports by round (the trees the run measures, in its order, that
    have one), the CPUs they were pinned to, and the trees without one."""
    try:
        wanted = json.loads((Path(folder) / SETTINGS).read_text())["settings"]
        names = [tree["name"] for tree in wanted["trees"]]
        cpus = list(wanted["cpus"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{folder}: not a runner-rounds folder ({error})") from None
    times = {}
    for (_, name), rows in processes(folder, dated=True).items():
        times.setdefault(name, []).append(rows)
    others = sorted(set(times) - set(names))
    if others:
        raise UserError(f"{folder}: processes of trees its run does not measure: {others}")
    return (
        {name: times[name] for name in names if name in times},
        cpus,
        [name for name in names if name not in times],
    )


class Store:
    """The ``runner-rounds`` folder of one ``--runners`` measurement."""

    def __init__(self, out_dir: Path, wanted: dict, resume: bool, command: str = ""):
        self.folder = Path(out_dir) / FOLDER
        self.settings = wanted
        held = self._files()
        recorded = self.folder / SETTINGS
        if held and not resume:
            raise UserError(
                f"{self.folder} holds {len(held)} runner processes of an unfinished run:"
                " --resume continues it, or move the folder away"
            )
        if resume and not held:
            raise UserError(
                f"--resume: {self.folder} holds no process of an unfinished run (a finished"
                " run's record is latest.json beside it): run without --resume to measure anew"
            )
        if held:
            try:
                earlier = json.loads(recorded.read_text())["settings"]
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise UserError(f"{recorded}: not readable ({error})") from None
            keys = set(earlier) | set(wanted)
            differ = [k for k in keys - set(SHOWN_ONLY) if earlier.get(k) != wanted.get(k)]
            if differ:
                raise UserError(
                    f"--resume: {self.folder} was measured with other {', '.join(sorted(differ))}"
                    " than this run's: rerun its command, or move the folder away"
                )
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        _write(recorded, {"command": command, "settings": wanted})

    def _files(self) -> dict:
        """(round, tree) -> file, for the processes this folder holds."""
        return process_files(self.folder)

    def done(self) -> dict:
        """(round, tree) -> that process's ``runner_check`` report."""
        return processes(self.folder, dated=True)

    def save(self, number: int, name: str, report) -> None:
        """Keep one process's report, as soon as it ended."""
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        _write(
            self.folder / f"{number}-{name}.json",
            {"round": number, "tree": name, "date": stamp, "report": report},
        )

    def dates(self) -> list:
        """[round, tree, date] of each process kept, by round."""
        rows = []
        for (number, name), path in self._files().items():
            rows.append([number, name, json.loads(path.read_text())["date"]])
        return sorted(rows)

    def remove(self) -> None:
        """Once the run's record holds every process: the folder goes."""
        shutil.rmtree(self.folder)
