"""Command-line options and the run shared by the commands that evaluate files (`geak check`, `geak bench`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from geak.evaluator.api import BadInput, EvalOptions, Evaluator
from geak.evaluator.compare import parse_tolerance_overrides
from geak.evaluator.results import BenchResult, CheckResult

from .render import status_reporter


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("evaluation")
    group.add_argument(
        "--backend",
        choices=("auto", "gpu", "interpreter"),
        default="auto",
        help="where kernels run: the GPU if one is visible (auto), or Triton's CPU interpreter",
    )
    group.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="time limit of one run of the file's tests, in seconds (default 300)",
    )
    group.add_argument(
        "--tolerance",
        action="append",
        default=[],
        metavar="DTYPE=RTOL,ATOL",
        help="override the comparison tolerance of a dtype, e.g. float32=1e-4,1e-4",
    )
    group.add_argument(
        "--no-fresh-inputs",
        action="store_true",
        help="compare only the test's own outputs, not extra calls with fresh random inputs",
    )
    group.add_argument(
        "--seed",
        type=int,
        default=EvalOptions.seed,
        help=f"seed of Python, NumPy and torch before the import and each test (default {EvalOptions.seed}, "
        "as GEAK-eval)",
    )
    group.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds (default 15)")
    group.add_argument("--gpu", type=int, default=None, metavar="ID", help="GPU index to use")


def eval_options(args: argparse.Namespace) -> EvalOptions:
    if args.rounds < 3:
        raise ValueError("--rounds must be at least 3")
    return EvalOptions(
        timeout_s=args.timeout,
        fresh_inputs=not args.no_fresh_inputs,
        tolerances=parse_tolerance_overrides(args.tolerance),
        bench_rounds=args.rounds,
        backend=args.backend,
        gpu_id=args.gpu,
        seed=args.seed,
        spares=0,
    )


def run_evaluation(args: argparse.Namespace, command: str, method: str, render) -> CheckResult | BenchResult | int:
    """Run `Evaluator.<method>(args.file, against=args.against)` for a CLI command and print the result (JSON with
    `--json`, else `render`). Returns the result, or exit code 2 for bad input (said on stderr, or in the JSON)."""
    try:
        options = eval_options(args)
    except ValueError as e:
        print(f"geak {command}: {e}", file=sys.stderr)
        return 2

    async def evaluate():
        async with Evaluator(options) as evaluator:
            with status_reporter(enabled=not args.json) as report:
                return await getattr(evaluator, method)(args.file, against=args.against, progress=report)

    try:
        result = asyncio.run(evaluate())
    except BadInput as e:
        if args.json:
            print(json.dumps({"ok": False, "error": str(e), "stage": None}))
        else:
            print(f"geak {command}: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        render(result)
    return result
