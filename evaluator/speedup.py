"""The speedup of a candidate over its reference, as the verdict reports it: from the interleaved rounds the caller's
timing rules believed, with the interval and the verdict of the sequential rule (``shared.sequential``).

Two identical files timed against each other in one process differ systematically by a few tenths of a percent
(code placement, allocation order), with intervals that exclude 1: the verdict is judged against the device's
equivalence margin (measured by an A/A run: ``peaks.noise_margin``), not against 1.
"""

from __future__ import annotations

import math

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
    undecided_after = f"{len(reference_rounds)} rounds" + (f": {why_wide}" if why_wide else "")
    return _judged(ratio, low, high, len(reference_rounds), plan.margin_for(reference_rounds), plan.confidence,
                   undecided_after)  # fmt: skip


def crossed(first: Speedup, second: Speedup) -> Speedup:
    """The speedup of two timings of one pair, the reference prepared first in `first`, the candidate in `second`,
    judged against the wider of their margins. Where the variants sit in the job's process shifts µs-scale calls by a
    few percent towards the one prepared first, and by its mirror in the other order (``docs/timing.md``, the
    margin): where the two ratios lie no further apart than that band allows, the geometric means of their ratios and
    of their interval's bounds (as wide as the two on average) cancel it. Further apart, the two timings disagree by
    more than where the variants sit can explain, so one of their intervals missed: only what both intervals allow
    together is claimed (from the lower of their lows to the higher of their highs), where the geometric means of
    a "faster" timing and a 1.000x one the other way round could still claim "faster"."""
    margin = max(first.margin, second.margin)
    rounds = first.rounds + second.rounds
    ratio = math.sqrt(first.ratio * second.ratio)
    said = f"{rounds} rounds in two timings, each variant prepared first in one"
    if abs(math.log(first.ratio / second.ratio)) <= 2 * math.log1p(margin):
        low, high = math.sqrt(first.low * second.low), math.sqrt(first.high * second.high)
    else:
        low, high = min(first.low, second.low), max(first.high, second.high)
        said += f", {first.ratio:.3f}x and {second.ratio:.3f}x: further apart than the ±{margin:.1%} band"
    return _judged(ratio, low, high, rounds, margin, first.confidence, said)


def _judged(
    ratio: float, low: float, high: float, rounds: int, margin: float, confidence: float, undecided_after: str
) -> Speedup:
    """The speedup with its verdict against `margin`; an undecided one says what it was undecided after."""
    verdict = judge(low, high, margin)
    undecided = is_undecided(verdict)
    if undecided:
        verdict = f"{verdict} after {undecided_after}"
    return Speedup(ratio, low, high, rounds, verdict in ("faster", "slower"), verdict, margin, decided=not undecided,
                   confidence=confidence)  # fmt: skip
