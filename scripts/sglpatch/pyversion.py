"""Refuse a Python older than 3.11 in words, before anything needs 3.11.

Written for any Python 3, so an old interpreter reaches this message and not a
``ModuleNotFoundError: tomllib``: ``sglpatch``, ``make bench`` and ``make venv``
call ``check`` first.
"""

import sys

NEEDED = (3, 11)


def problem(version_info=None, executable=None):
    """The one-line complaint about this interpreter, or None when it will do."""
    version = tuple(version_info or sys.version_info)[:3]
    if version[:2] >= NEEDED:
        return None
    return "needs Python {}+, and {} is Python {}: {}".format(
        ".".join(map(str, NEEDED)),
        executable or sys.executable or "python3",
        ".".join(map(str, version)),
        "run make with PYTHON=python3.11 (or a newer python)",
    )


def check(prog="sglpatch"):
    """Exit 2 with ``PROG: error: needs Python 3.11+ ...`` on an older Python."""
    message = problem()
    if message:
        sys.stderr.write("{}: error: {}\n".format(prog, message))  # noqa: UP032 (Python 2)
        raise SystemExit(2)


if __name__ == "__main__":
    check()
