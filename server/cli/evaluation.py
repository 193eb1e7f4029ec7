"""Command-line options shared by every command that evaluates files (`geak check`, `bench`, `optimize`), and the
run of `check`, `bench` and `bench --profile`."""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from geak.evaluator import (
    BadInput,
    BenchResult,
    CheckResult,
    EvalOptions,
    Evaluator,
    ProfileResult,
    WorkerStartError,
    parse_tolerance_overrides,
)

from ..service import client as service_client
from ..service.protocol import evaluate
from .ctrl_c import run_work, work_under_way
from .exits import CommandError
from .render import one_line, status_reporter

log = logging.getLogger(__name__)


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def whole_number(low: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer of at least `low`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


def tolerance(text: str) -> str:
    """An argparse type: one DTYPE=RTOL,ATOL override, checked by the evaluator's own parser."""
    try:
        parse_tolerance_overrides([text])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The evaluation options. Unset ones are None: `check`/`bench` then use `EvalOptions`' defaults, `optimize`
    its configuration's."""
    group = parser.add_argument_group("evaluation")
    group.add_argument(
        "--backend",
        choices=("auto", "gpu", "interpreter"),
        default="auto",
        help="where kernels run: the GPU if one is visible (auto), or Triton's CPU interpreter",
    )
    group.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="S",
        help="time limit of one run of the file's tests, in seconds (default 300)",
    )
    group.add_argument(
        "--tolerance",
        type=tolerance,
        action="append",
        metavar="DTYPE=RTOL,ATOL",
        help="override the comparison tolerance of a dtype, e.g. float32=1e-4,1e-4 (repeatable)",
    )
    group.add_argument(
        "--no-fresh-inputs",
        action="store_true",
        help="compare only the test's own outputs, not extra calls with fresh random inputs",
    )
    group.add_argument(
        "--fresh-inputs-only",
        action="store_true",
        help="probe the captured calls with fresh random inputs at the tested sizes only, not at other sizes or on "
        "other values (where the reference is not meant to be right there)",
    )
    group.add_argument(
        "--seed",
        type=whole_number(0, "a whole number of at least 0"),
        help=f"seed of Python, NumPy and torch before the import and each test (default {EvalOptions.seed}, "
        "as GEAK-eval)",
    )
    group.add_argument(
        "--rounds",
        type=whole_number(3, "a whole number of at least 3"),
        help="interleaved timing rounds (default: against a reference, until the speedup is decided, 6 to 40; "
        "a file alone, 6)",
    )
    group.add_argument("--gpu", type=whole_number(0, "a GPU index (0, 1, ...)"), metavar="ID", help="GPU index to use")


def max_slowdown(text: str) -> float:
    """An argparse type: a finite factor of at least 1 (1.05: 5% slower)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a slowdown factor of at least 1 (1.05: 5% slower)")
    return value


def add_base_arguments(parser: argparse.ArgumentParser, reference: argparse._MutuallyExclusiveGroup) -> None:
    """`--base REV` (among the command's other references, `reference`) and `--max-slowdown X`."""
    reference.add_argument(
        "--base",
        metavar="REV",
        help="compare with the file as it is at a git revision (HEAD, HEAD~3, a branch, a tag, a commit), as "
        "--against would with that version",
    )
    parser.add_argument(
        "--max-slowdown",
        type=max_slowdown,
        metavar="X",
        help="fail (exit 1) on a significant slowdown against the reference larger than X (1.05: 5%%; GPU only)",
    )


@dataclass(frozen=True)
class EvalFlag:
    """One evaluation option of the command line: the argparse `dest` of its flag, the `EvalOptions` field it sets
    and how its value becomes that field's (an unset flag, None, leaves the field's default)."""

    dest: str
    field: str
    convert: Callable[[Any], Any] = lambda value: value


EVAL_FLAGS = (
    EvalFlag("backend", "backend"),
    EvalFlag("timeout", "timeout_s"),
    EvalFlag("tolerance", "tolerances", parse_tolerance_overrides),
    EvalFlag("no_fresh_inputs", "fresh_inputs", lambda off: False if off else None),
    EvalFlag("fresh_inputs_only", "probe_variants", lambda only: False if only else None),
    EvalFlag("seed", "seed"),
    EvalFlag("rounds", "bench_rounds"),
    EvalFlag("gpu", "gpu_id"),
)
"""The one table between the evaluation flags (``add_eval_arguments``) and `EvalOptions`' fields."""


def options_from_flags(args: argparse.Namespace) -> EvalOptions:
    """The evaluator's options from a command's evaluation flags (``EVAL_FLAGS``); a command runs no spare worker."""
    given = {flag.field: flag.convert(value) for flag in EVAL_FLAGS if (value := getattr(args, flag.dest)) is not None}
    return EvalOptions(spares=0, **{field: value for field, value in given.items() if value is not None})


def add_service_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-service",
        action="store_true",
        help="evaluate in this process, not in the warm evaluator service (also GEAK_SERVICE=0)",
    )


RESULT_TYPES = {"check": CheckResult, "bench": BenchResult, "profile": ProfileResult}


def run_evaluation(
    args: argparse.Namespace, method: str, render, print_json: bool = True
) -> CheckResult | BenchResult | ProfileResult:
    """Run `Evaluator.<method>(args.file, against=args.against)` (`profile`: the file alone) for a CLI command and
    print the result (JSON with `--json`, unless `print_json` is False, else `render`): in the warm evaluator service
    (``service``) where it can be reached or started, else in this process. Returns the result; bad input raises
    `CommandError` (said on stderr, or in the JSON)."""
    options = options_from_flags(args)
    result_type = RESULT_TYPES[method]
    against = None if method == "profile" else args.against

    async def in_process():
        async with Evaluator(options) as evaluator:
            return await evaluate(evaluator, method, args.file, against, report)

    work_under_way()
    try:
        with status_reporter(enabled=not args.json) as report:
            result = None
            if service_client.enabled(getattr(args, "no_service", False)):
                result = _through_service(args, options, method, against, result_type, report)
            if result is None:
                result = run_work(in_process())
    except (BadInput, WorkerStartError, service_client.ServiceError) as e:
        raise CommandError(one_line(str(e)), json=args.json) from None
    if args.json:
        if print_json:
            print(json.dumps(result.to_dict()))
    else:
        render(result)
    return result


def _through_service(
    args: argparse.Namespace, options: EvalOptions, method: str, against: str | None, result_type, report
) -> CheckResult | BenchResult | ProfileResult | None:
    """The result from the warm evaluator service, or None where no service can be reached or started."""
    try:
        found = run_work(service_client.evaluate(method, args.file, against, options, report))
    except service_client.ServiceUnavailable as e:
        if e.unexpected:  # said: a failing service must not go unseen (it hid a bug once)
            log.warning("no warm evaluator service: %s; evaluating in this process", e)
        else:
            log.info("evaluating in this process: %s", e)
        return None
    return result_type.from_dict(found)
