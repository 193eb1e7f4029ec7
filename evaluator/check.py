"""The correctness cascade: the check job sent to a worker, and the verdict built from what came back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .compare import compare, load_output
from .diagnostics import definition_line, error_diagnostic
from .pool import JobOutcome
from .results import CheckResult, Comparison, Diagnostic, Mismatch, TestOutcome
from .triton_file import Composed, TritonFile

if TYPE_CHECKING:
    from .api import EvalOptions, _ReferenceRun

INTERPRETER_CAVEAT = (
    "checked with Triton's CPU interpreter: a pre-check, not a sign-off (bf16 arithmetic, TF32 rounding of "
    "tl.dot, races and out-of-bounds loads are not modelled; run on a GPU to be sure)"
)


def check_job(
    path: Path,
    module_name: str,
    owner: TritonFile,
    job_dir: Path,
    options: EvalOptions,
    fresh_calls: list[dict[str, Any]] | None,
    fresh: bool = True,
) -> dict[str, Any]:
    """`fresh`: replay the captured calls with fresh inputs (`fresh_calls`, else the run's own captured calls);
    pointless without a reference to compare the results with."""
    return {
        "kind": "check",
        "path": str(path),
        "module_name": module_name,
        "tests": list(owner.tests),
        "wrappers": list(owner.wrappers),
        "outputs_dir": str(job_dir / "outputs"),
        "max_calls": options.max_fresh_calls,
        "fresh": {"seed": options.fresh_seed, "calls": fresh_calls} if options.fresh_inputs and fresh else None,
        "cwd": str(Path(owner.path).resolve().parent) if Path(owner.path).exists() else None,
    }


def reference_problem(outcome: JobOutcome) -> str | None:
    """Why a reference run cannot serve as the reference (None when it passed its tests)."""
    if outcome.status != "ok" or outcome.result is None:
        return f"{outcome.message}\n{outcome.log_tail[-1500:]}".strip()
    result = outcome.result
    if result.get("worker_error"):
        return result["worker_error"]
    if result.get("import_error"):
        return result["import_error"]["message"]
    failed = [t for t in result["tests"] if t["kind"] != "pass"]
    if failed:
        return "; ".join(f"{t['name']}: {t['message']}" for t in failed)
    return None


def verdict(
    outcome: JobOutcome,
    composed: Composed,
    candidate: TritonFile,
    reference: TritonFile | None,
    ref_run: _ReferenceRun | None,
    job_dir: Path,
    options: EvalOptions,
    runtime: dict[str, Any],
    label: str,
) -> CheckResult:
    backend = runtime.get("backend")
    owner = reference or candidate
    base = {
        "backend": backend,
        "file": label,
        "kernels": candidate.kernels,
        "reference": reference.path if reference else None,
        "device": runtime.get("device"),
        "output_tail": outcome.log_tail[-3000:],
        "caveats": (INTERPRETER_CAVEAT,) if backend == "interpreter" else (),
    }

    def diag_at(name: str, message: str) -> Diagnostic:
        line = definition_line(owner, name)
        return Diagnostic(line, 1, "error", message, file=owner.path if reference else label)

    if outcome.status != "ok" or outcome.result is None:
        running = (outcome.last_progress or {}).get("test")
        where = f" in {running}" if running else " while importing the file"
        kind = "timeout" if outcome.status == "timeout" else "crash"
        message = f"{outcome.message}{where}"
        tests = (TestOutcome(running, False, message, kind),) if running else ()
        return CheckResult(
            ok=False,
            stage="call",
            message=message,
            tests=tests,
            diagnostics=(diag_at(running or "", message),),
            **base,
        )
    result = outcome.result
    if result.get("worker_error"):
        return CheckResult(
            ok=False, stage="call", message="internal evaluator error:\n" + result["worker_error"], **base
        )
    if result.get("import_error"):
        error = result["import_error"]
        diag = error_diagnostic(error, composed, candidate, reference, prefix="import failed: ")
        return CheckResult(
            ok=False,
            stage="call",
            message=f"importing the file failed: {error['message']}",
            diagnostics=(diag,),
            **base,
        )

    tests = tuple(
        TestOutcome(
            t["name"],
            t["kind"] == "pass",
            t.get("message", ""),
            t["kind"],
            t.get("duration_s", 0.0),
            t.get("launches", {}),
        )
        for t in result["tests"]
    )
    diagnostics = [
        error_diagnostic(t["error"], composed, candidate, reference)
        if t.get("error")
        else diag_at(t["name"], t["message"])
        for t in result["tests"]
        if t["kind"] != "pass"
    ]
    errors = [t for t in tests if t.kind not in ("pass", "assert")]  # did not run through: call stage
    asserts = [t for t in tests if t.kind == "assert"]  # ran, but a check failed: exec stage
    if errors or asserts:
        stage = "call" if errors else "exec"
        message = _summary(errors or asserts)
        return CheckResult(ok=False, stage=stage, message=message, tests=tests, diagnostics=tuple(diagnostics), **base)

    if ref_run is None:
        silent = [t.name for t in tests if t.name not in candidate.asserting_tests]
        if len(silent) == len(tests):
            note = (
                f"the tests ({', '.join(silent)}) assert nothing: only crashes are caught; "
                "compare the outputs with a reference (--against REF)"
            )
            base["caveats"] = (*base["caveats"], note)
            return CheckResult(ok=True, stage="call", message=f"runs; {note}", tests=tests, **base)
        return CheckResult(ok=True, stage="exec", message=f"{len(tests)} test(s) passed", tests=tests, **base)

    comparison = _compare_with_reference(result, ref_run, job_dir, options)
    if not comparison.ok:
        for m in comparison.mismatches[:8]:
            diagnostics.append(_mismatch_diagnostic(m, owner, candidate, label, reference is not None))
        return CheckResult(
            ok=False,
            stage="exec",
            message=_mismatch_summary(comparison),
            tests=tests,
            diagnostics=tuple(diagnostics),
            comparison=comparison,
            **base,
        )
    message = f"{len(tests)} test(s) passed; outputs match the reference"
    if comparison.fresh_calls:
        message += f" (also on {comparison.fresh_calls} call(s) with fresh random inputs)"
    return CheckResult(ok=True, stage="exec", message=message, tests=tests, comparison=comparison, **base)


def _mismatch_diagnostic(m: Mismatch, owner: TritonFile, candidate: TritonFile, label: str, has_ref: bool):
    """Test mismatches point at the test; fresh-input mismatches at the candidate's wrapper."""
    if m.where.startswith("fresh"):
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


def _summary(failed: list[TestOutcome]) -> str:
    first = failed[0]
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"{first.name} failed: {first.message}{more}"


def _mismatch_summary(comparison: Comparison) -> str:
    first = comparison.mismatches[0]
    more = f" (+{len(comparison.mismatches) - 1} more)" if len(comparison.mismatches) > 1 else ""
    return f"output differs from the reference: {first.where}: {first.message}{more}"


def _compare_with_reference(
    result: dict[str, Any], ref_run: _ReferenceRun, job_dir: Path, options: EvalOptions
) -> Comparison:
    ref_result = ref_run.outcome.result or {}
    ref_dir, cand_dir = ref_run.outputs / "outputs", job_dir / "outputs"
    mismatches: list[Mismatch] = []
    notes: list[str] = []
    compared = 0
    ref_tests = {t["name"]: t for t in ref_result.get("tests", [])}
    for test in result["tests"]:
        ref_test = ref_tests.get(test["name"])
        if ref_test is None or "output_file" not in ref_test or "output_file" not in test:
            continue
        ref_launched = sum(ref_test.get("launches", {}).values())
        if ref_launched and not sum(test.get("launches", {}).values()):
            mismatches.append(
                Mismatch(
                    test["name"],
                    "no Triton kernel was launched (the work ran elsewhere, "
                    "e.g. in PyTorch): the candidate must run its kernels",
                )
            )
        compared += 1
        mismatches += compare(
            load_output(ref_dir / ref_test["output_file"]),
            load_output(cand_dir / test["output_file"]),
            f"{test['name']} → return",
            options.tolerances,
        )
    fresh_done = 0
    ref_fresh = {f["index"]: f for f in ref_result.get("fresh", [])}
    for entry in result.get("fresh", []):
        ref_entry = ref_fresh.get(entry["index"])
        where = f"fresh inputs #{entry['index'] + 1} {entry['signature']}"
        if ref_entry is None or ref_entry.get("status") != "ok":
            if ref_entry is not None and ref_entry.get("message"):
                notes.append(f"{where}: skipped, the reference itself failed on fresh inputs")
            continue
        if entry.get("status") != "ok":
            mismatches.append(Mismatch(where, entry.get("message", "failed")))
            continue
        if sum(ref_entry.get("launches", {}).values()) and not sum(entry.get("launches", {}).values()):
            mismatches.append(Mismatch(where, "no Triton kernel was launched"))
        fresh_done += 1
        mismatches += compare(
            load_output(ref_dir / ref_entry["output_file"]),
            load_output(cand_dir / entry["output_file"]),
            where,
            options.tolerances,
        )
    return Comparison(not mismatches, compared, fresh_done, tuple(mismatches), tuple(notes))
