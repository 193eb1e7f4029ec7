"""The perf stage: the bench job, and the verdict built from its samples (rates, % of peak, the speedup and its
noise floor), after the timing rules of ``timing_rules`` have accepted the timing."""

from __future__ import annotations

import statistics
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import timing_rules as rules
from .check import limited
from .pool import JobOutcome
from .results import BenchResult, CallTiming, CheckResult, Diagnostic, Peaks
from .runtime_facts import RuntimeFacts
from .shared.protocol import BenchJob
from .shared.sequential import MIN_ROUNDS, RoundPlan, futile, stopped_where_the_rule_says
from .slowness import kernel_facts
from .speedup import crossed, speedup_interval
from .triton_file import TritonFile

BUSY_LAG_MS = 0.5  # an empty kernel waiting this long: another process holds the device (``timing.BUSY_GRACE_MS``)
NOISY_SPREAD_PCT = 10.0  # a call whose interquartile range of samples is this wide (% of its median) is noisy

if TYPE_CHECKING:
    from .compare import Tolerance
    from .options import EvalOptions


def round_plan(options: EvalOptions, rounds: int | None, against: bool, margin: float) -> RoundPlan:
    """The rounds of a timing: `rounds` (or the options' `bench_rounds`) exactly when given; else, against a
    reference, sequential until the speedup is decided (at most `max_bench_rounds`, and the rounds of `max_rounds_s`
    seconds); a file alone, the minimum."""
    fixed = rounds or options.bench_rounds
    if fixed:
        return RoundPlan.fixed(fixed, margin)
    if not against:
        return RoundPlan.fixed(MIN_ROUNDS, margin)
    most = max(MIN_ROUNDS, options.max_bench_rounds + options.max_bench_rounds % 2)
    return RoundPlan(MIN_ROUNDS, most, margin, options.max_rounds_s)


def module_spec(label: str, path: Path, module_name: str, owner: TritonFile, options: EvalOptions) -> dict[str, Any]:
    """One module of a bench, screen or profile job: the variant's file and what to record of it; for a
    repository's module, where the repository lies and the check's limits on its tests (``check.limited``)."""
    spec = {
        "label": label,
        "path": str(path),
        "module_name": module_name,
        "wrappers": list(owner.entry_points),
        "kernels": [k.name for k in owner.kernels],
    }
    if owner.repository is not None:
        spec["repository"] = limited(owner.repository, options)
    return spec


def bench_job(
    modules: list[dict[str, Any]],
    owner: TritonFile,
    options: EvalOptions,
    outputs_dir: Path,
    plan: RoundPlan,
    input_seed: int = 0,
    cache: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`outputs_dir`: inside the job's directory (its modules are there), the only one the job may write to.
    `cache`: the trusted compile cache to start from (``protocol.cache_request``)."""
    functions = owner.timed_functions
    return asdict(
        BenchJob(
            kind="bench",
            scratch=str(outputs_dir.parent),
            modules=modules,
            functions=functions,
            pytest_functions=owner.under_pytest(functions),
            rounds=asdict(plan),
            seed=options.seed,
            rep_ms=options.rep_ms,
            max_calls=options.max_bench_calls,
            profile=options.profile_kernels,
            outputs_dir=str(outputs_dir),
            input_seed=input_seed,
            cache=cache,
        )
    )


def bench_result(
    outcome: JobOutcome,
    label: str,
    reference: TritonFile | None,
    check: CheckResult | None,
    runtime: RuntimeFacts,
    peaks: Peaks,
    outputs_dir: Path,
    window_s: float | None,
    plan: RoundPlan,
    tolerances: dict[str, Tolerance] | None = None,
) -> BenchResult:
    base = {
        "backend": runtime.backend,
        "file": label,
        "check": check,
        "device": runtime.device,
        "reference": reference.path if reference else None,
        "peaks": peaks,
        "isolation": runtime.isolation,
        "alone_s": outcome.alone_s,
    }
    if outcome.status != "ok" or outcome.result is None:
        where = (outcome.last_progress or {}).get("bench", "")
        return BenchResult(ok=False, stage="perf", message=f"{outcome.message} {where}".strip(), **base)
    result = outcome.result
    if result.get("worker_error") or result.get("error"):
        message = result.get("error") or "internal evaluator error:\n" + result["worker_error"]
        detail = result.get("error_detail")
        if detail:
            message += f": {detail['message']}"
        return BenchResult(ok=False, stage="perf", message=message, **base)
    try:
        phases_s = {str(k): float(v) for k, v in (result.get("phases_s") or {}).items()}
        helpers = tuple(str(h) for h in result.get("helpers") or ())
        limits = {k: v for k, v in (result.get("device_limits") or {}).items() if isinstance(v, int)}
        timings = {who: tuple(_call_timing(c, peaks, limits) for c in calls) for who, calls in result["calls"].items()}
        problems, notes = timing_problems(result, timings, peaks, outputs_dir, window_s, tolerances)
        speedup = None
        if "reference" in timings:  # from the very samples the rules above believed
            rounds = {who: _rounds(result["calls"][who]) for who in ("reference", "candidate")}
            plan = plan.for_calls([_planned_call(c) for c in result["calls"]["reference"]])
            timed_out = result.get("rounds_timed_out") is True
            off_plan = stopped_where_the_rule_says(rounds["reference"], rounds["candidate"], plan, timed_out)
            if off_plan:
                problems.append(f"the timing job did not follow its stopping rule ({off_plan}): its report is not "
                                "believed")  # fmt: skip
            if not problems:
                why = why_wide(result, timings, peaks)
                stopped = None
                if timed_out:
                    stopped = f"its rounds took the timing's limit of {plan.max_s:g} s"
                elif futile(rounds["reference"], rounds["candidate"], plan):
                    stopped = f"its rounds vary too much for {plan.max_rounds} rounds to decide it"
                if stopped:
                    why = f"{stopped}; {why}" if why else stopped
                speedup = speedup_interval(rounds["reference"], rounds["candidate"], plan, why)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:  # a malformed (forged?) result
        return BenchResult(ok=False, stage="perf", message=f"the timing job's report is malformed ({e!r})", **base)
    if problems:
        message = "timing rejected: " + problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
        return BenchResult(
            ok=False,
            stage="perf",
            message=message,
            diagnostics=tuple(Diagnostic(1, 1, "error", p, file=label) for p in problems),
            **base,
        )
    calls = timings["candidate"]
    kernel_ms: dict[str, float] = {}
    for t in calls:
        for name, ms in t.kernel_ms.items():
            kernel_ms[name] = kernel_ms.get(name, 0.0) + ms
    message = f"{len(calls)} call(s) timed: {sum(t.median_ms for t in calls):.4f} ms in all"
    if speedup is not None:
        message += f"; speedup {speedup.ratio:.3f}x [{speedup.low:.3f}, {speedup.high:.3f}] ({speedup.verdict})"
    if helpers:
        message += f"; not timed: {_helpers_text(helpers)}"
    if notes:
        message += "; " + "; ".join(notes)
    if outcome.ran_again:
        message += f"; timed once more, once the jobs sharing the GPU had ended ({outcome.ran_again})"
    return BenchResult(
        ok=True,
        stage="perf",
        message=message,
        calls=calls,
        reference_calls=timings.get("reference", ()),
        kernel_ms=kernel_ms,
        speedup=speedup,
        phases_s=phases_s,
        helpers=helpers,
        **base,
    )


def _helpers_text(helpers: tuple[str, ...]) -> str:
    """The captured calls a timing left out, as a bench message names them."""
    names = ", ".join(dict.fromkeys(h.split("(", 1)[0] for h in helpers))
    return f"{len(helpers)} call(s) of {names}, which launch no Triton kernel"


def timing_problems(
    result: dict[str, Any],
    timings: dict[str, tuple[CallTiming, ...]],
    peaks: Peaks,
    outputs_dir: Path,
    window_s: float | None,
    tolerances: dict[str, Tolerance] | None = None,
) -> tuple[list[str], list[str]]:
    """Every reason not to believe the job's timings (`timing_rules`), and notes on what could not be checked."""
    problems: list[str] = []
    notes: list[str] = []
    entries = result["calls"]
    references = entries.get("reference")
    for i, entry in enumerate(entries["candidate"]):
        problem = rules.launch_problem("candidate", entry, references[i] if references else None)
        if problem:
            problems.append(problem)
    if references:
        for i, cand in enumerate(entries["candidate"]):
            found, skipped = rules.output_problems(
                cand["signature"],
                i,
                cand.get("input_sets", 1),
                outputs_dir,
                cand.get("timed_calls", 0),
                tolerances,
                int(references[i].get("certain_bytes") or 0),
            )
            problems += found
            notes += skipped
    for who, calls in timings.items():
        for t, entry in zip(calls, entries[who], strict=True):
            problem = rules.impossible_speed(who, entry, t.median_ms, peaks)
            if problem:
                problems.append(problem)
    problem = rules.wall_clock_problem(result["device_ms"], window_s)
    if problem:
        problems.append(problem)
    return problems, notes


def why_wide(result: dict[str, Any], timings: dict[str, tuple[CallTiming, ...]], peaks: Peaks) -> str | None:
    """What can keep a speedup's interval wide, from the job's report: autotuning that chose differently for the
    two variants, a device busy with other work, calls whose time varies much from round to round."""
    reasons = []
    tuned = result.get("autotune") or {}
    ref_tuned, cand_tuned = tuned.get("reference") or {}, tuned.get("candidate") or {}
    for kernel, keys in cand_tuned.items():
        for key, config in keys.items():
            theirs = (ref_tuned.get(kernel) or {}).get(key)
            if theirs is not None and theirs != config:
                reasons.append(f"autotuning chose {theirs} for the reference and {config} for the candidate "
                               f"({kernel}, key {key})")  # fmt: skip
    lag = result.get("device_lag_ms")
    if isinstance(lag, (int, float)) and lag > BUSY_LAG_MS:
        reasons.append(f"the GPU was busy with other work (an empty kernel waited {lag:.2f} ms)")
    for who, calls in timings.items():
        noisy = [c for c in calls if c.spread_pct > NOISY_SPREAD_PCT]
        if noisy:
            worst = max(noisy, key=lambda c: c.spread_pct)
            reasons.append(f"the {who}'s {worst.signature} varies by {worst.spread_pct:.0f}% between rounds "
                           f"({worst.median_ms * 1e3:.1f} µs a call)")  # fmt: skip
    return "; ".join(reasons[:3]) or None


def _planned_call(entry: dict[str, Any]) -> tuple[str, float, int]:
    """What the round plan reads of a timed call (``RoundPlan.for_calls``, which counts a graph-replayed call as one
    node at least: a report of fewer can only narrow the band to one node a call, as before nodes were counted)."""
    return str(entry["method"]), float(entry["estimate_ms"]), int(entry.get("graph_nodes") or 0)


def _rounds(entries: list[dict[str, Any]]) -> list[list[float]]:
    """Round -> the sample of each call in it (every call has one per round)."""
    return [list(samples) for samples in zip(*(entry["samples"] for entry in entries), strict=True)]


def _call_timing(entry: dict[str, Any], peaks: Peaks, limits: dict[str, int]) -> CallTiming:
    samples = entry["samples"]
    median = statistics.median(samples)
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [min(samples), median, max(samples)]
    seconds = median * 1e-3
    gbps = entry["bytes"] / seconds / 1e9 if entry["bytes"] and seconds > 0 else None
    tflops = entry["flops"] / seconds / 1e12 if entry.get("flops") and seconds > 0 else None
    hot = entry["method"] == "cuda-graph" and entry["bytes"] * entry.get("input_sets", 1) <= 2 * max(peaks.l2_bytes, 1)
    return CallTiming(
        wrapper=entry["wrapper"],
        signature=entry["signature"],
        median_ms=median,
        spread_pct=(q[2] - q[0]) / median * 100 if median > 0 else 0.0,
        method=entry["method"],
        bytes_moved=entry["bytes"],
        gbps=gbps,
        tflops=tflops,
        pct_peak_bw=100 * gbps / peaks.bandwidth_gbps if gbps and peaks.bandwidth_gbps else None,
        pct_peak_flops=100 * tflops / peaks.tflops_16bit if tflops and peaks.tflops_16bit else None,
        cache="hot" if hot else "flushed",
        kernel_ms=entry.get("kernel_ms", {}),
        kernels=tuple(kernel_facts(k, limits) for k in entry.get("kernels") or ()),
    )


def check_failed(check: CheckResult, label: str, against: str | Path | None) -> BenchResult:
    """A candidate that fails its check is not timed."""
    return BenchResult(
        ok=False,
        stage=check.stage,
        backend=check.backend,
        file=label,
        message=f"not timed: the check failed ({check.message})",
        check=check,
        diagnostics=check.diagnostics,
        reference=str(against) if against else None,
    )


def needs_a_gpu(check: CheckResult | None, label: str) -> BenchResult:
    return BenchResult(
        ok=False,
        stage="perf",
        backend="interpreter",
        file=label,
        check=check,
        message="timing needs a GPU: no CUDA or ROCm device is visible "
        "(correctness was checked with the Triton interpreter)",
    )


def in_both_orders(result: BenchResult, swapped: BenchResult) -> BenchResult:
    """A speedup near 1 timed again with the candidate prepared first (`swapped`): both orders together, or the
    second timing's failure, or a rejection where the two timed other calls (the candidate, imported first, chose
    them)."""
    if not swapped.ok or swapped.speedup is None:
        return swapped  # its failure is the verdict
    if _timed_calls(swapped) != _timed_calls(result):
        return replace(
            swapped,
            ok=False,
            speedup=None,
            message="timing rejected: timed again with the candidate prepared first, it timed other calls "
            f"({', '.join(_timed_calls(swapped)) or 'none'}) than the first timing "
            f"({', '.join(_timed_calls(result))})",
        )
    assert result.speedup is not None
    both = crossed(result.speedup, swapped.speedup)
    return replace(
        result,
        speedup=both,
        alone_s=result.alone_s + swapped.alone_s,
        phases_s={
            k: result.phases_s.get(k, 0.0) + swapped.phases_s.get(k, 0.0)
            for k in {**result.phases_s, **swapped.phases_s}
        },
        message=f"{result.message}; timed again with the candidate prepared first: "
        f"{swapped.speedup.ratio:.3f}x; both orders together {both.ratio:.3f}x ({both.verdict})",
    )


def remeasured(again: BenchResult, first_ratio: float) -> BenchResult:
    """A large speedup measured again on fresh inputs: this second measurement is the verdict."""
    if not again.ok or again.speedup is None:
        return again
    return replace(
        again,
        speedup=replace(again.speedup, remeasured_from=first_ratio),
        message=f"{again.message} (re-measured on fresh inputs; first measurement {first_ratio:.3f}x)",
    )


def _timed_calls(result: BenchResult) -> list[str]:
    """The signatures of the reference's calls a timing timed (which calls, ``calls_to_time``)."""
    return [c.signature for c in result.reference_calls]
