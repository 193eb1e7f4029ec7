"""The speedup of a candidate over its reference from interleaved timing rounds, judged against a noise floor.

Two identical files timed against each other in one process differ systematically by a few tenths of a percent
(code placement, allocation order), with intervals that exclude 1. So a difference is claimed only when the whole
95% interval lies beyond 1 ± the device's equivalence margin (measured by an A/A run, ``device_ceilings``).
Rounds come in pairs whose second runs the variants in the first's reverse order (``timing.interleaved``): each
sample of the ratio is one pair's, so what a variant gains from its place in a round cancels out.
"""

from __future__ import annotations

from .results import DEFAULT_NOISE_MARGIN, Speedup


def paired_ratios(reference_rounds: list[list[float]], candidate_rounds: list[list[float]]) -> list[float]:
    """Σref/Σcand over each pair of consecutive rounds (A B | B A); a last round without its pair counts alone."""
    if len(reference_rounds) != len(candidate_rounds):
        raise ValueError("the reference and the candidate were timed in different numbers of rounds")
    ratios = []
    for i in range(0, len(reference_rounds), 2):
        ref = sum(sum(r) for r in reference_rounds[i : i + 2])
        cand = sum(sum(c) for c in candidate_rounds[i : i + 2])
        ratios.append(ref / cand)
    return ratios


def speedup_interval(
    reference_rounds: list[list[float]],
    candidate_rounds: list[list[float]],
    margin: float = DEFAULT_NOISE_MARGIN,
) -> Speedup:
    """Median over pairs of rounds of Σref/Σcand, with a 95% bootstrap interval (under three pairs: their range)
    and the verdict against `margin`."""
    import numpy as np
    from scipy.stats import bootstrap

    ratios = np.array(paired_ratios(reference_rounds, candidate_rounds))
    ratio = float(np.median(ratios))
    if len(ratios) < 3 or float(ratios.std()) == 0.0:
        low, high = float(ratios.min()), float(ratios.max())
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
    return Speedup(ratio, low, high, len(reference_rounds), verdict in ("faster", "slower"), verdict, margin)


def judge(low: float, high: float, margin: float) -> str:
    """The verdict: faster / slower when [low, high] lies entirely beyond 1 ± margin, else within noise."""
    if low > 1.0 + margin:
        return "faster"
    if high < 1.0 - margin:
        return "slower"
    return f"within noise (±{100 * margin:.2g}%)"
