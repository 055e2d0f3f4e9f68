"""Entry point for ``python3 -m sglpatch``."""

from sglpatch.pyversion import check

check()  # an older Python gets one line, before cli imports what needs 3.11

from sglpatch.cli import main  # noqa: E402

raise SystemExit(main())
