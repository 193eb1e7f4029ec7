"""`geak bench FILE [--against REF] [--json]`: the perf stage (GPU only)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from geak.evaluator.api import BadInput, Evaluator

from .eval_options import add_eval_arguments, eval_options
from .render import console, print_bench, status_reporter


def register(commands) -> None:
    parser = commands.add_parser(
        "bench",
        help="time a Triton file's kernels (needs a GPU)",
        description="Exit 0 when timed, 1 when the kernel fails its check or the timing "
        "is rejected, 2 for bad input or when no GPU is visible.",
    )
    parser.add_argument("file")
    parser.add_argument("--against", metavar="REF", help="reference file: report the speedup over it")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_eval_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        options = eval_options(args)
    except ValueError as e:
        print(f"geak bench: {e}", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(_bench(args, options))
    except BadInput as e:
        if args.json:
            print(json.dumps({"ok": False, "error": str(e), "stage": None}))
        else:
            print(f"geak bench: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print_bench(result)
    if result.ok:
        return 0
    return 2 if result.backend == "interpreter" and (result.check is None or result.check.ok) else 1


async def _bench(args: argparse.Namespace, options):
    async with Evaluator(options) as evaluator:
        with status_reporter(console(), enabled=not args.json) as report:
            return await evaluator.bench(args.file, against=args.against, progress=report)
