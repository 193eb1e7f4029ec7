"""The screening stage on the caller's side: the screening job it sends, and the verdict it builds from what came back.

The job's word is taken for nothing a verdict rests on: each variant's outputs are compared here with the reference's
(``compare``; calls whose output the reference itself does not reproduce are left to the full check), and its short
timings only rank the variants for the full check and paired bench that alone may claim a speedup. What the job
names bit for bit the reference's first output (``identical``: not saved again, as an argument a call only read is
only marked) is taken as it says: like its timings, a lie there could only send a wrong variant to the full check,
which compares every output itself.
"""

from __future__ import annotations

import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import slowness
from .compare import UnreadableOutput, compare, load_output, output_size, side_by_side
from .pool import JobOutcome
from .results import Peaks, ScreenedVariant, ScreenResult
from .runtime_facts import RuntimeFacts
from .shared.protocol import ScreenJob, screen_output_file
from .shared.screening import ScreenPlan
from .triton_file import TritonFile

if TYPE_CHECKING:
    from .options import EvalOptions

STATUSES = frozenset({"ok", "wrong", "failed", "skipped", "same", "not run", "not timed"})


def screen_job(
    modules: list[dict[str, Any]],
    owner: TritonFile,
    options: EvalOptions,
    outputs_dir: Path,
    plan: ScreenPlan,
    cache: dict[str, Any] | None,
    timed: bool,
) -> dict[str, Any]:
    """`modules`: the reference's first, then the variants'. The calls screened are those the bench times where a GPU
    times them (`timed`), else the tests' (Triton's interpreter is too slow for benchmark sizes)."""
    functions = owner.timed_functions if timed else list(owner.tests)
    return asdict(
        ScreenJob(
            kind="screen",
            scratch=str(outputs_dir.parent),
            modules=modules,
            functions=functions,
            pytest_functions=owner.under_pytest(functions),
            seed=options.seed,
            max_calls=options.max_bench_calls,
            outputs_dir=str(outputs_dir),
            plan=plan.to_dict(),
            cache=cache,
        )
    )


def screen_result(
    outcome: JobOutcome,
    labels: list[str],
    outputs_dir: Path,
    runtime: RuntimeFacts,
    peaks: Peaks | None,
    options: EvalOptions,
) -> ScreenResult:
    """The verdict on each variant (`labels`, in order) from the job's report and the outputs it saved."""
    base = {"backend": runtime.backend, "device": runtime.device}
    if outcome.status != "ok" or outcome.result is None:
        where = (outcome.last_progress or {}).get("screen", "")
        return ScreenResult(False, f"{outcome.message} {where}".strip(), timed=False, **base)
    result = outcome.result
    if result.get("worker_error") or result.get("error"):
        message = result.get("error") or "internal evaluator error:\n" + result["worker_error"]
        detail = result.get("error_detail")
        return ScreenResult(False, message + (f": {detail['message']}" if detail else ""), timed=False, **base)
    try:
        return _verdict(result, labels, outputs_dir, runtime, peaks, options, base)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:  # a malformed (forged?) report
        return ScreenResult(False, f"the screening job's report is malformed ({e!r})", timed=False, **base)


def _verdict(
    result: dict[str, Any],
    labels: list[str],
    outputs_dir: Path,
    runtime: RuntimeFacts,
    peaks: Peaks | None,
    options: EvalOptions,
    base: dict[str, Any],
) -> ScreenResult:
    limits = {k: int(v) for k, v in (result.get("device_limits") or {}).items() if isinstance(v, int)}
    calls = result["calls"]
    n_calls = len(calls)
    reference = result["reference"]
    timing = result.get("timing") or {}
    timed = bool(timing.get("timed"))
    reference_ms = _median(reference.get("samples")) if timed else None
    reports = {
        label: result["variants"].get(label) or {"status": "not run", "message": "the job did not report it"}
        for label in labels
    }
    identical = {
        label: _identical_calls(report, n_calls)
        for label, report in reports.items()
        if _status(report) in ("ok", "same", "wrong")
    }
    unstable, mismatches = _compared(identical, _identical_calls(reference, n_calls), n_calls, outputs_dir, options)
    variants = [
        _variant(label, reports[label], mismatches.get(label), limits, timed, reference.get("samples") or [])
        for label in labels
    ]
    costs = tuple(
        slowness.call_cost(
            str(c["signature"]),
            int(c.get("bytes") or 0),
            int(c["flops"]) if c.get("flops") else None,
            c.get("flops_from"),
            _call_ms(reference_ms, calls, i, timing),
            peaks,
        )
        for i, c in enumerate(calls)
    )
    correct = sum(v.correct for v in variants)
    message = f"{len(variants)} variant(s) screened on {n_calls} call(s): {correct} correct"
    if unstable:
        message += f" ({len(unstable)} call(s) whose outputs the reference does not reproduce were left to the check)"
    if not timed:
        message += f"; not timed: {timing.get('why') or 'no timing'}"
    alike = [int(i) + 1 for i in timing.get("flushed_alike") or ()]
    if timed and alike:
        message += (f"; call(s) {', '.join(map(str, alike))} timed with the L2 flushed for every variant (a variant's "
                    "refused the graph capture the others took)")  # fmt: skip
    compile_note = _compile_note(result.get("compile") or {})
    return ScreenResult(
        True,
        message,
        timed=timed,
        reference_ms=reference_ms,
        variants=tuple(variants),
        reference_kernels=tuple(slowness.kernel_facts(k, limits) for k in reference.get("kernels") or ()),
        calls=costs,
        compile_note=compile_note,
        duration_s=float(result.get("seconds") or 0.0),
        **base,
    )


def _status(report: dict[str, Any]) -> str:
    status = str(report.get("status"))
    return status if status in STATUSES else "failed"


def _variant(
    label: str,
    report: dict[str, Any],
    mismatch: str | None,
    limits: dict[str, int],
    timed: bool,
    reference_samples: list[Any],
) -> ScreenedVariant:
    """The verdict on one variant; `mismatch`: why its outputs differ from the reference's (``_compared``)."""
    status = _status(report)
    message = str(report.get("message") or "")[:2000]
    kernels = tuple(slowness.kernel_facts(k, limits) for k in report.get("kernels") or ())
    if status in ("ok", "same", "wrong"):
        if mismatch is None and status == "wrong":
            status, message = "ok", "matches the reference (not timed: the job's rough check disagreed)"
        elif mismatch is not None:
            status, message = "wrong", mismatch
    samples = report.get("samples") or []
    screen_ms = _median(samples) if timed and status == "ok" else None
    # the reference races in every rung, so its first samples are the ones taken beside this variant's
    baseline_ms = _median(reference_samples[: len(samples)]) if screen_ms is not None else None
    return ScreenedVariant(label, status, message, screen_ms, int(report.get("rung") or 0), kernels, baseline_ms)


def _compared(
    identical: dict[str, set[int]], reproduced: set[int], n_calls: int, outputs_dir: Path, options: EvalOptions
) -> tuple[set[int], dict[str, str | None]]:
    """(The calls whose output the reference's second run did not reproduce (atomics, nondeterministic reductions;
    the `reproduced` ones, the job says, it did bit for bit), left to the full check for every variant; why each
    variant's outputs differ from the reference's on the other calls but its `identical` ones, None where they
    match.) Call by call, the reference's output read once for its own second run and all the variants still
    matching, theirs compared beside each other (``_differing``), rather than one variant after the other, each
    reading the reference's large outputs again."""
    unstable: set[int] = set()
    found: dict[str, str | None] = dict.fromkeys(identical)
    for i in range(n_calls):
        pending = [label for label, same in identical.items() if found[label] is None and i not in same]
        if i in reproduced and not pending:
            continue
        try:
            ref = load_output(outputs_dir / screen_output_file("reference", i))
        except UnreadableOutput as e:
            if i in reproduced:
                found.update(dict.fromkeys(pending, f"call {i + 1}: {e}"))
            else:
                unstable.add(i)
            continue
        if i not in reproduced and not _reproduces(ref, i, outputs_dir, options):
            unstable.add(i)
        elif pending:
            found.update(_differing(ref, i, pending, outputs_dir, options))
    return unstable, found


def _reproduces(ref: Any, i: int, outputs_dir: Path, options: EvalOptions) -> bool:
    """Whether the reference's second run of call `i` gave its first output again."""
    try:
        again = load_output(outputs_dir / screen_output_file("reference", i, "again"))
    except UnreadableOutput:
        return False
    return not compare(ref, again, "", options.tolerances)


def _differing(ref: Any, i: int, labels: list[str], outputs_dir: Path, options: EvalOptions) -> dict[str, str | None]:
    """Why each of `labels`' output of call `i` differs from `ref` (None where it matches), several compared at once
    (``side_by_side``)."""
    largest = max(output_size(outputs_dir / screen_output_file(label, i)) for label in [*labels, "reference"])

    def differs(label: str) -> str | None:
        try:
            cand = load_output(outputs_dir / screen_output_file(label, i))
        except UnreadableOutput as e:
            return f"call {i + 1}: {e}"
        said = compare(ref, cand, f"call {i + 1}", options.tolerances)
        more = f" (and {len(said) - 1} more)" if len(said) > 1 else ""
        return f"{said[0].where}: {said[0].message}{more}" if said else None

    with ThreadPoolExecutor(side_by_side(largest)) as pool:
        return dict(zip(labels, pool.map(differs, labels), strict=True))


def _identical_calls(report: dict[str, Any], n_calls: int) -> set[int]:
    """The calls whose output the job names bit for bit the reference's first (ValueError for what names no call)."""
    calls = {int(i) for i in report.get("identical") or ()}
    if any(not 0 <= i < n_calls for i in calls):
        raise ValueError(f"identical outputs of calls {sorted(calls)} of {n_calls}")
    return calls


def _median(samples: Any) -> float | None:
    values = [float(s) for s in samples or () if isinstance(s, (int, float)) and s > 0]
    return statistics.median(values) if values else None


def _call_ms(reference_ms: float | None, calls: list[dict[str, Any]], i: int, timing: dict[str, Any]) -> float | None:
    """One call's share of the reference's screen time, by its estimate (the job times the calls together)."""
    estimates = timing.get("estimates_ms") or []
    if reference_ms is None or len(estimates) != len(calls) or not sum(estimates):
        return None
    return reference_ms * float(estimates[i]) / float(sum(estimates))


def _compile_note(report: dict[str, Any]) -> str:
    if report.get("mode") == "processes":
        seconds = float(report.get("seconds", 0))
        note = (f"compiled {report.get('compiled')} of {report.get('variants')} in parallel in {report.get('workers')} "
                f"processes in {seconds:.1f} s")  # fmt: skip
        failed = int(report.get("failed_compiles") or 0)
        return note + (f" ({failed} compile(s) failed there: tried again at the variant's run)" if failed else "")
    if report.get("mode") == "serial":
        return f"compiled one by one ({report.get('why', '')})"
    return ""


def best_first(result: ScreenResult) -> list[ScreenedVariant]:
    """The correct, timed variants, fastest in screening first."""
    timed = [v for v in result.variants if v.status == "ok" and v.screen_ms is not None]
    return sorted(timed, key=lambda v: (-v.rung, v.screen_ms))
