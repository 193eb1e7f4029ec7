"""The perf stage: the bench job, and the figures built from its samples (rates, % of peak, speedup interval)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from .pool import JobOutcome
from .results import BenchResult, CallTiming, CheckResult, Diagnostic, Peaks, Speedup
from .triton_file import TritonFile

if TYPE_CHECKING:
    from .api import EvalOptions

IMPOSSIBLE_MARGIN = 1.15  # achieved bandwidth this far above the measured copy peak cannot be real


def bench_job(
    modules: list[dict[str, Any]], owner: TritonFile, options: EvalOptions, rounds: int | None = None
) -> dict[str, Any]:
    return {
        "kind": "bench",
        "modules": modules,
        "functions": list(owner.benches or owner.tests),
        "rounds": rounds or options.bench_rounds,
        "seed": options.seed,
        "rep_ms": options.rep_ms,
        "max_calls": options.max_bench_calls,
        "measure_peaks": options.measure_peaks,
        "profile": options.profile_kernels,
    }


def bench_result(
    outcome: JobOutcome,
    label: str,
    reference: TritonFile | None,
    check: CheckResult | None,
    runtime: dict[str, Any],
) -> BenchResult:
    base = {
        "backend": runtime.get("backend"),
        "file": label,
        "check": check,
        "device": runtime.get("device"),
        "reference": reference.path if reference else None,
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

    peaks = Peaks(**result["peaks"])
    timings = {label_: tuple(_call_timing(c, peaks) for c in calls) for label_, calls in result["calls"].items()}
    impossible = [
        (who, t, entry)
        for who, calls in timings.items()
        for t, entry in zip(calls, result["calls"][who], strict=True)
        if t.cache == "flushed" and _impossible(entry, t.median_ms, peaks)
    ]
    if impossible:
        who, t, entry = impossible[0]
        certain = entry.get("certain_bytes", entry["bytes"]) / (t.median_ms * 1e-3) / 1e9
        message = (
            f"{who}: {t.signature} wrote at least {certain:.0f} GB/s, above the device's measured peak of "
            f"{peaks.bandwidth_gbps:.0f} GB/s: physically impossible, so the timing was fooled "
            "(unwritten outputs, work outside the timed region?)"
        )
        return BenchResult(
            ok=False,
            stage="perf",
            message=message,
            peaks=peaks,
            diagnostics=(Diagnostic(1, 1, "error", message, file=label),),
            **base,
        )
    calls = timings["candidate"]
    kernel_ms: dict[str, float] = {}
    for t in calls:
        for name, ms in t.kernel_ms.items():
            kernel_ms[name] = kernel_ms.get(name, 0.0) + ms
    speedup = None
    message = f"{len(calls)} call(s) timed: {sum(t.median_ms for t in calls):.4f} ms in all"
    if "reference" in timings:
        speedup = speedup_interval(result["rounds"]["reference"], result["rounds"]["candidate"])
        message += f"; speedup {speedup.ratio:.3f}x [{speedup.low:.3f}, {speedup.high:.3f}] ({speedup.verdict})"
    return BenchResult(
        ok=True,
        stage="perf",
        message=message,
        calls=calls,
        reference_calls=timings.get("reference", ()),
        kernel_ms=kernel_ms,
        speedup=speedup,
        peaks=peaks,
        **base,
    )


def _call_timing(entry: dict[str, Any], peaks: Peaks) -> CallTiming:
    samples = entry["samples"]
    median = statistics.median(samples)
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [min(samples), median, max(samples)]
    seconds = median * 1e-3
    gbps = entry["bytes"] / seconds / 1e9 if entry["bytes"] and seconds > 0 else None
    tflops = entry["flops"] / seconds / 1e12 if entry.get("flops") and seconds > 0 else None
    hot = entry["method"] == "cuda-graph" and entry["bytes"] <= 2 * max(peaks.l2_bytes, 1)
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
    )


def _impossible(entry: dict[str, Any], median_ms: float, peaks: Peaks) -> bool:
    """Faster than the memory allows, counting only bytes the call certainly moved: what it declares
    (`bytes_<wrapper>`) or, else, the outputs it returned (they must have been written)."""
    certain = entry.get("certain_bytes", entry["bytes"])
    if not certain or not peaks.bandwidth_gbps or median_ms <= 0:
        return False
    return certain / (median_ms * 1e-3) / 1e9 > IMPOSSIBLE_MARGIN * peaks.bandwidth_gbps


def speedup_interval(reference_rounds: list[list[float]], candidate_rounds: list[list[float]]) -> Speedup:
    """Median over rounds of Σref/Σcand, with a 95% bootstrap interval; significant when it excludes 1."""
    import numpy as np
    from scipy.stats import bootstrap

    ratios = np.array([sum(r) / sum(c) for r, c in zip(reference_rounds, candidate_rounds, strict=True)])
    ratio = float(np.median(ratios))
    if len(ratios) < 3 or float(ratios.std()) == 0.0:
        low = high = ratio
    else:
        ci = bootstrap(
            (ratios,),
            np.median,
            confidence_level=0.95,
            n_resamples=4000,
            method="percentile",
            random_state=np.random.default_rng(0),
        ).confidence_interval
        low, high = float(ci.low), float(ci.high)
    if low > 1.0:
        verdict = "faster"
    elif high < 1.0:
        verdict = "slower"
    else:
        verdict = "no significant difference"
    return Speedup(ratio, low, high, len(ratios), verdict != "no significant difference", verdict)
