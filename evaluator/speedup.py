"""The speedup of a candidate over its reference from interleaved timing rounds, judged against a noise floor.

Two identical files timed against each other in one process differ systematically by a few tenths of a percent
(code placement, allocation order), with intervals that exclude 1. So a difference is claimed only when the whole
95% interval lies beyond 1 ± the device's equivalence margin (measured by an A/A run, ``device_ceilings``).
"""

from __future__ import annotations

from .results import DEFAULT_NOISE_MARGIN, Speedup


def speedup_interval(
    reference_rounds: list[list[float]],
    candidate_rounds: list[list[float]],
    margin: float = DEFAULT_NOISE_MARGIN,
) -> Speedup:
    """Median over rounds of Σref/Σcand, with a 95% bootstrap interval and the verdict against `margin`."""
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
    verdict = judge(low, high, margin)
    return Speedup(ratio, low, high, len(ratios), verdict in ("faster", "slower"), verdict, margin)


def judge(low: float, high: float, margin: float) -> str:
    """The verdict: faster / slower when [low, high] lies entirely beyond 1 ± margin, else within noise."""
    if low > 1.0 + margin:
        return "faster"
    if high < 1.0 - margin:
        return "slower"
    return f"within noise (±{100 * margin:.2g}%)"
