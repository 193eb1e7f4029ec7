"""`geak check|bench MODULE [--tests PATH[::NODE]]... [--budget-s S] [--cases-per-test K]`: a module of a repository
with Triton kernels and no test of its own, judged by the repository's own pytest tests (``geak.evaluator``'s
`module_tests` finds them, or the user names them), in this process (the warm service serves files only). `geak
optimize MODULE` and `--base`/`--changed` take their target from here too."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from geak.evaluator import (
    BadInput,
    BenchResult,
    EvalOptions,
    Evaluator,
    ModuleTests,
    RepositoryError,
    WorkerStartError,
    cases_run,
    check_module_in_jobs,
    module_tests,
    needs_repository_tests,
)

from .ctrl_c import run_work, work_under_way
from .evaluation import options_from_flags, positive_seconds, whole_number
from .exits import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_NOT_CHECKABLE, EXIT_OK, CommandError
from .render import err_console, one_line, print_bench, print_check, status_reporter

BUDGETED_CASES = 4  # a --budget-s check runs at most this many cases of each test function unless --cases-per-test


def add_arguments(parser: argparse.ArgumentParser, limits: bool = True) -> None:
    """`--tests`, and with `limits` the limits on a check's cases (`--budget-s`, `--cases-per-test`)."""
    group = parser.add_argument_group("a repository's module")
    group.add_argument(
        "--tests",
        action="append",
        metavar="PATH[::NODE]",
        help="a module's tests, named instead of found (repeatable): a pytest file of its repository, or one test "
        "of it (tests/test_x.py::test_y)",
    )
    if not limits:
        return
    group.add_argument(
        "--budget-s",
        type=positive_seconds,
        metavar="S",
        help="a module's tests: start no case past S seconds of a run once one has run, and run at most "
        f"--cases-per-test cases of each test function ({BUDGETED_CASES} unless given); what is left out is said",
    )
    group.add_argument(
        "--cases-per-test",
        type=whole_number(1, "a whole number of at least 1"),
        metavar="K",
        help="a module's tests: at most K cases of each parametrized test function, spread over its parameters "
        "(the same ones every run)",
    )


def is_module(path: str, tests: list[str] | None, against: str | None = None) -> bool:
    """Is `path` a repository's module, judged by its repository's tests: named with --tests, or with kernels and no
    test, unless a reference with a test of its own is given (a candidate's kernels then run the reference's)?"""
    if Path(path).is_dir():
        return False
    if tests:
        return True
    reference_tests = against is not None and not needs_repository_tests(Path(against))
    return needs_repository_tests(Path(path)) and not reference_tests


def is_module_check(args: argparse.Namespace) -> bool:
    """Does `geak check` judge a repository's module (one file given, ``is_module``)?"""
    return len(args.paths) == 1 and is_module(args.paths[0], args.tests, args.against)


def target_of(path: str | Path, tests: list[str] | None, json_output: bool = False) -> ModuleTests:
    """The module's tests, found or named; bad input (exit 2, one line) where there are none."""
    if not Path(path).is_file():
        raise CommandError(f"{path}: no such file")
    try:
        return module_tests(Path(path), tests)
    except RepositoryError as e:
        raise CommandError(one_line(str(e)), json=json_output) from None


def options_of(args: argparse.Namespace) -> EvalOptions:
    """The evaluation flags' options with the limits on a module's cases (`--budget-s`, `--cases-per-test`)."""
    try:
        options = options_from_flags(args)
    except ValueError as e:
        raise CommandError(str(e)) from None
    budget, cases = getattr(args, "budget_s", None), getattr(args, "cases_per_test", None)
    options.tests_budget_s = budget
    options.cases_per_test = cases if cases is not None else BUDGETED_CASES if budget is not None else None
    return options


def run(args: argparse.Namespace) -> int:
    """`geak check MODULE`."""
    target = target_of(args.paths[0], args.tests, args.json)
    if args.verbose and not args.json:
        say_found(target)
    against = str(target.path) if args.against_self else args.against
    options = options_of(args)
    options.max_concurrent = args.jobs or min(4, os.cpu_count() or 1)  # test files in jobs of their own at once
    result = _evaluated(target, options, args.json, lambda ev, report: check_module_in_jobs(
        ev, target, options.max_concurrent, against=against, progress=report))  # fmt: skip
    if args.json:
        print(json.dumps({**result.to_dict(), "repository_tests": found_and_run(target, result.tests, options)}))
    else:
        print_check(result)
        if args.verbose:
            say_run(result.tests, options)
    if result.not_checkable is not None:
        return EXIT_NOT_CHECKABLE
    return EXIT_OK if result.ok else EXIT_FAIL


def run_bench(args: argparse.Namespace) -> int:
    """`geak bench MODULE [--against REF]`: the calls the module's tests make of its wrappers and
    `autograd.Function`s, backward passes included, timed (after the check, against REF where given)."""
    target = target_of(args.file, args.tests, args.json)
    if args.verbose and not args.json:
        say_found(target)
    options = options_of(args)
    result: BenchResult = _evaluated(target, options, args.json, lambda ev, report: ev.bench(
        against=args.against, progress=report, module=target))  # fmt: skip
    check = result.check.tests if result.check is not None else ()
    if args.json:
        print(json.dumps({**result.to_dict(), "repository_tests": found_and_run(target, check, options)}))
    else:
        print_bench(result)
        if args.verbose and check:
            say_run(check, options)
    if result.ok:
        return EXIT_OK
    untimed = result.backend == "interpreter" and (result.check is None or result.check.ok)  # no GPU
    return EXIT_BAD_INPUT if untimed else EXIT_FAIL


def _evaluated(target: ModuleTests, options: EvalOptions, json_output: bool, work):
    """`work(evaluator, report)` with an evaluator whose jobs may read the module's repository."""

    async def evaluate():
        async with Evaluator(options, readable=(str(target.repository.root),)) as evaluator:
            return await work(evaluator, report)

    work_under_way()
    try:
        with status_reporter(enabled=not json_output) as report:
            return run_work(evaluate())
    except (BadInput, WorkerStartError) as e:
        raise CommandError(one_line(str(e)), json=json_output) from None


def found_and_run(target: ModuleTests, tests, options: EvalOptions) -> dict:
    """What was found and why, what ran and what was left out, as data (`--json`'s `repository_tests`)."""
    return {
        **target.to_dict(),
        "cases_per_test": options.cases_per_test,
        "budget_s": options.tests_budget_s,
        "ran": cases_run(tests, options.tests_budget_s),
        "left_out": [{"node": t.name, "why": t.message} for t in tests if t.kind == "left out"],
    }


def say_found(target: ModuleTests) -> None:
    """What was found and why, on stderr (`-v`)."""
    where = {
        "imports": "found through imports under " + ", ".join(str(p) for p in target.searched),
        "[tool.geak]": "named in [tool.geak.tests] of pyproject.toml",
        "--tests": "named with --tests",
    }[target.source]
    out = err_console()
    out.print(f"{target.module} in {target.repository.root}: {len(target.tests)} test(s) {where}", markup=False)
    for line in target.describe():
        out.print(f"  {line}", markup=False, soft_wrap=True)
    sys.stderr.flush()


def say_run(tests, options: EvalOptions) -> None:
    """What ran and what was left out, on stderr (`-v`)."""
    err_console().print(cases_run(tests, options.tests_budget_s), markup=False, soft_wrap=True)
    sys.stderr.flush()
