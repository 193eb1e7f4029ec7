"""`geak bench FILE [--against REF] [--profile] [--json]`: the perf stage (GPU only), and with `--profile` each
kernel measured by the vendor's profiler (Nsight Compute) after its timing."""

from __future__ import annotations

import argparse
import json

from geak.evaluator import BenchResult

from .evaluation import add_eval_arguments, add_service_argument, run_evaluation
from .exits import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OK, CommandError, said
from .render import print_bench, print_profile


def register(commands) -> None:
    parser = commands.add_parser(
        "bench",
        help="time a Triton file's kernels (needs a GPU)",
        description="Exit 0 when timed, 1 when the kernel fails its check or the timing "
        "is rejected, 2 for bad input or when no GPU is visible.",
    )
    parser.add_argument("file")
    parser.add_argument("--against", metavar="REF", help="reference file: report the speedup over it")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then profile FILE's kernels over the same calls (achieved occupancy, DRAM and SM throughput; needs "
        "Nsight Compute); informational, it never changes the exit status",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (with --profile, its 'profile')")
    add_eval_arguments(parser)
    add_service_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = run_evaluation(args, "bench", print_bench, print_json=not args.profile)
    if args.profile:
        _profile(args, result)
    if result.ok:
        return EXIT_OK
    if result.check is not None and result.check.stage == "parse" and args.against is None:
        return EXIT_BAD_INPUT  # FILE itself is not valid Python
    untimed = result.backend == "interpreter" and (result.check is None or result.check.ok)  # no GPU
    return EXIT_BAD_INPUT if untimed else EXIT_FAIL


def _profile(args: argparse.Namespace, bench: BenchResult) -> None:
    """Profile FILE after a timing that ran (printed, or added to the bench's JSON as "profile")."""
    profile = None
    if bench.ok:
        try:
            profile = run_evaluation(args, "profile", print_profile, print_json=False)
        except CommandError as e:  # informational: said, and the bench's exit status stands
            said("bench", e)
    if args.json:
        found = profile.to_dict() if profile is not None else None
        print(json.dumps({**bench.to_dict(), "profile": found}))
