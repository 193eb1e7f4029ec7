"""Score one piece of code for one problem through the evaluator: GEAK's call and execution verdicts, and the
speedup over the golden code where a GPU is visible."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from geak.evaluator import BadInput, CheckResult, Evaluator

from ...evaluation import from_bench, from_check
from .problem import ProblemState, reference_text


@dataclass
class Score:
    """`reference_error`: the golden code does not pass its own test here, so the problem cannot be scored."""

    pass_call: bool
    pass_exe: bool
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_verdict: str | None = None  # faster, slower, within noise (±m%) or undecided (...)
    stage: str = ""
    message: str = ""
    reference_error: str | None = None
    caveats: tuple[str, ...] = ()  # what the check could not judge (e.g. reference outputs it never writes)
    timing_s: float | None = None  # how long its timing took (import, capture, rounds), where it was timed
    alone_s: float | None = None  # how long of it the timing had the device alone (its slot's other jobs paused)
    reference_ms: float | None = None  # the golden file's timed calls, their medians summed (how small they are)
    timed_rounds: int | None = None  # the rounds its speedup was judged on (both orders together, where timed twice)
    phases_s: dict[str, float] | None = None  # of alone_s: preparing the timers and the rounds, as the job reported
    timing_message: str | None = None  # the timing's own account (each order's ratio, where timed both ways)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reference_file(ps: ProblemState, folder: Path) -> Path:
    """A path the evaluator can read the problem's reference from: the golden file, or a composed copy."""
    if ps.path:
        return Path(ps.path)
    text = reference_text(ps)
    path = folder / hashlib.sha256(text.encode()).hexdigest()[:16] / Path(ps.filename).name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


async def score_code(
    evaluator: Evaluator, code: str, reference: Path, *, timing: bool, rounds: int | None = None
) -> Score:
    """Check `code` against `reference` (its kernel code with the reference's test); time it if it passes and
    `timing` (a GPU is visible). A failed timing leaves the verdicts as they are, without a speedup."""
    score, check = await check_code(evaluator, code, reference)
    if check is not None and score.pass_exe and timing:
        await time_code(evaluator, code, reference, check, score, rounds)
    return score


async def check_code(evaluator: Evaluator, code: str, reference: Path) -> tuple[Score, CheckResult | None]:
    """The call and execution verdicts of `code` against `reference`, and the check they came from (None: the
    reference itself does not pass its test here, and the score says so)."""
    try:
        check = await evaluator.check(source=code, against=reference)
    except BadInput as e:
        return Score(False, False, stage="reference", message=str(e), reference_error=str(e)), None
    ev = from_check(check)
    return Score(ev.called, ev.ok, stage=ev.stage, message=ev.message, caveats=check.caveats), check


async def time_code(
    evaluator: Evaluator, code: str, reference: Path, check: CheckResult, score: Score, rounds: int | None = None
) -> None:
    """Time `code` that passed `check` against `reference` and put the speedup into `score` (a failed timing: its
    message, the verdicts unchanged)."""
    bench = await evaluator.bench(source=code, against=reference, check_first=False, rounds=rounds)
    score.timing_s = round(bench.duration_s, 2)
    score.alone_s = round(bench.alone_s, 3)
    score.phases_s = {k: round(v, 3) for k, v in bench.phases_s.items()} or None
    if bench.reference_calls:
        score.reference_ms = sum(c.median_ms for c in bench.reference_calls)
    timed = from_bench(check, bench, None)
    if timed.ok and timed.speedup is not None:
        score.speedup, score.speedup_low, score.speedup_high = timed.speedup, timed.speedup_low, timed.speedup_high
        score.speedup_verdict = timed.speedup_verdict
        score.timed_rounds = bench.speedup.rounds if bench.speedup else None
        score.timing_message = bench.message
        score.stage = "perf"
    else:
        score.message = timed.message
