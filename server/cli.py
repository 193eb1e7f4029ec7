"""The `geak` command line: check, bench and optimize Triton files, and serve the language server."""

from __future__ import annotations

import argparse
import logging
import sys

from . import cli_bench, cli_check, cli_optimize, cli_serve

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geak",
        description="Check, time and optimize Triton kernels against their own embedded unit tests.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (cli_check, cli_bench, cli_optimize, cli_serve):
        module.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("geak: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
