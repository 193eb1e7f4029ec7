"""`geak check MODULE [--tests PATH[::NODE]]... [--against REF | --against-self]`: a module of a repository with
Triton kernels and no test of its own, judged by the repository's own pytest tests (``geak.evaluator``'s
`module_tests` finds them, or the user names them), in this process (the warm service serves files only)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geak.evaluator import (
    BadInput,
    CheckResult,
    Evaluator,
    ModuleTests,
    RepositoryError,
    WorkerStartError,
    module_tests,
    needs_repository_tests,
)

from .ctrl_c import run_work, work_under_way
from .evaluation import options_from_flags
from .exits import EXIT_FAIL, EXIT_NOT_CHECKABLE, EXIT_OK, CommandError
from .render import err_console, one_line, print_check, status_reporter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tests",
        action="append",
        metavar="PATH[::NODE]",
        help="a module's tests, named instead of found (repeatable): a pytest file of its repository, or one test "
        "of it (tests/test_x.py::test_y)",
    )


def is_module_check(args: argparse.Namespace) -> bool:
    """Does `geak check` judge a repository's module: one file given, with --tests, or with kernels and no test,
    unless a reference with a test of its own is given (a candidate's kernels run the reference's test)?"""
    if len(args.paths) != 1 or Path(args.paths[0]).is_dir():
        return False
    if args.tests:
        return True
    reference_tests = args.against is not None and not needs_repository_tests(Path(args.against))
    return needs_repository_tests(Path(args.paths[0])) and not reference_tests


def run(args: argparse.Namespace) -> int:
    path = Path(args.paths[0])
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        target = module_tests(path, args.tests)
    except RepositoryError as e:
        raise CommandError(one_line(str(e)), json=args.json) from None
    if args.verbose and not args.json:
        _say_found(target)
    against = str(path) if args.against_self else args.against
    try:
        options = options_from_flags(args)
    except ValueError as e:
        raise CommandError(str(e)) from None

    async def check() -> CheckResult:
        async with Evaluator(options, readable=(str(target.repository.root),)) as evaluator:
            return await evaluator.check_module(target, against=against, progress=report)

    work_under_way()
    try:
        with status_reporter(enabled=not args.json) as report:
            result = run_work(check())
    except (BadInput, WorkerStartError) as e:
        raise CommandError(one_line(str(e)), json=args.json) from None
    if args.json:
        print(json.dumps({**result.to_dict(), "repository_tests": target.to_dict()}))
    else:
        print_check(result)
    if result.not_checkable is not None:
        return EXIT_NOT_CHECKABLE
    return EXIT_OK if result.ok else EXIT_FAIL


def _say_found(target: ModuleTests) -> None:
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
