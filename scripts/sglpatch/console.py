"""Progress notes for the user, on stderr so stdout stays parseable."""

from __future__ import annotations

import sys


def note(message: str) -> None:
    """Print one progress line."""
    print(f"sglpatch: {message}", file=sys.stderr, flush=True)


def details(lines: list[str]) -> None:
    """Lines that belong to the note before them, indented."""
    for line in lines:
        print(f"  {line}", file=sys.stderr, flush=True)
