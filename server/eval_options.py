"""Command-line options shared by the commands that evaluate files."""

from __future__ import annotations

import argparse

from geak.evaluator.api import EvalOptions
from geak.evaluator.compare import parse_tolerance_overrides


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
        spares=0,
    )
