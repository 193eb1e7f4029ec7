"""Command-line options shared by every command that evaluates files (`geak check`, `bench`, `optimize`), and the
run of `check`, `bench` and `bench --profile`."""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Callable
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


EVAL_ARGUMENTS = ("backend", "timeout", "tolerance", "no_fresh_inputs", "fresh_inputs_only", "seed", "rounds", "gpu")
"""What `eval_options` reads of a command's arguments: all that a command sends the evaluator service."""


def eval_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The evaluation arguments of a command (`EVAL_ARGUMENTS`), as the service is sent them."""
    return {name: getattr(args, name) for name in EVAL_ARGUMENTS}


def eval_options(args: argparse.Namespace) -> EvalOptions:
    """The evaluator's options from a command's arguments (only those named in `EVAL_ARGUMENTS`)."""
    a = eval_arguments(args)
    given = {
        "timeout_s": a["timeout"],
        "tolerances": parse_tolerance_overrides(a["tolerance"]) if a["tolerance"] else None,
        "bench_rounds": a["rounds"],
        "gpu_id": a["gpu"],
        "seed": a["seed"],
    }
    return EvalOptions(
        fresh_inputs=not a["no_fresh_inputs"],
        probe_variants=not a["fresh_inputs_only"],
        backend=a["backend"],
        spares=0,
        **{k: v for k, v in given.items() if v is not None},
    )


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
    options = eval_options(args)
    result_type = RESULT_TYPES[method]
    against = None if method == "profile" else args.against

    async def in_process():
        async with Evaluator(options) as evaluator:
            return await evaluate_with(evaluator, method, args.file, against, report)

    work_under_way()
    try:
        with status_reporter(enabled=not args.json) as report:
            result = None
            if service_client.enabled(getattr(args, "no_service", False)):
                result = _through_service(args, method, against, result_type, report)
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


async def evaluate_with(evaluator: Evaluator, method: str, file: str, against: str | None, progress):
    """`Evaluator.<method>` of a request ("check", "bench", or "profile", which takes no reference)."""
    if method == "profile":
        return await evaluator.profile(file, progress=progress)
    return await getattr(evaluator, method)(file, against=against, progress=progress)


def _through_service(
    args: argparse.Namespace, method: str, against: str | None, result_type, report
) -> CheckResult | BenchResult | ProfileResult | None:
    """The result from the warm evaluator service, or None where no service can be reached or started."""
    try:
        found = run_work(service_client.evaluate(method, args.file, against, eval_arguments(args), report))
    except service_client.ServiceUnavailable as e:
        if e.unexpected:  # said: a failing service must not go unseen (it hid a bug once)
            log.warning("no warm evaluator service: %s; evaluating in this process", e)
        else:
            log.info("evaluating in this process: %s", e)
        return None
    return result_type.from_dict(found)
