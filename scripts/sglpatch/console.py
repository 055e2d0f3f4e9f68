"""Progress notes for the user, on stderr so stdout stays parseable."""

from __future__ import annotations

import sys


def note(message: str) -> None:
    """Print one progress line."""
    print(f"sglpatch: {message}", file=sys.stderr, flush=True)
