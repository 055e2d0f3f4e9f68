"""Entry point for ``python3 -m sglpatch``."""

from sglpatch.cli import main

raise SystemExit(main())
