"""LLM-free search over the launch parameters of a Triton module, by measurement.

The baseline is evaluated first, then a greedy coordinate descent: for one parameter at a time (block
sizes first, then ``num_warps``, then ``num_stages``) the neighbouring choices of the current best are
tried, and the search moves (and keeps going in that direction) when a correct candidate is faster by more
than the noise margin and, where the evaluator gives a verdict, significantly faster than the original. Passes
over all parameters repeat until none moves or the evaluation budget is spent.
When the baseline cannot be timed, the neighbours are only checked for correctness and the baseline is kept.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from .launch_params import TunableParam, apply_params, find_tunable_params

logger = logging.getLogger(__name__)

NOISE_MARGIN = 0.02  # a candidate must be this much faster (relative) to count as an improvement
_BLOCK_WORDS = ("BLOCK", "TILE", "SIZE")


class Outcome(Protocol):
    """What an evaluation reports about one candidate source (a `Trial` is one). `faster`: the evaluator's verdict
    against the original (its speedup interval clears the noise floor), None where there is no verdict."""

    ok: bool
    latency_ms: float | None
    message: str
    faster: bool | None


@dataclass
class Trial:
    """One evaluated candidate: its parameter values (by key), its source and how it fared."""

    values: dict[str, int]
    source: str
    ok: bool
    latency_ms: float | None
    message: str
    faster: bool | None = None


@dataclass
class SearchResult:
    """The best trial (the baseline unless a faster correct one was found), all trials in order, a summary."""

    best: Trial
    trials: list[Trial]
    improved: bool
    summary: str


Evaluate = Callable[[str], Awaitable[Outcome]]


async def search_launch_params(
    source: str,
    evaluate: Evaluate,
    *,
    budget: int,
    seed: int = 0,
    on_trial: Callable[[Trial], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    kernel: str | None = None,
) -> SearchResult:
    """Tune the launch parameters of ``source`` with at most ``budget`` evaluations (the baseline included).

    ``evaluate`` checks and times a candidate source; ``latency_ms`` None means it could not be timed.
    ``seed`` orders parameters of equal priority (the search is deterministic for a given seed).
    ``should_stop`` is polled before every evaluation after the baseline's. ``kernel`` restricts the search to
    the launches of that kernel. Raises ``ValueError`` for a
    budget below 1 or a source that does not parse.
    """
    if budget < 1:
        raise ValueError(f"budget must be at least 1 evaluation (the baseline), got {budget}")
    params = _search_order([p for p in find_tunable_params(source) if kernel in (None, p.kernel)], seed)
    search = _Search(source, evaluate, budget, on_trial, should_stop)
    baseline = await search.evaluate_baseline({p.key: p.current for p in params})
    if not baseline.ok:
        reason = baseline.message.strip().splitlines()[-1:] or ["no message"]
        return search.result(baseline, f"the baseline fails ({reason[0][:200]}); nothing to tune")
    if not params:
        return search.result(baseline, "no tunable launch parameters (autotuned or computed values only)")
    if baseline.latency_ms is None:
        return await _check_neighbours(search, params, baseline)
    best, converged = await _coordinate_descent(search, params, baseline)
    summary = _describe(baseline, best, params, search)
    if not converged and not search.stopped:
        summary += f" (budget of {budget} evaluations spent before the search converged)"
    return search.result(best, summary)


class _Search:
    """Evaluation bookkeeping: budget, deduplication of values, callbacks."""

    def __init__(
        self,
        source: str,
        evaluate: Evaluate,
        budget: int,
        on_trial: Callable[[Trial], None] | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.source = source
        self._evaluate = evaluate
        self.budget = budget
        self._on_trial = on_trial
        self._should_stop = should_stop
        self.trials: list[Trial] = []
        self._seen: dict[tuple[tuple[str, int], ...], Trial] = {}
        self.stopped = False

    @property
    def exhausted(self) -> bool:
        return self.stopped or len(self.trials) >= self.budget

    async def evaluate_baseline(self, values: Mapping[str, int]) -> Trial:
        """The unchanged source (always evaluated, whatever ``should_stop`` says)."""
        return await self._run(values, self.source)

    async def evaluate(self, values: Mapping[str, int]) -> Trial | None:
        """The trial for ``values``: a fresh evaluation, a cached one, or None when out of budget/stopped."""
        signature = tuple(sorted(values.items()))
        if signature in self._seen:
            return self._seen[signature]
        if self.exhausted:
            return None
        if self._should_stop is not None and self._should_stop():
            self.stopped = True
            return None
        try:
            candidate = apply_params(self.source, values)
        except ValueError as exc:  # the rewrite itself failed: record it as a failed candidate
            logger.warning("could not rewrite launch parameters %s: %s", dict(values), exc)
            return self._record(Trial(dict(values), self.source, False, None, f"could not rewrite the source: {exc}"))
        return await self._run(values, candidate)

    async def _run(self, values: Mapping[str, int], candidate: str) -> Trial:
        try:
            outcome = await self._evaluate(candidate)
            trial = Trial(dict(values), candidate, outcome.ok, outcome.latency_ms, outcome.message, outcome.faster)
        except Exception as exc:  # a crashing evaluation is a failed candidate, not a failed search
            logger.warning("evaluating launch parameters %s raised %r", dict(values), exc)
            trial = Trial(dict(values), candidate, False, None, f"evaluation raised {type(exc).__name__}: {exc}")
        return self._record(trial)

    def _record(self, trial: Trial) -> Trial:
        self._seen[tuple(sorted(trial.values.items()))] = trial
        self.trials.append(trial)
        if self._on_trial is not None:
            self._on_trial(trial)
        return trial

    def result(self, best: Trial, summary: str) -> SearchResult:
        baseline = self.trials[0]
        improved = best is not baseline
        if self.stopped:
            summary += " (stopped early)"
        return SearchResult(best=best, trials=list(self.trials), improved=improved, summary=summary)


def _search_order(params: list[TunableParam], seed: int) -> list[TunableParam]:
    """Block-size constexprs first, other constexprs, then num_warps, then num_stages; seed shuffles ties."""

    def priority(param: TunableParam) -> int:
        if param.kind == "constexpr":
            return 0 if any(word in param.name.upper() for word in _BLOCK_WORDS) else 1
        return 2 if param.kind == "num_warps" else 3

    tie_break = random.Random(seed).sample(range(len(params)), len(params))
    ranked = sorted(range(len(params)), key=lambda i: (priority(params[i]), tie_break[i]))
    return [params[i] for i in ranked]


def _faster(candidate: Trial, best: Trial) -> bool:
    """Better than the best so far by the noise margin, and (where the evaluator gave a verdict) significantly
    faster than the original."""
    return (
        candidate.ok
        and candidate.faster is not False
        and candidate.latency_ms is not None
        and best.latency_ms is not None
        and candidate.latency_ms < best.latency_ms * (1 - NOISE_MARGIN)
    )


async def _coordinate_descent(search: _Search, params: list[TunableParam], baseline: Trial) -> tuple[Trial, bool]:
    """The fastest correct trial found, and whether the search converged (a full pass without a move)."""
    best = baseline
    while True:
        moved = starved = False
        for param in params:
            for step in (1, -1):
                moved_this_way = False
                while True:  # keep going in this direction while it pays
                    index = param.choices.index(best.values[param.key]) + step
                    if not 0 <= index < len(param.choices):
                        break
                    trial = await search.evaluate({**best.values, param.key: param.choices[index]})
                    starved = starved or trial is None
                    if trial is None or not _faster(trial, best):
                        break
                    best, moved, moved_this_way = trial, True, True
                if moved_this_way:
                    break
        if starved or not moved:
            return best, not starved


async def _check_neighbours(search: _Search, params: list[TunableParam], baseline: Trial) -> SearchResult:
    """No timing: check that neighbouring values still pass, to report which are safe; keep the baseline."""
    for param in params:
        index = param.choices.index(param.current)
        for neighbour in (index + 1, index - 1):
            if 0 <= neighbour < len(param.choices):
                await search.evaluate({**baseline.values, param.key: param.choices[neighbour]})
    checked = search.trials[1:]
    failed = [t for t in checked if not t.ok]
    summary = (
        f"speed could not be measured (no timing available); kept the baseline. "
        f"Checked {len(checked)} neighbouring launch configuration(s) for correctness: {len(failed)} failed."
    )
    return search.result(baseline, summary)


def _describe(baseline: Trial, best: Trial, params: list[TunableParam], search: _Search) -> str:
    evaluated = len(search.trials)
    failed = sum(not t.ok for t in search.trials)
    tally = f"{evaluated} configuration(s) evaluated, {failed} failed"
    if best is baseline:
        margin = f"{NOISE_MARGIN:.0%}"
        return f"no launch configuration beat the baseline ({baseline.latency_ms:.4g} ms) by > {margin}; {tally}"
    names = {p.key: f"{p.kernel}.{p.name} (line {p.line})" for p in params}
    changes = ", ".join(
        f"{names[key]} {baseline.values[key]} -> {value}"
        for key, value in best.values.items()
        if value != baseline.values[key]
    )
    assert baseline.latency_ms is not None and best.latency_ms is not None  # both timed to be compared
    speedup = baseline.latency_ms / best.latency_ms
    timing = f"{baseline.latency_ms:.4g} ms -> {best.latency_ms:.4g} ms ({speedup:.2f}x faster)"
    return f"{timing} by {changes}; {tally}"
