"""Shared pytest setup: ``scripts/`` on the path, the two SGLang trees, options."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def pytest_addoption(parser):
    group = parser.getgroup("sglpatch")
    group.addoption("--build", default=str(ROOT / "build"), help="build directory of `make apply`")
    group.addoption(
        "--scenarios",
        type=int,
        default=None,
        help="generated scenarios per differential run (default: 40 on CPU, 300 on a GPU)",
    )
    group.addoption("--scenario-seed", type=int, default=2026)
