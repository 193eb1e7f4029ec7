"""The speedup of a candidate over its reference, as the verdict reports it: from the interleaved rounds the caller's
timing rules believed, with the interval and the verdict of the sequential rule (``shared.sequential``).

Two identical files timed against each other in one process differ systematically by a few tenths of a percent
(code placement, allocation order), with intervals that exclude 1: the verdict is judged against the device's
equivalence margin (measured by an A/A run: ``peaks.noise_margin``), not against 1.
"""

from __future__ import annotations

from .results import Speedup
from .shared.sequential import RoundPlan, interval, is_undecided, judge, paired_ratios


def speedup_interval(
    reference_rounds: list[list[float]],
    candidate_rounds: list[list[float]],
    plan: RoundPlan | None = None,
    why_wide: str | None = None,
) -> Speedup:
    """The geometric mean over pairs of rounds of Σref/Σcand, with its interval at the plan's confidence (a fixed
    plan of these rounds by default) and the verdict against its margin; `why_wide`: what made an undecided interval
    wide, where the caller could tell."""
    plan = plan or RoundPlan.fixed(len(reference_rounds))
    ratio, low, high = interval(paired_ratios(reference_rounds, candidate_rounds), plan.confidence)
    margin = plan.margin_for(reference_rounds)
    verdict = judge(low, high, margin)
    undecided = is_undecided(verdict)
    if undecided:
        verdict = f"{verdict} after {len(reference_rounds)} rounds"
        if why_wide:
            verdict += f": {why_wide}"
    return Speedup(
        ratio,
        low,
        high,
        len(reference_rounds),
        verdict in ("faster", "slower"),
        verdict,
        margin,
        decided=not undecided,
        confidence=plan.confidence,
    )
