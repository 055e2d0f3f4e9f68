"""One sglpatch run at a time per build directory: an exclusive lock, held for
the whole command. A second run waits for the first one to finish."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sglpatch import scratch
from sglpatch.console import note
from sglpatch.layout import Layout

LOCK_NAME = ".sglpatch.lock"


@contextmanager
def pid_lock(path: Path, busy: Callable[[str], None]) -> Iterator[None]:
    """An exclusive ``flock`` of ``path`` that records this process's pid.
    When another process holds it, ``busy(holder)`` is called with what that
    one recorded: it raises to refuse, or returns to wait for the lock."""
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            busy(handle.read().strip() or "another process")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        yield


@contextmanager
def build_lock(layout: Layout, create: bool = True) -> Iterator[None]:
    """Hold the lock of ``layout.build`` (made when ``create``) and sweep leftovers.

    Without ``create``, a missing build directory is not made and not locked:
    the command then finds nothing to work on and says so.
    """
    if not layout.build.is_dir():
        if not create:
            yield
            return
        layout.build.mkdir(parents=True, exist_ok=True)
    path = layout.build / LOCK_NAME

    def wait(holder: str) -> None:
        note(f"waiting for the sglpatch run holding {path} ({holder})")

    with pid_lock(path, wait):
        scratch.sweep(layout)
        from sglpatch.export import finish_export  # export imports the build tree code

        how = finish_export(layout)
        if how:
            note(f"finished the `make export` to {layout.patches} that {how}")
        yield
