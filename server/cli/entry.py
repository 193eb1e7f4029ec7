"""The `geak` command line: check, bench and optimize Triton files and serve the language server.

Only built-in modules are imported at the top: everything else (argparse, and torch, Triton, openai behind the
commands) loads inside `main` while Ctrl-C means "exit 130 now" (``ctrl_c``), so an interrupt at any moment, even
while they load, ends with one line and no traceback. Once a command's work is under way, Ctrl-C is a
KeyboardInterrupt the command handles.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from .ctrl_c import exiting_at_once
from .exits import EXIT_INTERRUPTED, CommandError, said

if TYPE_CHECKING:
    import argparse

LOG_FORMAT = "%(relativeCreated)8.0f ms %(levelname)s %(name)s: %(message)s"  # `-v` lines: benchmarks/spell_timeline.py


def build_parser() -> argparse.ArgumentParser:
    import argparse

    from . import bench, check, eval, optimize, run, serve, service

    parser = argparse.ArgumentParser(
        prog="geak",
        description="Check, time and optimize Triton kernels against their own embedded unit tests.",
    )
    parser.add_argument("--version", action="version", version=f"geak {_version()}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log what happens to stderr (-vv: GEAK's debug lines too, e.g. each spell a timing has "
                        "the GPU alone)")  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (check, bench, optimize, serve, run, eval, service):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    with exiting_at_once():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    import logging

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        logging.basicConfig(
            level=logging.INFO if args.verbose else logging.WARNING,
            stream=sys.stderr,
            format=LOG_FORMAT,
        )
        if args.verbose > 1:
            logging.getLogger("geak").setLevel(logging.DEBUG)
        for handler in logging.getLogger().handlers:
            handler.addFilter(_MaskedCredentials())
        return args.run(args)
    except CommandError as e:
        return said(args.command, e)
    except KeyboardInterrupt:
        print("geak: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


class _MaskedCredentials:
    """A logging filter: URLs in log lines (the HTTP client's included) never show a password."""

    def filter(self, record) -> bool:
        from geak.agent.config import mask_credentials_in_text

        record.msg, record.args = mask_credentials_in_text(record.getMessage()), None
        return True


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geak")
    except PackageNotFoundError:
        return "unknown (not installed)"

