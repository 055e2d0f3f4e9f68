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


def kept(folder: Path) -> tuple[dict, list]:
    """What an unfinished run's ``runner-rounds`` ``folder`` holds: (tree -> its
    processes' reports by round, the trees in the run's order and only those
    with a process; the CPUs they were pinned to)."""
    folder = Path(folder)
    try:
        wanted = json.loads((folder / SETTINGS).read_text())["settings"]
        names = [tree["name"] for tree in wanted["trees"]]
        cpus = list(wanted["cpus"])
        found = {}
        for path in folder.glob("*-*.json"):
            data = json.loads(path.read_text())
            found[int(data["round"]), data["tree"]] = data["report"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{folder}: not a runner-rounds folder ({error})") from None
    times = {}
    for number, name in sorted(found):
        times.setdefault(name, []).append(found[number, name])
    return {name: times[name] for name in names if name in times}, cpus


class Store:
    """The ``runner-rounds`` folder of one ``--runners`` measurement."""

    def __init__(self, out_dir: Path, wanted: dict, resume: bool, command: str = ""):
        self.folder = Path(out_dir) / FOLDER
        self.settings = wanted
        kept = self._files()
        recorded = self.folder / SETTINGS
        if kept and not resume:
            raise UserError(
                f"{self.folder} holds {len(kept)} runner processes of an unfinished run:"
                " --resume continues it, or move the folder away"
            )
        if resume and not kept:
            raise UserError(
                f"--resume: {self.folder} holds no process of an unfinished run (a finished"
                " run's record is latest.json beside it): run without --resume to measure anew"
            )
        if kept:
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
        found = {}
        for path in sorted(self.folder.glob("*-*.json")):
            number, _, name = path.stem.partition("-")
            if number.isdigit():
                found[int(number), name] = path
        return found

    def done(self) -> dict:
        """(round, tree) -> that process's ``runner_check`` report."""
        out = {}
        for pair, path in self._files().items():
            try:
                out[pair] = json.loads(path.read_text())["report"]
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise UserError(f"{path}: not a runner process's result ({error})") from None
        return out

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
