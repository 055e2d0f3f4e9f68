"""Errors reported to the user without a traceback."""

from __future__ import annotations

import errno
import resource
from collections.abc import Sequence


class UserError(Exception):
    """A problem the user can fix; the CLI prints it as one line and exits 2.

    ``hints`` are short lines printed under it, indented: the items a message
    would otherwise string together (failing patches, commands to copy).
    """

    exit_code = 2

    def __init__(self, message: str = "", *, hints: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.hints = tuple(hints)

    def one_line(self) -> str:
        """The message collapsed onto a single line."""
        return " ".join(str(self).split())


class CheckFailed(UserError):
    """A check found problems; the CLI lists them and exits 1."""

    exit_code = 1

    def __init__(self, title: str, problems: list[str]) -> None:
        super().__init__(f"{title}: {len(problems)} problem(s)")
        self.title = title
        self.problems = problems


# What to do about the file system faults a user can meet.
_OS_ADVICE = {
    errno.ENOSPC: "free some space and run again",
    errno.EDQUOT: "free some space and run again",
    errno.EFBIG: "free some space (or raise the file size limit) and run again",
    errno.EROFS: "the file system is read-only: make it writable, or pick another --build",
    errno.EACCES: "make it writable for you, or pick another --build",
    errno.EPERM: "make it writable for you, or pick another --build",
}


def describe_os_error(exc: OSError) -> str:
    """A file system fault as one line: what failed, on which file, what to do."""
    what = exc.strerror or str(exc) or type(exc).__name__
    where = f" ({exc.filename})" if exc.filename else ""
    advice = _OS_ADVICE.get(exc.errno or 0)
    if exc.errno == errno.EFBIG and file_size_limit():
        advice = f"{file_size_limit()}: raise it (or free some space) and run again"
    return " ".join(f"{what}{where}{'; ' + advice if advice else ''}".split())


def file_size_limit() -> str:
    """``the file size limit (ulimit -f) is 307200 bytes`` when this process has
    one (a write past it fails with EFBIG, File too large), else ''."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft == resource.RLIM_INFINITY:
        return ""
    return f"the file size limit (ulimit -f) is {soft} bytes"
