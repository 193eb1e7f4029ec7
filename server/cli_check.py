"""`geak check FILE [--against REF] [--json]`: the parse → call → exec cascade."""

from __future__ import annotations

import argparse

from .eval_options import add_eval_arguments, run_evaluation
from .render import print_check


def register(commands) -> None:
    parser = commands.add_parser(
        "check",
        help="check a Triton file against its embedded unit test",
        description="Exit 0 when it passes, 1 when the kernel fails, 2 for bad input.",
    )
    parser.add_argument("file")
    parser.add_argument("--against", metavar="REF", help="reference file: run its test and compare outputs")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_eval_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = run_evaluation(args, "check", "check", print_check)
    if isinstance(result, int):
        return result
    return 0 if result.ok else 1
