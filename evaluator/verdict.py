"""A check's verdict, from what its job reported: a short chain of steps (``STEPS``), each judging one thing and
deciding the verdict or passing it on to the next. The job's word is checked, never taken: the tests expected are the
trusted side's (``expected_tests``), and the outputs are compared here with the reference's
(``check.compare_with_reference``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from . import cpu_support
from .check import ReferenceRun, compare_with_reference, compile_at_end, output_label
from .error_locations import definition_line, error_diagnostic
from .options import EvalOptions
from .pool import JobOutcome
from .reference_probes import is_probe_where
from .reproduction import unwritten_summary
from .results import FAILED_KINDS, NOT_RUN_KINDS, TEST_KINDS, CheckResult, Comparison, Diagnostic, Mismatch, TestOutcome
from .runtime_facts import RuntimeFacts
from .shared.isolation_policy import PROCESS_ONLY
from .shared.protocol import output_file_of_test
from .shared.test_ids import chosen, test_function
from .triton_file import Composed, TritonFile
from .vendor_code import vendor_caveats

UNPOISONED_CAVEAT = (
    "checked without poisoned allocations: the test fails when memory from torch.empty is filled with NaN / the "
    "largest integer, because it reads memory nothing wrote (its results then depend on leftovers); an output a "
    "kernel never writes is not caught for this file"
)
INTERPRETER_CAVEAT = (
    "checked with Triton's CPU interpreter: a pre-check, not a sign-off (TF32 rounding of tl.dot, races and "
    "out-of-bounds loads are not modelled; run on a GPU to be sure)"
)


def verdict(
    outcome: JobOutcome,
    composed: Composed,
    candidate: TritonFile,
    reference: TritonFile | None,
    ref_run: ReferenceRun | None,
    job_dir: Path,
    options: EvalOptions,
    runtime: RuntimeFacts,
    label: str,
) -> CheckResult:
    """The verdict on one check job of `composed`: the first of ``STEPS`` that decides it."""
    judged = _Judged(outcome, composed, candidate, reference, ref_run, job_dir, options, runtime, label)
    for step in STEPS:
        result = step(judged)
        if result is not None:
            return result
    raise AssertionError("the last step always decides")


@dataclass(frozen=True)
class _Judged:
    """What a verdict is judged from, and the parts every verdict shares."""

    outcome: JobOutcome
    composed: Composed
    candidate: TritonFile
    reference: TritonFile | None
    ref_run: ReferenceRun | None
    job_dir: Path
    options: EvalOptions
    runtime: RuntimeFacts
    label: str

    @property
    def owner(self) -> TritonFile:
        """The file whose tests ran: the reference's, else the candidate's own."""
        return self.reference or self.candidate

    @property
    def interpreted(self) -> bool:
        return self.runtime.backend == "interpreter"

    @property
    def result(self) -> dict[str, Any]:
        return self.outcome.result or {}

    @cached_property
    def base(self) -> dict[str, Any]:
        """The fields every verdict on this job carries."""
        backend = self.runtime.backend
        return {
            "backend": backend,
            "file": self.label,
            "kernels": self.candidate.kernels,
            "reference": self.reference.path if self.reference else None,
            "device": self.runtime.device,
            "output_tail": self.outcome.log_tail[-3000:],
            "caveats": (
                *((INTERPRETER_CAVEAT,) if backend == "interpreter" else ()),
                *vendor_caveats(self.candidate.kernel_section, backend),
                *isolation_caveats(self.runtime),
                *unwritten_caveats(self.ref_run),
            ),
            "isolation": self.runtime.isolation,
        }

    @cached_property
    def reported(self) -> list[dict[str, Any]]:
        """What the job reported of each test expected (``expected_tests``)."""
        return [_raised_is_not_run(t, self.owner) for t in expected_tests(self.result, self.owner, self.ref_run)]

    @cached_property
    def tests(self) -> tuple[TestOutcome, ...]:
        return tuple(
            TestOutcome(
                t["name"],
                t["kind"] not in FAILED_KINDS,
                t.get("message", ""),
                t["kind"],
                t.get("duration_s", 0.0),
                t.get("launches", {}),
            )
            for t in self.reported
        )

    @cached_property
    def test_diagnostics(self) -> tuple[Diagnostic, ...]:
        """A diagnostic for each failed test: at the error's line where it raised, else at the test."""
        return tuple(
            error_diagnostic(t["error"], self.composed, self.candidate, self.reference)
            if t.get("error")
            else self.diagnostic_at(t["name"], t["message"])
            for t in self.reported
            if t["kind"] in FAILED_KINDS
        )

    def diagnostic_at(self, name: str, message: str) -> Diagnostic:
        """An error at the definition of `name` in the file whose tests ran."""
        line = definition_line(self.owner, name)
        return Diagnostic(line, 1, "error", message, file=self.owner.path if self.reference else self.label)

    def failed(self, stage: str, message: str, **fields: Any) -> CheckResult:
        return CheckResult(ok=False, stage=stage, message=message, **fields, **self.base)

    def not_checkable(self, reason: str, diagnostic: Diagnostic, tests: tuple[TestOutcome, ...] = ()) -> CheckResult:
        """The interpreter's limit, not the kernel's fault: neither passed nor failed (``cpu_support``)."""
        message = f"{cpu_support.NOT_CHECKABLE}: {reason}"
        info = replace(diagnostic, severity="information", message=message)
        return self.failed("call", message, tests=tests, diagnostics=(info,), not_checkable=reason)


# ------------------------------------------------------------------------------------------ the steps


def _did_not_finish(j: _Judged) -> CheckResult | None:
    """The job timed out, crashed or ended without a result: a failure at the test it was running (on the
    interpreter, a timeout may be its limit: too slow, or programs that wait for each other)."""
    outcome = j.outcome
    if outcome.status == "ok" and outcome.result is not None:
        return None
    running = (outcome.last_progress or {}).get("test")
    where = f" in {running}" if running else " while importing the file"
    if running and outcome.message.startswith(f"hung: {running}"):  # the pool's words name it already
        where = ""
    kind = "timeout" if outcome.status == "timeout" else "crash"
    message = f"{outcome.message}{where}" + (compile_at_end(outcome.last_progress) if kind == "timeout" else "")
    if j.interpreted and kind == "crash":
        message = cpu_support.crash_hint(message)
    tests = (TestOutcome(running, False, message, kind),) if running else ()
    if j.interpreted and kind == "timeout":
        reason = cpu_support.spin_wait(j.composed.text) or cpu_support.slow_or_hung(
            outcome.last_progress, time.time(), j.options.timeout_s
        )
        if reason:
            return j.not_checkable(reason, j.diagnostic_at(running or "", message), tests)
    return j.failed("call", message, tests=tests, diagnostics=(j.diagnostic_at(running or "", message),))


def _worker_error(j: _Judged) -> CheckResult | None:
    """The job's own code failed (not the user's): an internal error, never a verdict on the kernel."""
    if not j.result.get("worker_error"):
        return None
    return j.failed("call", "internal evaluator error:\n" + j.result["worker_error"])


def _import_failed(j: _Judged) -> CheckResult | None:
    """The composed file did not import: a failure at the line that raised (or the interpreter's limit)."""
    error = j.result.get("import_error")
    if not error:
        return None
    diagnostic = error_diagnostic(error, j.composed, j.candidate, j.reference, prefix="import failed: ")
    reason = cpu_support.limit_in_error(error["message"], j.runtime.triton_version) if j.interpreted else None
    if reason:
        return j.not_checkable(reason, diagnostic)
    return j.failed("call", f"importing the file failed: {error['message']}", diagnostics=(diagnostic,))


def _tests_failed(j: _Judged) -> CheckResult | None:
    """A test did not run through (the call stage) or ran and failed a check (the exec stage); on the interpreter,
    errors that are all its limits make the file not checkable."""
    errors = [t for t in j.tests if t.kind in FAILED_KINDS - {"assert"}]
    asserts = [t for t in j.tests if t.kind == "assert"]
    if j.interpreted and errors and not asserts:
        limits = [cpu_support.limit_in_error(t.message, j.runtime.triton_version) for t in errors]
        if all(limits):
            return j.not_checkable(limits[0], j.test_diagnostics[0], j.tests)
    if not errors and not asserts:
        return None
    stage = "call" if errors else "exec"
    return j.failed(stage, _summary(errors or asserts), tests=j.tests, diagnostics=j.test_diagnostics)


def _no_test_ran(j: _Judged) -> CheckResult | None:
    """Every test was skipped (or none was found): nothing was checked, which is not a pass."""
    if any(t.kind not in NOT_RUN_KINDS for t in j.tests):
        return None
    message = f"no test ran: {_summary(list(j.tests))}" if j.tests else "no test ran"
    return j.failed("call", message, tests=j.tests)


def _passed_alone(j: _Judged) -> CheckResult | None:
    """A file checked by its own tests: it passes; where none of them asserts anything, it only runs."""
    if j.ref_run is not None:
        return None
    tests_ran = [t for t in j.tests if t.kind not in NOT_RUN_KINDS]
    functions = list(dict.fromkeys(test_function(t.name) for t in tests_ran))
    silent = [f for f in functions if f not in j.candidate.asserting_tests]
    if len(silent) == len(functions):
        note = (
            f"the tests ({', '.join(silent)}) assert nothing: only crashes are caught; "
            "compare the outputs with a reference (--against REF)"
        )
        base = {**j.base, "caveats": (*j.base["caveats"], note)}
        return CheckResult(ok=True, stage="call", message=f"runs; {note}", tests=j.tests, **base)
    return CheckResult(ok=True, stage="exec", message=f"{_passed(j.tests)} passed", tests=j.tests, **j.base)


def _compared_with_reference(j: _Judged) -> CheckResult:
    """A candidate's tests passed: its outputs, on the tests' inputs and on the probes, must match the reference's."""
    assert j.ref_run is not None
    comparison = compare_with_reference(j.reported, j.result, j.ref_run, j.job_dir, j.options)
    if not comparison.ok:
        located = tuple(
            _mismatch_diagnostic(m, j.owner, j.candidate, j.label, j.reference is not None)
            for m in comparison.mismatches[:8]
        )
        return j.failed(
            "exec",
            _mismatch_summary(comparison),
            tests=j.tests,
            diagnostics=(*j.test_diagnostics, *located),
            comparison=comparison,
        )
    message = passed_words(j.tests, comparison)
    return CheckResult(ok=True, stage="exec", message=message, tests=j.tests, comparison=comparison, **j.base)


def passed_words(tests: tuple[TestOutcome, ...], comparison: Comparison | None = None) -> str:
    """A pass said: `3 test(s) passed`, against a reference with what its outputs were compared on."""
    message = f"{_passed(tests)} passed"
    if comparison is None:
        return message
    message += "; outputs match the reference"
    probed = [
        f"{n} {words}"
        for n, words in (
            (comparison.fresh_calls, "call(s) with fresh random inputs"),
            (comparison.shape_calls, "at other sizes"),
            (comparison.value_calls, "on other values"),
        )
        if n
    ]
    if probed:
        message += f" (also on {', '.join(probed)})"
    if comparison.probes_skipped:
        message += f"; {comparison.probes_skipped} probe(s) skipped (see the notes)"
    return message


STEPS: tuple[Callable[[_Judged], CheckResult | None], ...] = (
    _did_not_finish,
    _worker_error,
    _import_failed,
    _tests_failed,
    _no_test_ran,
    _passed_alone,
    _compared_with_reference,
)


# ------------------------------------------------------------------------------------------ caveats


def isolation_caveats(runtime: RuntimeFacts) -> tuple[str, ...]:
    """The verdict's word on a job that ran without namespaces of its own (see ``isolation.py``)."""
    if runtime.isolation != PROCESS_ONLY:
        return ()
    why = runtime.isolation_reason or "no namespaces"
    return (
        f"isolation: {PROCESS_ONLY} ({why}): the code ran as the caller's user, with the caller's files, "
        "processes and network in reach (the environment was still reduced)",
    )


def unwritten_caveats(ref_run: ReferenceRun | None) -> tuple[str, ...]:
    """The verdict's word on what the reference never writes (``reproduction``): it is not compared."""
    if ref_run is None:
        return ()
    places = []
    for test in (ref_run.outcome.result or {}).get("tests", []):
        masks = ref_run.unwritten.get(output_file_of_test(test["name"]), {})
        if masks:
            where = f"{test['name']} → {output_label(ref_run.tfile, test['name'])}"
            places.append(f"{', '.join(where + path for path in masks)} ({unwritten_summary(masks)})")
    probes = len(ref_run.probes.unwritten) if ref_run.probes is not None else 0
    if not places and not probes:
        return ()
    shown = "; ".join(places[:4]) + ("; ..." if len(places) > 4 else "")
    on_probes = f"{'; also' if places else ''} on {probes} probe(s)" if probes else ""
    return (
        f"the reference leaves part of its outputs unwritten ({shown}{on_probes}): what it never writes is "
        "undefined, so it is not compared",
    )


# ------------------------------------------------------------------------------------------ the tests and the words


def expected_tests(result: dict[str, Any], owner: TritonFile, ref_run: ReferenceRun | None) -> list[dict[str, Any]]:
    """The tests the trusted side expects (the reference run's, else the file's), each with what the job reported
    for it; a test the job did not report, or reported in a malformed way, is an error."""
    by_name = {
        t.get("name"): t
        for t in result.get("tests") or []
        if isinstance(t, dict) and t.get("kind") in TEST_KINDS and isinstance(t.get("message", ""), str)
    }
    if ref_run is not None:
        expected = [t["name"] for t in (ref_run.outcome.result or {}).get("tests", [])]
    elif owner.test_style == "pytest":  # the cases pytest collected from the file's own tests (and its errors)
        functions = set(owner.tests) | set(owner.benches)
        expected = [n for n, t in by_name.items() if chosen(str(n), functions) or t["kind"] == "error"]
        expected += [f for f in owner.tests if not any(chosen(str(n), (f,)) for n in expected)]
    else:
        expected = list(owner.tests)
    out = []
    for name in expected:
        entry = by_name.get(name)
        if entry is None:
            entry = {"name": name, "kind": "error", "message": "the test reported no result"}
        elif not isinstance(entry.get("launches", {}), dict):
            entry = {**entry, "launches": {}}
        out.append(entry)
    return out


def _raised_is_not_run(entry: dict[str, Any], owner: TritonFile) -> dict[str, Any]:
    """GEAK-eval's call accuracy for TritonBench-format files, whose tests return their outputs and check nothing:
    any exception the composed file raises, an `AssertionError` in the kernel code's wrapper included, means it did
    not run (an error at the call stage), not that it ran and computed a wrong result."""
    if owner.format == "tritonbench" and owner.test_style == "call" and entry.get("kind") == "assert":
        return {**entry, "kind": "error"}
    return entry


def _mismatch_diagnostic(m: Mismatch, owner: TritonFile, candidate: TritonFile, label: str, has_ref: bool):
    """Test mismatches point at the test; fresh-input mismatches at the candidate's wrapper."""
    if is_probe_where(m.where):
        wrapper = m.where.split(" ", 3)[-1].split("(", 1)[0]
        return Diagnostic(definition_line(candidate, wrapper), 1, "error", f"{m.where}: {m.message}", file=label)
    test = m.where.split(" ", 1)[0]
    return Diagnostic(
        definition_line(owner, test),
        1,
        "error",
        f"{m.where}: {m.message}",
        file=owner.path if has_ref else label,
    )


def _passed(tests: tuple[TestOutcome, ...]) -> str:
    """`3 test(s)`, with what did not run: `3 test(s) (2 skipped, 21 benchmark(s) left to geak bench)`."""
    text = f"{sum(t.kind not in NOT_RUN_KINDS for t in tests)} test(s)"
    words = {"skipped": "{} skipped", "xfail": "{} xfail", "benchmark": "{} benchmark(s) left to geak bench",
             "left out": "{} left out"}  # fmt: skip
    counts = {kind: sum(t.kind == kind for t in tests) for kind in words}
    extra = [words[k].format(n) for k, n in counts.items() if n]
    return text + (f" ({', '.join(extra)})" if extra else "")


def _summary(failed: list[TestOutcome]) -> str:
    first = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.name} failed: {first.message}{more}"


def _mismatch_summary(comparison: Comparison) -> str:
    first = comparison.mismatches[0]
    more = f" (+{len(comparison.mismatches) - 1} more)" if len(comparison.mismatches) > 1 else ""
    return f"output differs from the reference: {first.where}: {first.message}{more}"
