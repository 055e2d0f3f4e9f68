"""What reached the tool from the Makefile, and how to name it back to the user.

The Makefile hands every variable a user sets to the programs as an
environment variable ``SGLPATCH_MK_<NAME>`` (never as shell code). Its
presence tells that the tool runs under make, so a message can name the
variable the user typed (``VERSION=``) instead of the tool's flag
(``--version``); ``SGLPATCH_MK_CALLER_DIR`` is the folder make was started in.
"""

from __future__ import annotations

import os
from pathlib import Path

PREFIX = "SGLPATCH_MK_"


def via_make(variable: str) -> bool:
    """True when ``variable`` came from the Makefile (set or empty)."""
    return PREFIX + variable in os.environ


def spelled(variable: str, flag: str, value: str = "...") -> str:
    """``VARIABLE=value`` under make, ``--flag value`` otherwise."""
    return f"{variable}={value}" if via_make(variable) else f"{flag} {value}"


def caller_dir() -> Path:
    """The folder a relative path of the user's is relative to.

    Under make: the folder make was started in (the shell's PWD, which
    ``make -C`` leaves as it was); otherwise, and when that is not a folder,
    the current one.
    """
    given = os.environ.get(PREFIX + "CALLER_DIR", "")
    if given and os.path.isabs(given) and os.path.isdir(given):
        return Path(given)
    return Path.cwd()


def user_path(text: str) -> Path:
    """A path the user typed, absolute: ``~`` expanded (also when it was quoted,
    so the shell left it), a relative one taken from ``caller_dir``."""
    path = Path(text)
    try:
        path = path.expanduser()
    except RuntimeError:  # ~name of no known user: left as typed
        pass
    return path if path.is_absolute() else caller_dir() / path


def shown_path(path: Path) -> str:
    """``path`` as the user would type it where they started: relative when it
    lies below that folder, else absolute."""
    try:
        return str(path.relative_to(caller_dir()))
    except ValueError:
        return str(path)
