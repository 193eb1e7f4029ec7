"""GEAK's metrics over a batch of problems: call accuracy, execution accuracy, speedup (geometric mean over the
problems that pass and were timed), pass@k over parallel chains or runs, by difficulty, and per iteration.

Input: result records (dicts, one per problem and run) with `filename`, `pass_call`, `pass_exe`, `speedup`, and
optionally `difficulty`, `reference_error`, `chains`/`chains_passed`, `history` and `speedup_vs_tuned` (over the golden
file after the search without a model: `geak eval --tuned-reference`). Several records of one problem
(separate runs) are merged as the paper does: the best per problem is the one that passes execution, then the one
that passes the call, then the fastest; pass@k counts the runs that passed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ..memory import Candidate
from ..outcome import pass_at_k

Record = dict[str, Any]


def geomean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def merge_runs(records: Sequence[Record]) -> Record:
    """The best record of one problem over separate runs (GEAK's parallel scaling), with its pass@k counts."""

    def rank(r: Record) -> tuple:
        return (bool(r.get("pass_exe")), bool(r.get("pass_call")), r.get("speedup") or 0.0)

    best = dict(max(records, key=rank))
    if len(records) > 1:
        best["chains"] = len(records)
        best["chains_passed"] = sum(bool(r.get("pass_exe")) for r in records)
    return best


def by_problem(records: Iterable[Record]) -> list[Record]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        groups[record["filename"]].append(record)
    return [merge_runs(group) for group in groups.values()]


def _accuracy(problems: Sequence[Record]) -> dict[str, Any]:
    n = len(problems)
    passed = [p for p in problems if p.get("pass_exe")]
    speedups = [p["speedup"] for p in passed if p.get("speedup")]
    return {
        "problems": n,
        "reference_errors": sum(bool(p.get("reference_error")) for p in problems),
        "call_pass": sum(bool(p.get("pass_call")) for p in problems),
        "exec_pass": len(passed),
        "call_accuracy": sum(bool(p.get("pass_call")) for p in problems) / n if n else None,
        "exec_accuracy": len(passed) / n if n else None,
        "timed": len(speedups),
        "speedup_geomean": geomean(speedups),
        "faster": sum(p.get("speedup_verdict") == "faster" for p in passed if p.get("speedup")),
    } | _vs_tuned(problems, passed)


def _vs_tuned(problems: Sequence[Record], passed: Sequence[Record]) -> dict[str, Any]:
    """The speedups over the golden files after the search without a model, where records hold them (`geak eval
    --tuned-reference`)."""
    if not any("speedup_vs_tuned" in p for p in problems):
        return {}
    speedups = [p["speedup_vs_tuned"] for p in passed if p.get("speedup_vs_tuned")]
    return {
        "timed_vs_tuned": len(speedups),
        "speedup_vs_tuned_geomean": geomean(speedups),
        "faster_vs_tuned": sum(p.get("speedup_vs_tuned_verdict") == "faster" for p in passed),
    }


def _pass_at_k(problems: Sequence[Record]) -> dict[str, float]:
    if not any(p.get("chains") for p in problems):
        return {}
    counted = [(p.get("chains") or 1, p.get("chains_passed", int(bool(p.get("pass_exe"))))) for p in problems]
    top = min(n for n, _ in counted)
    per_problem = [pass_at_k(n, c) for n, c in counted]
    return {str(k): sum(values[k] for values in per_problem) / len(per_problem) for k in range(1, top + 1)}


def summarize(records: Iterable[Record]) -> dict[str, Any]:
    """Totals, pass@k, and the same figures per difficulty (problems without one are under "n/a")."""
    problems = by_problem(records)
    summary = {**_accuracy(problems), "pass_at_k": _pass_at_k(problems)}
    levels: dict[str, list[Record]] = defaultdict(list)
    for p in problems:
        levels[str(p.get("difficulty") or "n/a")].append(p)
    if len(levels) > 1 or "n/a" not in levels:
        summary["by_difficulty"] = {level: _accuracy(levels[level]) for level in sorted(levels)}
    return summary


def history(candidates: Sequence[Candidate]) -> list[dict[str, Any]]:
    """Best-so-far per iteration of one problem: model rounds first (1, 2, ...), then each search trial.
    Each point: did any candidate so far run (call), pass (exec), and the best speedup of a passing one."""
    llm = [c for c in candidates if c.origin in ("generate", "reflect", "optimize")]
    rounds = max((c.round + 1 for c in llm), default=0)
    steps: dict[int, list[Candidate]] = defaultdict(list)
    for c in llm:
        steps[c.round + 1].append(c)
    for i, c in enumerate((c for c in candidates if c.origin == "search"), 1):
        steps[rounds + i].append(c)
    points, call, exe, best = [], False, False, None
    for iteration in range(1, max(steps, default=0) + 1):
        for c in steps.get(iteration, []):
            ev = c.evaluation
            call = call or bool(ev and ev.called)
            if c.passed:
                exe = True
                if ev.speedup is not None and (best is None or ev.speedup > best):
                    best = ev.speedup
        points.append({"iteration": iteration, "pass_call": call, "pass_exe": exe, "speedup": best})
    return points


def iteration_curves(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Per iteration, over all problems (each carried at its last state once its history ends): call and
    execution accuracy, and the geometric mean speedup of the problems passing by then (the scaling curves)."""
    problems = by_problem(records)
    length = max((len(p.get("history") or []) for p in problems), default=0)
    curves = []
    for i in range(length):
        states = []
        for p in problems:
            h = p.get("history") or []
            states.append(h[min(i, len(h) - 1)] if h else {"pass_call": False, "pass_exe": False, "speedup": None})
        n = len(states)
        curves.append(
            {
                "iteration": i + 1,
                "call_accuracy": sum(bool(s["pass_call"]) for s in states) / n,
                "exec_accuracy": sum(bool(s["pass_exe"]) for s in states) / n,
                "speedup_geomean": geomean(s["speedup"] for s in states if s["pass_exe"] and s.get("speedup")),
            }
        )
    return curves
