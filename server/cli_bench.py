"""`geak bench FILE [--against REF] [--json]`: the perf stage (GPU only)."""

from __future__ import annotations

import argparse

from .eval_options import add_eval_arguments, add_service_argument, run_evaluation
from .render import print_bench


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
    add_service_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = run_evaluation(args, "bench", "bench", print_bench)
    if isinstance(result, int):
        return result
    if result.ok:
        return 0
    if result.check is not None and result.check.stage == "parse" and args.against is None:
        return 2  # FILE itself is not valid Python
    return 2 if result.backend == "interpreter" and (result.check is None or result.check.ok) else 1
