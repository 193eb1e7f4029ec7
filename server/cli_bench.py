"""`geak bench FILE [--against REF] [--profile] [--json]`: the perf stage (GPU only), and with `--profile` each
kernel measured by the vendor's profiler (Nsight Compute) after its timing."""

from __future__ import annotations

import argparse
import json

from geak.evaluator.results import BenchResult, ProfileResult

from .eval_options import add_eval_arguments, add_service_argument, run_evaluation
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
    result = run_evaluation(args, "bench", "bench", print_bench, print_json=not args.profile)
    if isinstance(result, int):
        return result
    if args.profile:
        _profile(args, result)
    if result.ok:
        return 0
    if result.check is not None and result.check.stage == "parse" and args.against is None:
        return 2  # FILE itself is not valid Python
    return 2 if result.backend == "interpreter" and (result.check is None or result.check.ok) else 1


def _profile(args: argparse.Namespace, bench: BenchResult) -> None:
    """Profile FILE after a timing that ran (printed, or added to the bench's JSON as "profile")."""
    profile = run_evaluation(args, "bench", "profile", print_profile, print_json=False) if bench.ok else None
    if args.json:
        found = profile.to_dict() if isinstance(profile, ProfileResult) else None
        print(json.dumps({**bench.to_dict(), "profile": found}))
