"""Command line: ``python3 -m sglpatch [--build DIR] [--base NAME | --all-bases] COMMAND``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from sglpatch import interrupt
from sglpatch.console import note
from sglpatch.errors import CheckFailed, UserError, describe_os_error
from sglpatch.layout import Layout
from sglpatch.lock import build_lock
from sglpatch.makevars import caller_dir, shown_path, spelled, user_path


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one-line UserErrors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}")


def _apply(layout: Layout, args: argparse.Namespace) -> int:
    """apply: build the tree, or apply the series to a checkout."""
    if args.sglang_dir is not None:
        from sglpatch.fork import apply_to_checkout

        apply_to_checkout(layout, _checkout_dir(args.sglang_dir), three_way=args.three_way)
    else:
        from sglpatch.queue import apply_series

        with build_lock(layout):
            apply_series(layout, args.source)
    return 0


def _checkout_dir(text: str) -> Path:
    """The checkout folder the user named, absolute; refuse one that is not a folder,
    saying which absolute path was tried."""
    if not text.strip():
        raise UserError(
            f"{spelled('SGLANG_DIR', '--sglang-dir', repr(text))} is empty: name the root"
            " of your SGLang checkout (leave it out to build the build tree)"
        )
    path = user_path(text)
    if not path.is_dir():
        typed_absolute = text.startswith("~") or Path(text).is_absolute()
        origin = "" if typed_absolute else f" (from {caller_dir()})"
        raise UserError(
            f"{spelled('SGLANG_DIR', '--sglang-dir', text)}: {path}{origin} is not a"
            " directory: pass the root of an SGLang checkout"
        )
    return path


def _export(layout: Layout, args: argparse.Namespace) -> int:
    """export: rewrite patches/ from the build tree."""
    from sglpatch.export import export_series

    with build_lock(layout, create=False):
        export_series(layout)
    return 0


def _check_patches(layout: Layout, args: argparse.Namespace) -> int:
    """check-patches: patches/ must equal a fresh export."""
    from sglpatch.export import check_patches

    with build_lock(layout, create=False):
        check_patches(layout)
    return 0


def _check_upstream(layout: Layout, args: argparse.Namespace) -> int:
    """check-upstream: how the series fares on another release."""
    from sglpatch.compat import check_upstream

    with build_lock(layout):
        report = check_upstream(layout, args.version)
    print(report)
    return 0


def _bundle(layout: Layout, args: argparse.Namespace) -> int:
    """bundle: the offline bundle for GPU hosts."""
    from sglpatch.bundle import make_bundle

    with build_lock(layout):
        make_bundle(layout)
    return 0


def _flashinfer(layout: Layout, args: argparse.Namespace) -> int:
    """flashinfer: the real FlashInfer wheels for GPU hosts, in parts."""
    from sglpatch.flashinfer_wheels import stage

    with build_lock(layout):
        stage(layout)
    return 0


def _lint_patched(layout: Layout, args: argparse.Namespace) -> int:
    """lint-patched: upstream's hooks on the files the series touches."""
    from sglpatch.lint import lint_patched

    with build_lock(layout, create=False):
        return lint_patched(layout, Path(args.pre_commit))


def _trees(layout: Layout, args: argparse.Namespace) -> int:
    """trees: print the base and patched python/ roots."""
    from sglpatch.trees import tree_paths

    trees = tree_paths(layout.build.parent, layout.name)
    print(f"base={trees.base}\npatched={trees.patched}")
    return 0


Handler = Callable[[Layout, argparse.Namespace], int]
# The commands --all-bases runs once per base (apply: without --sglang-dir).
EVERY_BASE_COMMANDS = ("apply", "check-patches", "lint-patched", "trees")


def _layouts(args: argparse.Namespace) -> list[Layout]:
    """The layout of the chosen base, or of every base with --all-bases."""
    if not args.all_bases:
        return [Layout.create(args.build, args.patches, args.pin, args.base)]
    if args.base or args.patches or args.pin or os.environ.get("SGLPATCH_PATCHES_DIR"):
        raise UserError(
            "--all-bases takes each base's own series: drop --base, --patches, --pin"
            " and SGLPATCH_PATCHES_DIR, or pick one base with --base"
        )
    if args.command not in EVERY_BASE_COMMANDS or getattr(args, "sglang_dir", None) is not None:
        raise UserError(
            f"--all-bases works with {', '.join(EVERY_BASE_COMMANDS)} (apply: not with"
            f" {spelled('SGLANG_DIR', '--sglang-dir')}): pick one base with"
            f" {spelled('BASE', '--base', 'NAME')}"
        )
    return Layout.every_base(args.build)


def _run(layouts: list[Layout], args: argparse.Namespace) -> int:
    """Run the command for each layout; a failed check of one base does not stop
    the others (each is reported), and the worst exit status is returned."""
    code = 0
    for layout in layouts:
        if len(layouts) > 1:
            note(f"base {layout.name} ({shown_path(layout.patches)}):")
        try:
            code = max(code, args.handler(layout, args))
        except CheckFailed as exc:
            if len(layouts) == 1:
                raise
            _report_check(exc)
            code = max(code, exc.exit_code)
    return code


def _report_check(exc: CheckFailed) -> None:
    """A failed check: its line, then its problems one a line."""
    print(f"sglpatch: {exc.one_line()}", file=sys.stderr)
    for problem in exc.problems:
        print(f"  - {problem}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand and option."""
    parser = _Parser(prog="sglpatch", description=__doc__)
    parser.add_argument(
        "--build", help="build root; a base's trees are in <build>/<base> (default: <repo>/build)"
    )
    parser.add_argument(
        "--base", help="the base to work on (patches/bases.toml; default: its default base)"
    )
    parser.add_argument(
        "--all-bases",
        action="store_true",
        help=f"every base in turn ({', '.join(EVERY_BASE_COMMANDS)})",
    )
    parser.add_argument(
        "--patches", help="series directory (default: the base's, <repo>/patches/<directory>)"
    )
    parser.add_argument("--pin", help="pin file (default: <patches>/base.toml)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    apply = _command(commands, "apply", _apply)
    apply.add_argument("--source", default="wheel", help="base source: wheel (default) or git")
    apply.add_argument("--sglang-dir", help="apply to this SGLang checkout on a new branch")
    apply.add_argument("--three-way", action="store_true", help="allow a 3-way merge")
    _command(commands, "export", _export)
    _command(commands, "check-patches", _check_patches)
    upstream = _command(commands, "check-upstream", _check_upstream)
    upstream.add_argument("--version", required=True, help="release to check, X.Y.Z")
    _command(commands, "bundle", _bundle)
    _command(commands, "flashinfer", _flashinfer)
    lint = _command(commands, "lint-patched", _lint_patched)
    lint.add_argument("--pre-commit", required=True, help="the pre-commit executable")
    _command(commands, "trees", _trees)
    return parser


def _command(commands: argparse._SubParsersAction, name: str, handler: Handler) -> _Parser:
    """Add one subcommand run by ``handler``."""
    sub = commands.add_parser(name, help=(handler.__doc__ or "").split(": ", 1)[-1])
    sub.set_defaults(handler=handler)
    return sub


def main(argv: list[str] | None = None) -> int:
    """Run one command; user errors and faults become one line on stderr.

    SIGINT, SIGTERM and SIGHUP stop the command through its cleanup code.
    """
    interrupt.install()
    try:
        args = build_parser().parse_args(argv)
        return _run(_layouts(args), args)
    except CheckFailed as exc:
        _report_check(exc)
        return exc.exit_code
    except UserError as exc:
        print(f"sglpatch: error: {exc.one_line()}", file=sys.stderr)
        for hint in exc.hints:
            print(f"  {hint}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"sglpatch: error: {describe_os_error(exc)}", file=sys.stderr)
        return UserError.exit_code
    except interrupt.Interrupted as exc:
        print(f"sglpatch: interrupted by {exc.name}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("sglpatch: interrupted", file=sys.stderr)
        return 130
