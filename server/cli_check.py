"""`geak check FILE [--against REF] [--json]`: the parse → call → exec cascade."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from geak.evaluator.api import BadInput, Evaluator

from .eval_options import add_eval_arguments, eval_options
from .render import console, print_check, status_reporter


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
    try:
        options = eval_options(args)
    except ValueError as e:
        print(f"geak check: {e}", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(_check(args, options))
    except BadInput as e:
        if args.json:
            print(json.dumps({"ok": False, "error": str(e), "stage": None}))
        else:
            print(f"geak check: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print_check(result)
    return 0 if result.ok else 1


async def _check(args: argparse.Namespace, options):
    async with Evaluator(options) as evaluator:
        with status_reporter(console(), enabled=not args.json) as report:
            return await evaluator.check(args.file, against=args.against, progress=report)
