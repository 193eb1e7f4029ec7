"""When a timing has taken enough rounds: the sequential rule both sides apply, the timing job to stop and the
caller to check that it stopped where it should (``stopped_where_the_rule_says``).

Rounds come in pairs whose second runs the variants in the first's reverse order (the job's ``timing.interleaved``):
each sample of the speedup is one pair's ratio Σref/Σcand, so what a variant gains from its place in a round cancels
out. The interval is a Student-t interval on the logarithms of the pair ratios. A difference is claimed only when
the whole interval lies beyond 1 ± the equivalence margin, "no difference" only when it lies wholly inside; an
interval that straddles an edge of the band is undecided. A sequential timing (``RoundPlan``) looks at the interval
after a fixed schedule of round counts and stops at the first look where it is decided, or where no later look could
decide it (``futile``), else at the plan's maximum;
the 95% confidence is shared out over the looks (an A/A timed under noise three times the margin claimed a change in
0.5% of simulated runs, against 1.5% with 95% at every look). A pure function of the samples, so a job cannot stop
where the rule says go on, or go on where it says stop, without the caller seeing it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

DEFAULT_NOISE_MARGIN = 0.015  # equivalence margin of a speedup where the device's A/A margin is unknown, and its floor
# The band of a timing mostly of calls replayed in CUDA/HIP graphs (calls under ~50 µs, hot L2): identical files timed
# so can differ systematically by about 1.5%, each with a tight interval, a bias the device's own A/A kernels do not
# show.
GRAPH_MARGIN = 0.02
# Where two identical variants are placed apart in one process (which is loaded and prepared first) shifts each node
# of a replayed graph (a kernel, a copy or a set) by a fixed few hundredths to tenths of a µs: several percent of a
# µs-scale call, of one kernel or of many nodes, the sign following the order of preparation, not the code. So each
# node a timed call replays adds this much of the reference's time per call to the band (``RoundPlan.margin_for``).
PLACEMENT_MS = 0.00015
LOOKS = (6, 8, 12, 16, 24, 32, 48, 64)  # round counts at which a sequential timing may stop
MIN_ROUNDS = 6
MAX_ROUNDS = 40
# A look may stop a timing for futility (``futile``) from this many rounds on (fewer pairs misjudge the spread),
# granting the rounds still to come this share of the pair ratios' spread so far. Simulated (200 seeds each), a batch
# run's 24 rounds then decide at most 1 in 200 fewer timings and take 12-15 of the 24 rounds where nothing can be
# decided; a single bench's 40 decide 5-13 in 200 fewer near the band's edge (within noise at 2% jitter: 126 -> 113).
FUTILITY_FROM = 8
FUTILITY_SPREAD = 0.25
UNDECIDED = "undecided"  # how an undecided verdict begins
CONFIDENCE = 0.95  # of the interval of a timing with one look; sequential ones share it out over their looks


@dataclass(frozen=True)
class RoundPlan:
    """How many interleaved rounds a timing takes: exactly `min_rounds` when it equals `max_rounds` (a fixed count,
    e.g. `--rounds`), else sequential: from `min_rounds`, a look at each round count of ``LOOKS`` (and at
    `max_rounds`) until the speedup against `margin` is decided. Counts are even (whole pairs of rounds). `max_s`
    (0: none): a sequential timing whose rounds have taken this long stops, undecided, at its next look (a batch
    run's limit: calls of 100 ms each would hold the device alone for minutes over 24 rounds)."""

    min_rounds: int = MIN_ROUNDS
    max_rounds: int = MAX_ROUNDS
    margin: float = DEFAULT_NOISE_MARGIN
    max_s: float = 0.0
    graph_nodes: int = 0  # the nodes the timed calls replay in graphs, per call of each, summed (``for_calls``)

    @classmethod
    def fixed(cls, rounds: int, margin: float = DEFAULT_NOISE_MARGIN) -> RoundPlan:
        even = rounds + rounds % 2
        return cls(even, even, margin)

    @classmethod
    def from_dict(cls, data: dict) -> RoundPlan:
        """The plan a job was sent; ValueError for counts that are not whole pairs in order."""
        plan = cls(
            int(data["min_rounds"]),
            int(data["max_rounds"]),
            float(data["margin"]),
            float(data.get("max_s") or 0.0),
            int(data.get("graph_nodes") or 0),
        )
        if not (2 <= plan.min_rounds <= plan.max_rounds) or plan.min_rounds % 2 or plan.max_rounds % 2:
            raise ValueError(f"rounds {plan.min_rounds}..{plan.max_rounds} are not whole pairs in order")
        if plan.max_s < 0:
            raise ValueError(f"a time limit of {plan.max_s} s")
        return plan

    def looks(self) -> tuple[int, ...]:
        """The round counts after which the interval is looked at; the last is `max_rounds`."""
        inside = {n for n in LOOKS if self.min_rounds <= n < self.max_rounds}
        return tuple(sorted(inside | {self.min_rounds, self.max_rounds}))

    def for_calls(self, calls: list[tuple[str, float, int]]) -> RoundPlan:
        """The plan for what is timed: `calls` are the reference's (timing method, estimated ms, graph nodes) per call
        (the file's own where there is no reference; the nodes of one call in its graph, where it is replayed in one).
        Where graph replays hold at least half the time, the band is at least ``GRAPH_MARGIN``; each node replayed
        widens it further by its placement (``margin_for``). Both sides apply it: the job to the calls it timed, the
        caller to the calls it reported."""
        total = sum(ms for _, ms, _ in calls)
        graphs = sum(ms for method, ms, _ in calls if method == "cuda-graph")
        plan = replace(self, graph_nodes=sum(max(1, nodes) for method, _, nodes in calls if method == "cuda-graph"))
        if total > 0 and graphs >= total / 2 and self.margin < GRAPH_MARGIN:
            return replace(plan, margin=GRAPH_MARGIN)
        return plan

    def margin_for(self, reference_rounds: list[list[float]]) -> float:
        """The band of a speedup over these rounds: the plan's margin, or, where calls are replayed in graphs, what
        their placement alone can shift (``PLACEMENT_MS`` a node, over the reference's median time of a round's
        calls) if that is more. A pure function of the samples, as the stopping rule is."""
        if not self.graph_nodes or not reference_rounds:
            return self.margin
        medians = [statistics.median(r[i] for r in reference_rounds) for i in range(len(reference_rounds[0]))]
        total = sum(medians)
        return max(self.margin, PLACEMENT_MS * self.graph_nodes / total) if total > 0 else self.margin

    @property
    def confidence(self) -> float:
        """Of each look's interval: 95% shared out over the looks (Bonferroni), so that looking often does not make
        a difference that is not there more likely to be claimed."""
        return 1 - (1 - CONFIDENCE) / len(self.looks())


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


def interval(ratios: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(ratio, low, high): the geometric mean of the pair ratios with a Student-t interval on their logarithms at
    `confidence` (few pairs give a wide interval, as they should); one pair, or none varying: that value."""
    from scipy.special import stdtrit  # the t quantile (SciPy: preloaded in the worker)

    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    spread = statistics.stdev(logs) if len(logs) > 1 else 0.0
    if spread == 0.0:
        return math.exp(mean), math.exp(mean), math.exp(mean)
    half = float(stdtrit(len(logs) - 1, 1 - (1 - confidence) / 2)) * spread / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def judge(low: float, high: float, margin: float) -> str:
    """The verdict on an interval: faster / slower when it lies entirely beyond 1 ± margin, within noise when it lies
    entirely inside, else undecided."""
    if low > 1.0 + margin:
        return "faster"
    if high < 1.0 - margin:
        return "slower"
    band = f"±{100 * margin:.2g}%"
    if low >= 1.0 - margin and high <= 1.0 + margin:
        return f"within noise ({band})"
    return f"{UNDECIDED} (the interval straddles the {band} noise band)"


def is_undecided(verdict: str | None) -> bool:
    """Is this verdict of ``judge`` (as the caller may have extended it) an undecided one?"""
    return (verdict or "").startswith(UNDECIDED)


def decided(reference_rounds: list[list[float]], candidate_rounds: list[list[float]], plan: RoundPlan) -> bool:
    """Is the speedup over these rounds decided (faster, slower or within noise) at the plan's confidence?"""
    _, low, high = interval(paired_ratios(reference_rounds, candidate_rounds), plan.confidence)
    return not is_undecided(judge(low, high, plan.margin_for(reference_rounds)))


def futile(reference_rounds: list[list[float]], candidate_rounds: list[list[float]], plan: RoundPlan) -> bool:
    """Would the plan's last look still be undecided, were the pair ratios' spread to shrink to a quarter and their
    mean to stay? Then the timing stops, undecided, at this look. It can only end a timing without a verdict, never
    make one: a file whose calls vary by tens of percent between rounds would otherwise hold the device alone for
    every round of its timing, only to end undecided (``FUTILITY_FROM``, ``FUTILITY_SPREAD``)."""
    from scipy.special import stdtrit

    timed = len(reference_rounds)
    if timed < FUTILITY_FROM or timed >= plan.max_rounds:
        return False
    logs = [math.log(r) for r in paired_ratios(reference_rounds, candidate_rounds)]
    mean, spread = statistics.fmean(logs), statistics.stdev(logs)
    pairs = (plan.max_rounds + 1) // 2
    t = float(stdtrit(pairs - 1, 1 - (1 - plan.confidence) / 2))
    half = t * FUTILITY_SPREAD * spread / math.sqrt(pairs)
    margin = plan.margin_for(reference_rounds)
    low, high = math.log(1.0 - margin), math.log(1.0 + margin)
    can_be_within = low <= mean - half and mean + half <= high
    can_be_claimed = mean - half > high or mean + half < low
    return not (can_be_within or can_be_claimed)


def settled(reference_rounds: list[list[float]], candidate_rounds: list[list[float]], plan: RoundPlan) -> bool:
    """Does a look at these rounds end the timing: the speedup decided, or no later look can decide it?"""
    return decided(reference_rounds, candidate_rounds, plan) or futile(reference_rounds, candidate_rounds, plan)


def rounds_needed(reference_rounds: list[list[float]], candidate_rounds: list[list[float]], plan: RoundPlan) -> int:
    """How many of these rounds the plan takes: the first look that settles the speedup, else its maximum."""
    for n in plan.looks():
        if n >= plan.max_rounds or settled(reference_rounds[:n], candidate_rounds[:n], plan):
            return n
    return plan.max_rounds


def stopped_where_the_rule_says(
    reference_rounds: list[list[float]], candidate_rounds: list[list[float]], plan: RoundPlan, timed_out: bool = False
) -> str | None:
    """Why a job's rounds do not follow the plan (it stopped early, went on, or timed a number the plan never looks
    at), or None. `timed_out`: the job says the plan's time limit stopped it, which it may only do at a look where
    the speedup is still undecided (its verdict then stays undecided). ValueError for rounds that cannot be paired
    (a malformed report)."""
    timed = len(reference_rounds)
    if timed != len(candidate_rounds):
        raise ValueError("the reference and the candidate were timed in different numbers of rounds")
    if timed < plan.min_rounds or timed not in plan.looks():
        return f"{timed} rounds were timed where the plan looks at {', '.join(map(str, plan.looks()))}"
    needed = rounds_needed(reference_rounds, candidate_rounds, plan)
    if timed_out and not plan.max_s:
        return "it stopped for a time limit that its plan does not have"
    if needed != timed and not (timed_out and needed > timed):
        return f"{timed} rounds were timed where the stopping rule says {needed}"
    return None
