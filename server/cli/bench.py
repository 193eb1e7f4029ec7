"""`geak bench FILE [--against REF | --base REV] [--max-slowdown X] [--profile] [--json]`: the perf stage (GPU
only), against a reference file or the file's version at a git revision (``base_check``), and with `--profile` each
kernel measured by the vendor's profiler (Nsight Compute) after its timing."""

from __future__ import annotations

import argparse
import json
import time

from geak.evaluator import BadInput, BenchResult, Evaluator, WorkerStartError

from .. import base_comparison
from . import base_check, module_check
from .base_files import only_version, selected
from .ctrl_c import run_work, work_under_way
from .evaluation import add_base_arguments, add_eval_arguments, add_service_argument, run_evaluation
from .exits import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_OK, CommandError, said
from .render import print_base_verdicts, print_bench, print_profile, status_reporter


def register(commands) -> None:
    parser = commands.add_parser(
        "bench",
        help="time a Triton file's kernels (needs a GPU)",
        description="Exit 0 when timed, 1 when the kernel fails its check or the timing "
        "is rejected (or is slower than the reference beyond --max-slowdown), 2 for bad input or when no GPU is "
        "visible.",
    )
    parser.add_argument("file")
    reference = parser.add_mutually_exclusive_group()
    reference.add_argument("--against", metavar="REF", help="reference file: report the speedup over it")
    add_base_arguments(parser, reference)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then profile FILE's kernels over the same calls (achieved occupancy, DRAM and SM throughput; needs "
        "Nsight Compute); informational, it never changes the exit status",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (with --profile, its 'profile')")
    module_check.add_arguments(parser)  # a repository's module: the calls its repository's tests make, timed
    add_eval_arguments(parser)
    add_service_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.max_slowdown is not None and not (args.against or args.base):
        raise CommandError("--max-slowdown needs --against REF or --base REV (a slowdown against what?)")
    module = module_check.is_module(args.file, args.tests, args.against)
    if args.base is not None:
        if args.profile:
            raise CommandError("--profile profiles FILE alone: run it without --base")
        return _run_base(args, module)
    if module:
        if args.profile:
            raise CommandError("--profile profiles a file's own tests' calls: a repository's module is not profiled")
        return module_check.run_bench(args)
    result = run_evaluation(args, "bench", print_bench, print_json=not args.profile)
    if args.profile:
        _profile(args, result)
    if result.ok:
        return EXIT_FAIL if base_comparison.too_slow(result, args.max_slowdown) else EXIT_OK
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


def _run_base(args: argparse.Namespace, module: bool) -> int:
    """FILE timed against its version at the base; one the same as there is not timed. A repository's module
    (`module`) in its repository's tests, its version at the base in its place as the reference."""
    selection = selected([args.file], args.base, changed=False)
    version = only_version(selection)
    target = module_check.target_of(args.file, args.tests, args.json) if module else None
    options = module_check.options_of(args)
    readable = (str(target.repository.root),) if target is not None else ()

    async def timed(report) -> base_comparison.BaseVerdict:
        with base_comparison.base_folder() as folder:
            async with Evaluator(options, readable=readable) as evaluator:
                return await base_comparison.bench_file(evaluator, selection.base, version, folder,
                                                   max_slowdown=args.max_slowdown, progress=report,
                                                   module=target)  # fmt: skip

    started = time.perf_counter()
    if base_comparison.is_same(version):
        verdict = base_comparison.same(selection.base, version, ": nothing to time")
    else:
        work_under_way()
        try:
            with status_reporter(enabled=not args.json) as report:
                verdict = run_work(timed(report))
        except (BadInput, WorkerStartError) as e:
            raise CommandError(str(e)) from None
    totals = base_check.summary([verdict])
    if args.json:
        print(json.dumps({"base": selection.base.to_dict(), "summary": totals,
                          "wall_s": time.perf_counter() - started, "files": [verdict.to_dict()]}))  # fmt: skip
    else:
        print_base_verdicts(selection.base, [verdict], totals, time.perf_counter() - started, single=True)
    return base_check.exit_code([verdict])
