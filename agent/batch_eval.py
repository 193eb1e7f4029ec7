"""Scoring predictions made elsewhere (`geak eval`): every prediction of a JSONL file (TritonBench's published
format or GEAK's own) is checked against its problem's golden file, timed where a GPU is visible, and scored with
GEAK's metrics. Predictions spread over the evaluation slots like a batch run's candidates."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dataloaders import GoldenFileSuite, ProblemState, reference_file, score_code
from .eval_slots import EvalSlot
from .records_file import append_record, read_records, rewrite_records
from .tasks import all_or_none


@dataclass
class EvalOutcome:
    records: list[dict[str, Any]]
    unmatched: list[str]
    wall_s: float


async def score_predictions(
    suite: GoldenFileSuite,
    predictions: Path,
    slots: list[EvalSlot],
    scratch: Path,
    *,
    rounds: int | None = None,
    timing: bool = True,
    results: Path | None = None,
    on_record: Callable[[dict[str, Any], int], None] | None = None,
    per_slot: int = 2,
    earlier: dict[int, dict[str, Any]] | None = None,
) -> EvalOutcome:
    """Score each line of `predictions`, `per_slot` at a time on each slot; records are appended to `results`
    (JSONL) as they finish and passed to `on_record(record, total)`. `timing` False: correctness only (call and
    execution accuracy). `earlier`: records of an interrupted run of the same predictions, by line: those lines are
    not scored again (``read_earlier``)."""
    started = time.perf_counter()
    states = suite.load_ps(predictions)
    earlier = earlier or {}
    for line, record in earlier.items():
        if line >= len(states) or record.get("filename") != states[line].filename:
            raise ValueError(f"the earlier records do not match the predictions (line {line + 1})")
    for slot in slots:
        await slot.describe()
    limit = asyncio.Semaphore(per_slot * len(slots))
    if results is not None:  # the earlier records again, without a line torn by a kill: new ones are appended
        results.parent.mkdir(parents=True, exist_ok=True)
        rewrite_records(results, [earlier[line] for line in sorted(earlier)])
    records: list[dict[str, Any]] = list(earlier.values())

    async def one(index: int, ps: ProblemState) -> None:
        async with limit:
            slot = min(slots, key=lambda s: s.active)
            slot.active += 1
            try:
                record = await _score(ps, slot, scratch, rounds, timing)
            finally:
                slot.active -= 1
        record["line"] = index
        records.append(record)
        if results is not None:
            append_record(results, record)
        if on_record is not None:
            on_record(record, len(states))

    await all_or_none(one(i, ps) for i, ps in enumerate(states) if i not in earlier)
    records.sort(key=lambda r: r["line"])
    return EvalOutcome(records, list(suite.unmatched), time.perf_counter() - started)


async def _score(ps: ProblemState, slot: EvalSlot, scratch: Path, rounds: int | None, timing: bool) -> dict[str, Any]:
    record: dict[str, Any] = {
        "filename": ps.filename,
        "difficulty": ps.difficulty,
        "slot": slot.name,
        "pass_call": False,
        "pass_exe": False,
        "speedup": None,
    }
    if not ps.solution or not ps.solution.strip():
        record.update(stage="reply", message="the prediction has no code")
        return record
    timing = timing and (slot.runtime or {}).get("backend") not in (None, "interpreter")
    score = await score_code(slot.evaluator, ps.solution, reference_file(ps, scratch), timing=timing, rounds=rounds)
    record.update(score.to_dict())
    return record


def read_earlier(results: Path) -> dict[int, dict[str, Any]]:
    """The records an interrupted `geak eval` appended to `results`, by prediction line (a torn last line, from a
    kill mid-write, is dropped: that prediction is scored again)."""
    return {r["line"]: r for r in read_records(results, "line") if isinstance(r["line"], int)}
