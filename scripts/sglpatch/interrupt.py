"""Termination signals (SIGINT, SIGTERM, SIGHUP) as an exception, so cleanup runs."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The run was asked to stop by a signal; ``finally`` blocks still run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        """``SIGTERM`` and the like."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a process killed by it."""
        return 128 + self.signum


def install() -> None:
    """Turn each termination signal the process does not ignore into Interrupted."""
    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)


def _raise(signum: int, frame: FrameType | None) -> None:
    """Raise Interrupted once; later signals are ignored so that cleanup can finish."""
    for other in SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


@contextmanager
def deferred(resume: bool = True) -> Iterator[list[int]]:
    """Hold termination signals while the block runs (a write that must finish
    as a whole); one that came meanwhile goes, once the block is done, to the
    handler held before it: it stops the run, or an enclosing block holds it
    in turn. Without ``resume`` the run goes on (the block was its last step):
    the list it yields then holds the signals that came, for the caller to
    report."""
    caught: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, lambda number, frame: caught.append(number))
    try:
        yield caught
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if resume and caught and callable(previous[caught[0]]):
            previous[caught[0]](caught[0], None)
