"""Scoring predictions made elsewhere (`geak eval`): every prediction of a JSONL file (TritonBench's published
format or GEAK's own) is checked against its problem's golden file, timed where a GPU is visible, and scored with
GEAK's metrics. Predictions spread over the evaluation slots like a batch run's candidates."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geak.evaluator import CheckResult, longest_first

from ..tasks import all_or_none
from .dataloaders import GoldenFileSuite, ProblemState, Score, reference_file
from .dataloaders.scoring import check_code, time_code
from .eval_slots import EvalSlot
from .records_file import append_record, read_records, rewrite_records
from .tuned_reference import TunedReferences

# Timings at once on a slot while its checks still run: their imports and captures share the device with the slot's
# checks and overlap, their measurements take turns, each with the device alone, the jobs sharing it paused meanwhile
# (the pool's ``DeviceShare``), so one's setup (its captures take far longer than its decided rounds) is not all on
# the critical path. As its checks end, a slot times more at once, up to as many as it checked. More is not faster:
# their preparations contend for the device while none measures, so fewer timings are made ready per second.
TIMINGS_AT_ONCE = 6


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
    on_event: Callable[[str], None] | None = None,
    tuned: TunedReferences | None = None,
) -> EvalOutcome:
    """Score each line of `predictions`: every prediction is checked, `per_slot` at a time on each slot, and once every
    check has started, what passed is timed, ``TIMINGS_AT_ONCE`` at a time on each slot (more as its checks end, up to
    `per_slot`), by turns the quickest and the slowest tests among those waiting (``next_to_time``), on whichever slot
    is free, since a slot whose checks run long (a prediction that hangs until the time limit) need not hold what passed
    there. A timing measures with the device alone: the checks still running on its slot are paused meanwhile and go on
    after it, their time limits moved on by the pause (the pool's ``DeviceShare``). Timings wait for the checks to have
    started, not ended: the last ones (often a golden file that hangs until the limit) overlap the timings. Timing from
    the first pass on, beside every check, made the run slower. Records are appended to `results` (JSONL) as they finish
    (a prediction that passed, once timed) and passed to `on_record(record, total)`. `timing` False: correctness only
    (call and execution accuracy). `earlier`: records of an interrupted run of the same predictions, by line: those
    lines are not scored again (``read_earlier``). `on_event` is told what else happens (each slot's start of its
    timings, the end of the checks). `tuned`: each timed prediction is also timed against its golden file after the
    search without a model (``tuned_reference``), into `speedup_vs_tuned`."""
    say = on_event or (lambda message: None)
    started = time.perf_counter()
    states = suite.load_ps(predictions)
    earlier = earlier or {}
    for line, record in earlier.items():
        if line >= len(states) or record.get("filename") != states[line].filename:
            raise ValueError(f"the earlier records do not match the predictions (line {line + 1})")
    for slot in slots:
        await slot.describe()
    say(f"checking {len(states) - len(earlier)} prediction(s), {per_slot} at once on each of {len(slots)} slot(s)")
    limit = asyncio.Semaphore(per_slot * len(slots))
    if results is not None:  # the earlier records again, without a line torn by a kill: new ones are appended
        results.parent.mkdir(parents=True, exist_ok=True)
        rewrite_records(results, [earlier[line] for line in sorted(earlier)])
    records: list[dict[str, Any]] = list(earlier.values())
    to_time: list[_Checked] = []  # passed, waiting for a slot to time them

    def finished(checked: _Checked) -> None:
        records.append(checked.record)
        if results is not None:
            append_record(results, checked.record)
        if on_record is not None:
            on_record(checked.record, len(states))

    lines = [i for i in range(len(states)) if i not in earlier]
    references = {i: reference_file(states[i], scratch) for i in lines if states[i].solution}
    unchecked = Counter(references.values())  # per reference, its predictions not yet checked
    unassigned = len(lines)  # checks not yet given a slot
    changed = asyncio.Condition()  # a check ended, or a passed prediction waits for its timing
    checks_done = lambda: unassigned == 0 and all(s.active == 0 for s in slots)

    async def check(index: int, ps: ProblemState) -> None:
        nonlocal unassigned
        async with limit:
            slot = min(slots, key=lambda s: s.active)
            slot.active += 1
            unassigned -= 1
            if unassigned == 0:  # the last check started: timings may start
                async with changed:
                    changed.notify_all()
            try:
                checked = await _check(index, ps, slot, scratch, timing, tuned is not None)
                if checked.timed:
                    to_time.append(checked)
                else:
                    finished(checked)
            finally:
                slot.active -= 1
                if index in references:
                    await _checked_against(references[index], unchecked, slots)
                if checks_done() and to_time:
                    say(f"every prediction checked: {len(to_time)} wait for their timing")
                async with changed:
                    changed.notify_all()

    async def time_on(slot: EvalSlot) -> None:
        """Once every check has started: timings of what passed on any slot, by turns the quickest and the slowest
        tests among those waiting (``next_to_time``), as many at once as the slot's checks still running leave of its
        `per_slot` jobs, at least ``TIMINGS_AT_ONCE``, until every passed prediction is timed."""
        async with changed:
            await changed.wait_for(lambda: unassigned == 0)
        if to_time:  # (none under --no-timing, or on the interpreter)
            say(f"{slot.name} times what passed ({len(to_time)} waiting), {TIMINGS_AT_ONCE} at a time, more as "
                "its checks end, each measuring with the device alone, its checks still running paused meanwhile")
        running = 0

        def room() -> bool:  # the slot's jobs at once that its checks leave, at least TIMINGS_AT_ONCE
            return running < max(TIMINGS_AT_ONCE, per_slot - slot.active)

        async def time_one(checked: _Checked) -> None:
            nonlocal running
            try:
                await time_code(slot.evaluator, checked.code, checked.reference, checked.check, checked.score, rounds)
                checked.record.update(checked.score.to_dict(), timed_on=slot.name)
                if tuned is not None:
                    await _time_against_tuned(checked, slot, tuned, rounds)
                finished(checked)
            finally:
                running -= 1
                async with changed:
                    changed.notify_all()

        timings: list[asyncio.Task[None]] = []
        try:
            while True:
                async with changed:
                    await changed.wait_for(lambda: (bool(to_time) and room()) or (checks_done() and not to_time))
                    if not to_time:
                        break
                    checked = next_to_time(to_time, len(timings))
                    to_time.remove(checked)
                    running += 1
                timings.append(asyncio.ensure_future(time_one(checked)))
        except BaseException:
            for task in timings:
                task.cancel()
            await asyncio.gather(*timings, return_exceptions=True)
            raise
        await all_or_none(timings)

    await all_or_none(
        [
            *(check(i, states[i]) for i in _slow_first(lines, references, slots)),
            *(time_on(slot) for slot in slots),
        ]
    )
    records.sort(key=lambda r: r["line"])
    return EvalOutcome(records, list(suite.unmatched), time.perf_counter() - started)


def timing_order(checked: list[_Checked]) -> list[_Checked]:
    """Predictions waiting for a timing, those whose tests ran quickest in their checks first: a timing captures its
    calls by running the tests again, so the quicker they ran, the sooner it is ready to measure."""
    tests_s = lambda c: sum(t.duration_s for t in c.check.tests) if c.check is not None else 0.0
    return sorted(checked, key=lambda c: (tests_s(c), c.record["line"]))


def next_to_time(waiting: list[_Checked], started: int) -> _Checked:
    """The prediction a slot times next, of those `waiting`, after `started` timings: by turns the one whose tests
    ran quickest (``timing_order``: it is soon ready to measure, so the device is kept busy) and the one whose tests
    ran longest. A timing prepares only while no other measures (the pool's ``DeviceShare``), so a slow preparation
    started last is the run's tail, the device idle meanwhile. Their rounds are capped (``eval_slots.BATCH_ROUNDS_S``),
    so one timed early holds the device alone no longer than later. What can still end the timings is a slow check
    started late, whose timing then starts last."""
    order = timing_order(waiting)
    return order[-1] if started % 2 else order[0]


def _slow_first(lines: list[int], references: dict[int, Path], slots: list[EvalSlot]) -> list[int]:
    """The lines to check, their golden files longest first (``reference_costs.longest_first``: those whose own run
    took longest when it last ran here, then the costliest by their text), the predictions of one golden file
    together (its outputs are then forgotten sooner: ``_checked_against``): a golden file that hangs to the time
    limit, or checks for a minute, started late holds up every timing after it. The checks start in this order (the
    slots' semaphore wakes its waiters first come, first served); a line without code, scored at once, goes first."""
    if not slots:
        return lines
    paths = sorted(set(references.values()))
    rank = {path: i for i, path in enumerate(longest_first(paths, slots[0].evaluator.known_reference_seconds(paths)))}
    return sorted(lines, key=lambda i: rank[references[i]] if i in references else -1)


async def _checked_against(reference: Path, unchecked: Counter[Path], slots: list[EvalSlot]) -> None:
    """One more prediction of `reference` checked: once none is left, every slot forgets its run of the reference,
    whose outputs (gigabytes over a suite's references) are not needed by the timings."""
    unchecked[reference] -= 1
    if unchecked[reference] == 0:
        await asyncio.gather(*(slot.evaluator.forget_reference(reference) for slot in slots))


@dataclass
class _Checked:
    """A prediction checked: its record, and what its timing needs where it is to be timed (`timed`)."""

    record: dict[str, Any]
    score: Score | None = None
    check: CheckResult | None = None
    code: str = ""
    reference: Path = Path()

    @property
    def timed(self) -> bool:
        return self.check is not None


async def _check(
    index: int, ps: ProblemState, slot: EvalSlot, scratch: Path, timing: bool, tuned: bool = False
) -> _Checked:
    record: dict[str, Any] = {
        "filename": ps.filename,
        "difficulty": ps.difficulty,
        "slot": slot.name,
        "pass_call": False,
        "pass_exe": False,
        "speedup": None,
    }
    if tuned:  # filled where the prediction is timed (``_time_against_tuned``)
        record.update(dict.fromkeys(VS_TUNED), tuned_reference=None)
    checked = _Checked(record)
    if not ps.solution or not ps.solution.strip():
        record.update(stage="reply", message="the prediction has no code", line=index)
        return checked
    reference = reference_file(ps, scratch)
    score, check = await check_code(slot.evaluator, ps.solution, reference)
    record.update(score.to_dict(), line=index)
    timing = timing and (slot.runtime or {}).get("backend") not in (None, "interpreter")
    if check is not None and score.pass_exe and timing:
        checked.score, checked.check, checked.code, checked.reference = score, check, ps.solution, reference
    return checked


VS_TUNED = ("speedup_vs_tuned", "speedup_vs_tuned_low", "speedup_vs_tuned_high", "speedup_vs_tuned_verdict")


async def _time_against_tuned(checked: _Checked, slot: EvalSlot, tuned: TunedReferences, rounds: int | None) -> None:
    """Time a prediction that was timed against its golden file against that file after the search without a model
    too. Where the search kept the golden file, that is the same reference: the same speedup."""
    assert checked.check is not None and checked.score is not None
    reference = await tuned.of(checked.reference, slot)
    record = checked.record
    record["tuned_reference"] = reference.to_dict()
    if reference.error is not None:  # no tuned reference to time against
        return
    if not reference.improved:
        record.update(zip(VS_TUNED, (record.get(k) for k in _AGAINST_GOLDEN), strict=True))
        return
    score = Score(checked.score.pass_call, checked.score.pass_exe)
    await time_code(slot.evaluator, checked.code, reference.path, checked.check, score, rounds)
    record.update(zip(VS_TUNED, (getattr(score, k) for k in _AGAINST_GOLDEN), strict=True))
    if score.speedup is None:
        record["tuned_timing_message"] = score.message


_AGAINST_GOLDEN = ("speedup", "speedup_low", "speedup_high", "speedup_verdict")


def read_earlier(results: Path) -> dict[int, dict[str, Any]]:
    """The records an interrupted `geak eval` appended to `results`, by prediction line (a torn last line, from a
    kill mid-write, is dropped: that prediction is scored again)."""
    return {r["line"]: r for r in read_records(results, "line") if isinstance(r["line"], int)}
