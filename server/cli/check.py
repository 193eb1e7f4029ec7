"""`geak check PATH... [--against REF | --against-self | --base REV] [--changed] [--json]`: the parse → call → exec
cascade, for one file or for many (folders: every Triton file in them) with one warm evaluator; with `--base` or
`--changed`, each file against its version at a git revision (``base_check``)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from geak.evaluator import BadInput, WorkerStartError

from ..base_comparison import BaseVerdict
from . import base_check, module_check
from .base_files import DEFAULT_BASE, only_version, selected
from .check_many import FileVerdict, check_many, summary, triton_files
from .ctrl_c import run_work, work_under_way
from .evaluation import (
    add_base_arguments,
    add_eval_arguments,
    add_service_argument,
    options_from_flags,
    run_evaluation,
)
from .exits import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INTERRUPTED, EXIT_NOT_CHECKABLE, EXIT_OK, CommandError
from .render import file_progress, print_base_verdicts, print_check, print_check_summary


def register(commands) -> None:
    parser = commands.add_parser(
        "check",
        help="check Triton files against their embedded unit tests",
        description="Exit 0 when every file passes, 1 when a kernel fails, 2 for bad input (a file that is not "
        "valid Python included), 3 when this backend cannot check a file (Triton's CPU interpreter: block "
        "pointers, inline assembly, too slow...). Several files or folders are checked with one warm evaluator, "
        "with a progress bar and a summary table. With --base or --changed, 1 also when a file's outputs differ from "
        "its version at the base, or it is slower beyond --max-slowdown.",
    )
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="Triton files, or folders of them (with --changed: where to look)"
    )
    reference = parser.add_mutually_exclusive_group()
    reference.add_argument("--against", metavar="REF", help="reference file: run its test and compare outputs")
    reference.add_argument(
        "--against-self",
        action="store_true",
        help="compare each file with itself (a golden file must match its own outputs and fresh-input probes)",
    )
    add_base_arguments(parser, reference)
    parser.add_argument(
        "--changed",
        action="store_true",
        help=f"check the Triton files changed since the base ({DEFAULT_BASE} unless --base): committed since, staged, "
        "unstaged or untracked; each against its version there, timed against it on a GPU; a repository's module "
        "(kernels, no test of its own) by its repository's tests",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="files checked at once (default: 1 for one file, else min(4, CPU cores)); a repository's module: its "
        "test files in jobs of their own at once (default min(4, CPU cores))",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    module_check.add_arguments(parser)  # a repository's module: judged by the repository's tests
    add_eval_arguments(parser)
    add_service_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise CommandError("--jobs must be at least 1")
    if args.changed and (args.against or args.against_self):
        raise CommandError("--changed compares with a git revision (--base), not with --against or --against-self")
    if args.max_slowdown is not None and not (args.base or args.changed):
        raise CommandError("--max-slowdown needs --base REV or --changed (a slowdown against what?)")
    if args.changed or args.base is not None:
        return _run_base(args)
    if not args.paths:
        raise CommandError("give a Triton file or folder to check (or --changed)")
    if module_check.is_module_check(args):
        return module_check.run(args)
    if args.tests:
        raise CommandError("--tests names the tests of one module: give one file")
    single = len(args.paths) == 1 and not Path(args.paths[0]).is_dir() and not args.against_self
    if single:
        args.file = args.paths[0]
        result = run_evaluation(args, "check", print_check)
        if result.not_checkable is not None:
            return EXIT_NOT_CHECKABLE
        if result.ok:
            return EXIT_OK
        invalid = result.stage == "parse" and args.against is None  # FILE itself is not valid Python
        return EXIT_BAD_INPUT if invalid else EXIT_FAIL
    return _run_many(args)


def _run_many(args: argparse.Namespace) -> int:
    files = triton_files(args.paths)
    if not files:
        raise CommandError(f"no Triton file in {' '.join(args.paths)}")
    try:
        options = options_from_flags(args)
    except ValueError as e:
        raise CommandError(str(e)) from None
    options.max_concurrent = args.jobs or min(4, os.cpu_count() or 1)
    against = Path(args.against) if args.against else None
    started = time.perf_counter()
    finished: list[FileVerdict] = []  # as they end: what a Ctrl-C keeps
    work_under_way()
    with file_progress(len(files), enabled=not args.json) as progress:

        def done(verdict: FileVerdict) -> None:
            finished.append(verdict)
            progress.done(verdict)

        try:
            verdicts = run_work(
                check_many(
                    files,
                    options,
                    against=against,
                    against_self=args.against_self,
                    on_done=done,
                    on_progress=progress.update,
                )
            )
        except (BadInput, WorkerStartError) as e:  # the evaluator cannot start (e.g. --backend gpu, no GPU)
            raise CommandError(str(e)) from None
        except KeyboardInterrupt:
            verdicts = None
    order = {str(f): i for i, f in enumerate(files)}
    shown = sorted(finished, key=lambda v: order.get(v.file, len(files))) if verdicts is None else verdicts
    totals = summary(shown)
    wall_s = time.perf_counter() - started
    if args.json:
        stopped = {"stopped": True} if verdicts is None else {}
        print(json.dumps({"summary": totals, "wall_s": wall_s, **stopped, "files": [v.to_dict() for v in shown]}))
    elif shown:
        print_check_summary(shown, totals, wall_s)
    if verdicts is None:
        raise CommandError(f"stopped; {len(shown)} of {len(files)} file(s) checked", EXIT_INTERRUPTED)
    return _exit_code(verdicts)


def _exit_code(verdicts: list[FileVerdict]) -> int:
    if all(v.verdict == "pass" for v in verdicts):
        return EXIT_OK
    if all(v.verdict == "bad input" for v in verdicts):
        return EXIT_BAD_INPUT
    if all(v.verdict in ("pass", "not checkable") for v in verdicts):
        return EXIT_NOT_CHECKABLE
    return EXIT_FAIL


def _run_base(args: argparse.Namespace) -> int:
    """Each file against its version at the base (``base_check``)."""
    single = not args.changed and len(args.paths) == 1 and not Path(args.paths[0]).is_dir()
    selection = selected(args.paths, args.base, changed=args.changed)
    if single:
        only_version(selection)
    elif not selection.versions and not args.changed:
        raise CommandError(f"no Triton file in {' '.join(args.paths)}")
    elif not selection.versions:  # nothing changed: all good
        if args.json:
            print(json.dumps({"base": selection.base.to_dict(), "summary": base_check.summary([]), "files": []}))
        else:
            where = f" under {' '.join(args.paths)}" if args.paths else ""
            print(f"no Triton file{where} changed since {selection.base.name}")
        return EXIT_OK
    if args.tests and not single:
        raise CommandError("--tests names the tests of one module: give one file")
    options = module_check.options_of(args)
    options.max_concurrent = args.jobs or (1 if single else min(4, os.cpu_count() or 1))
    started = time.perf_counter()
    finished: list[BaseVerdict] = []
    work_under_way()
    with file_progress(len(selection.versions), enabled=not args.json) as progress:

        def done(verdict: BaseVerdict) -> None:
            finished.append(verdict)
            progress.done(verdict)

        try:
            verdicts = run_work(
                base_check.compare_files(
                    selection.versions,
                    selection.base,
                    options,
                    max_slowdown=args.max_slowdown,
                    on_done=done,
                    on_progress=progress.update,
                    tests=args.tests,
                )
            )
        except (BadInput, WorkerStartError) as e:
            raise CommandError(str(e)) from None
        except KeyboardInterrupt:
            verdicts = None
    order = {str(v.file): i for i, v in enumerate(selection.versions)}
    shown = sorted(finished, key=lambda v: order.get(v.file, len(order))) if verdicts is None else verdicts
    totals = base_check.summary(shown)
    wall_s = time.perf_counter() - started
    if args.json:
        stopped = {"stopped": True} if verdicts is None else {}
        print(json.dumps({"base": selection.base.to_dict(), "summary": totals, "wall_s": wall_s, **stopped,
                          "files": [v.to_dict() for v in shown]}))  # fmt: skip
    elif shown:
        print_base_verdicts(selection.base, shown, totals, wall_s, single=single)
    if verdicts is None:
        raise CommandError(f"stopped; {len(shown)} of {len(selection.versions)} file(s) checked", EXIT_INTERRUPTED)
    return base_check.exit_code(verdicts)
