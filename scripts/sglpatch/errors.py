"""Errors reported to the user without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; the CLI prints it as one line and exits 2."""

    exit_code = 2

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
