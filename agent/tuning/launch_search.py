"""LLM-free search over a Triton file's launch configurations: screen wide, confirm narrow.

1. The knobs are found wherever the file sets them (``launch_space``), and a first round of configurations is chosen
   by what the diagnosis says limits the kernel.
2. A screening job (``Evaluator.screen``) compiles them in parallel, runs each on the test's own inputs (outputs
   compared with the original's) and, on a GPU, ranks the correct ones by successive halving over short timings.
3. While the time budget allows, later rounds screen the neighbours of the leaders and the leaders of different
   launch configurations combined, then what earlier rounds did not reach in their time, then configurations not
   tried yet, so that a first round that reached few of its configurations does not end the search with budget
   unspent.
4. Configurations whose screening compiled the very same kernels (a knob of a branch the test never takes changed
   beside one that it does) are one configuration, said by its smallest change: it is ranked, refined and proposed
   once, as the diff with the fewest changed knobs; and a finalist is proposed without the changes a configuration
   screened within ``ALIKE_WITHIN`` of it shows it does not need (a `num_stages 1→2` beside `BLOCK_N 64→16,
   num_warps 1→8` that screened the same without it).
5. The few configurations that beat the original in screening by more than ``SCREEN_GAIN`` are finalists (an
   autotuned kernel's: that beat the best of its own configs pinned, which the first round screens too; they are the
   bar, never finalists themselves, and each later round screens the best of them again, by which its ratios are
   put on the first round's scale; where none does, the best that beats it by ``NEAR_GAIN``): each gets
   the full check against the original and the paired bench. Only a finalist the bench finds significantly faster is
   kept, the fastest of those; otherwise the original stays. Screen timings only rank; they never claim. Where none
   is confirmed and the bench left one undecided although ahead (a busy device can leave even a large speedup
   undecided), it is measured once more if the time allows; only that second
   bench's own verdict can keep it.

The budget is time. Screening gets what one finalist's confirmation leaves (its estimate: the baseline's own check and
bench; a second finalist is confirmed only while time is left), and the first round at least ``FIRST_ROUND_FLOOR`` of
the budget (a confirmation then runs past it). On Triton's CPU interpreter the configurations are screened for
correctness only and the original is kept.
The state after every screening and confirmation is handed to `on_state` (plain JSON), so that a stopped search
resumes where it was (``state``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from geak.evaluator import ScreenedVariant, ScreenResult, is_undecided, tightened_contracts
from geak.evaluator import slowness_summary as diagnosis_summary

from .launch_space import Focus, Space, Variant, focus_of
from .review_notes import atomic_path_notes, definition_note, pinned_note
from .screened_rounds import ScreenedRounds

log = logging.getLogger(__name__)

SCREEN_GAIN = 0.03  # a configuration must beat the original by this much in screening to be a finalist
# Where none does, the best that beats it by this much (the bench's band on graph-replayed calls: less could never be
# confirmed) still gets the confirmation the budget kept for one, which would otherwise go unspent.
NEAR_GAIN = 0.02
ALIKE_WITHIN = 0.01  # a configuration that changes less and screens within this of a finalist is proposed instead
FINALISTS = 2  # at most; one where confirming two would take more than half the budget
FIRST_ROUND = 48  # configurations of the first round on a GPU (the screen's deadline stops it sooner)
LATER_ROUND = 24  # configurations of each later round
CPU_ROUND = 6  # configurations checked on Triton's CPU interpreter (slow)
LEADERS = 3  # the best of a round whose neighbours the next round screens
MIN_ROUND_S = 10.0  # a screening round gets at least this long, or is not started
FIRST_ROUND_FLOOR = 0.4  # of the budget: the first round's time however long confirming is expected to take
SHOWN = 8  # screened configurations listed in a report
CONFIRM_ESTIMATE_S = 20.0  # a finalist's check and bench, where the baseline's own duration is unknown
FIRST_ROUND_SHARE = 0.6  # of the screening time, when later rounds are to follow
ROUND_NAMES = ("first", "second", "third")


class Confirmation(Protocol):
    """What the full check and paired bench say of a finalist (an ``Evaluation`` is one)."""

    ok: bool
    message: str
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    speedup_verdict: str | None

    @property
    def faster(self) -> bool: ...


class SearchBackend(Protocol):
    """The evaluator as the search uses it: screening, and the full check + bench of a finalist against the original."""

    timing: bool

    async def confirm_estimate(self) -> float | None:
        """What confirming one finalist is expected to take (None: unknown); it may prepare the reference for it."""
        ...

    async def screen(self, baseline: str, variants: list[str], deadline_s: float, finalists: int) -> ScreenResult: ...

    async def confirm(self, source: str, note: str, review: list[str]) -> Confirmation:
        """The full check and paired bench of a finalist (`note`: its change; `review`: its notes for a reviewer)."""
        ...

    async def compare(self, source: str, reference: str) -> Confirmation:
        """The paired bench of `source` against `reference` (both passed their checks): the winner against the best
        of an autotuned kernel's own configs pinned."""
        ...


@dataclass
class Finalist:
    """A configuration that beat the original in screening, and what its confirmation said."""

    note: str
    source: str
    screen_ratio: float  # its screen time over the original's in the same screening (ranking only)
    confirmation: Confirmation | None = None
    review: list[str] = field(default_factory=list)  # what its reviewer must hear of that the test cannot show
    # The best own config of each autotuned kernel it changes, pinned: said, and its source ("": it changes none).
    autotune_best: tuple[str, str] = ("", "")

    @property
    def confirmed(self) -> bool:
        c = self.confirmation
        return c is not None and c.ok and c.faster


@dataclass
class SearchResult:
    """The search's outcome: the best confirmed finalist (None: the original stays) and what it took to find it."""

    improved: bool
    summary: str
    best: Finalist | None = None
    finalists: list[Finalist] = field(default_factory=list)
    knobs: int = 0
    screened: int = 0
    correct: int = 0
    rounds: int = 0
    diagnosis: str = ""
    seconds: float = 0.0
    configurations: list[dict[str, Any]] = field(default_factory=list)  # every one screened, the fastest first
    review: list[str] = field(default_factory=list)  # the best's notes for its reviewer (``review_notes``)
    # The best against the best of its autotuned kernels' own configs pinned ("vs your autotune list's best"): the
    # config, speedup, interval and verdict of that paired bench; empty where it changes no autotuned kernel.
    over_autotune_best: dict[str, Any] = field(default_factory=dict)


async def search_launch_configs(
    source: str,
    backend: SearchBackend,
    *,
    budget_s: float,
    device_backend: Mapping[str, Any] | str | None = None,
    kernel: str | None = None,
    focus: Focus = "unknown",
    state: dict[str, Any] | None = None,
    on_event: Callable[[str], None] | None = None,
    on_state: Callable[[dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    seed: int = 0,
) -> SearchResult:
    """Tune the launch configurations of `source` within about `budget_s` seconds. `device_backend`: the evaluator's
    runtime facts (backend and arch: which presets, options and limits apply), or the backend's name alone ("cuda",
    "rocm" or "interpreter"); `kernel` restricts the search to that kernel's launches;
    `focus`: what the baseline's diagnosis says limits it. Raises ValueError for a source that does not parse."""
    search = _Search(source, backend, budget_s, device_backend, kernel, state, on_event, on_state, should_stop)
    return await search.run(focus, seed)


class _Search:
    def __init__(
        self,
        source: str,
        backend: SearchBackend,
        budget_s: float,
        device_backend: Mapping[str, Any] | str | None,
        kernel: str | None,
        state: dict[str, Any] | None,
        on_event: Callable[[str], None] | None,
        on_state: Callable[[dict[str, Any]], None] | None,
        should_stop: Callable[[], bool] | None,
    ):
        self.source = source
        self.backend = backend
        self.started = time.monotonic()
        self.budget_s = budget_s
        self.space = Space(source, device_backend, kernel)
        self.state: dict[str, Any] = state if state is not None else {"rounds": []}
        self.record = ScreenedRounds(self.state.setdefault("rounds", []))
        self._say = on_event or (lambda message: None)
        self._on_state = on_state
        self._should_stop = should_stop or (lambda: False)
        self.diagnosis = ""
        self.finalists = FINALISTS

    @property
    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    @property
    def stopped(self) -> bool:
        return self._should_stop()

    def _save(self) -> None:
        if self._on_state is not None:
            self._on_state(self.state)

    async def run(self, focus: Focus, seed: int) -> SearchResult:
        space = self.space
        if not space.groups and space.set_by_test:
            return self._result(f"no launch configuration to tune: the file sets its {len(space.set_by_test)} "
                                "launch parameter(s) in its test code, which every check keeps as the original's ("
                                + _listed(space.set_by_test) + ")")  # fmt: skip
        if not space.groups:
            return self._result("no launch configuration to tune: every launch's configuration is computed at run "
                                "time or set by the test")  # fmt: skip
        left = f"; {len(space.set_by_test)} set in the test code left as they are" if space.set_by_test else ""
        self._say(f"{space.knob_count} knob(s) in {len(space.groups)} launch configuration(s): "
                  + ", ".join(g.name for g in space.groups) + left)  # fmt: skip
        confirm_s = await self.backend.confirm_estimate() or CONFIRM_ESTIMATE_S
        self.finalists = FINALISTS if FINALISTS * confirm_s <= self.budget_s / 2 else 1
        reserve = confirm_s if self.backend.timing else 0.0  # the first finalist's; the next only while time is left
        if not self.state["rounds"] and not self.stopped:
            limit = FIRST_ROUND if self.backend.timing else CPU_ROUND
            share = FIRST_ROUND_SHARE if self.backend.timing else 1.0
            # A slow original (its cold compiles and tuning are the confirmation's estimate) would leave the first
            # round time for few configurations, if any. A search that screens nothing finds nothing, so the first
            # round gets its share and a confirmation may run past.
            floor = max(MIN_ROUND_S, FIRST_ROUND_FLOOR * self.budget_s) if self.backend.timing else 1.0
            deadline = max(floor, (self.left_s - reserve) * share)
            own = space.own_configs() if self.backend.timing else []
            first = space.first_round(limit, focus, seed)
            if not first:
                return self._result(f"no other configuration to try: its {space.knob_count} knob(s) take no other "
                                    "value the kernel accepts")  # fmt: skip
            await self._round(own + first, deadline, "first round")
        rounds = self.state["rounds"]
        if not rounds:
            if self.stopped:
                return self._result("stopped before the first screening")
            return self._result("no configuration to try could be written into the source (see the log)")
        if not rounds[0]["ok"]:
            return self._result(f"the screening failed: {rounds[0]['message']}")
        if not self.backend.timing:
            return self._result(self._untimed_summary())
        while not self.stopped and self.left_s - reserve >= MIN_ROUND_S:
            later = self._later_round(rounds[0].get("focus", focus), seed)
            if not later:
                break
            before = len(rounds)
            control = self._control()
            await self._round([control, *later] if control else later, self.left_s - reserve,
                              _round_name(len(rounds)), control is not None)  # fmt: skip
            if len(rounds) == before or not rounds[-1]["ok"]:
                break
        if self.stopped:
            return self._result(f"stopped after screening {self.record.counts()[0]} configuration(s)")
        finalists = self._finalists()
        if not finalists:
            return self._result(self._no_finalist_summary())
        for index, finalist in enumerate(finalists, 1):
            if self.stopped or (index > 1 and self.left_s <= 0):
                break
            self._say(f"confirming finalist {index} of {len(finalists)}: {finalist.note} "
                      f"({1 / finalist.screen_ratio:.2f}x in screening)")  # fmt: skip
            finalist.confirmation = await self.backend.confirm(finalist.source, finalist.note, finalist.review)
        confirmed = [f for f in finalists if f.confirmed]
        again = next((f for f in finalists if _undecided_but_ahead(f.confirmation)), None)
        if not confirmed and again is not None and not self.stopped and self.left_s >= confirm_s:
            self._say(f"the bench left {again.note} undecided ({_said(again)}): measuring it once more")
            again.confirmation = await self.backend.confirm(again.source, again.note, again.review)
            confirmed = [again] if again.confirmed else []
        best = max(confirmed, key=lambda f: f.confirmation.speedup or 0.0) if confirmed else None  # type: ignore[union-attr]
        over = await self._over_autotune_best(best) if best is not None and not self.stopped else {}
        return self._result(self._final_summary(best, finalists, over), best, finalists, over)

    async def _over_autotune_best(self, best: Finalist) -> dict[str, Any]:
        """The winner's paired bench against the best own config, pinned, of each autotuned kernel it changes (the
        confirmation's original lets its autotuner choose, which need not be the list's best)."""
        said, reference = best.autotune_best
        if not reference:
            return {}
        self._say(f"timing {best.note} against your autotune list's best ({said})")
        c = await self.backend.compare(best.source, reference)
        if not c.ok or c.speedup is None:
            return {"config": said, "speedup": None, "message": c.message.splitlines()[0][:160] if c.message else ""}
        return {"config": said, "speedup": c.speedup, "low": c.speedup_low, "high": c.speedup_high,
                "verdict": c.speedup_verdict}  # fmt: skip

    async def _round(self, variants: list[Variant], deadline_s: float, label: str, control: bool = False) -> None:
        """Screen `variants` (each rendered; a rewrite that fails is recorded as failed) and record the round;
        `control`: the first is the bar's own config screened again (``_control``)."""
        rendered, kept = [], []
        for variant in variants:
            try:
                rendered.append(self.space.render(variant))
                kept.append(variant)
            except ValueError as e:
                log.warning("could not render %s: %s", self.space.describe(variant), e)
        if not kept:
            return
        self._say(f"screening {len(kept)} configuration(s), {label} ({deadline_s:.0f} s at most)")
        result = await self.backend.screen(self.source, rendered, deadline_s, self.finalists)
        focus = focus_of(result.calls, result.reference_kernels)
        if not self.diagnosis:
            self.diagnosis = diagnosis_summary(result.calls, result.reference_kernels)
        verdicts = []
        for screened in result.variants:
            verdicts.append({"status": screened.status, "ratio": result.ratio_of(screened), "rung": screened.rung,
                             "message": screened.message[:300], "kernels": _kernels_of(screened)})  # fmt: skip
        self.state["rounds"].append(
            {
                "label": label,
                "ok": result.ok,
                "message": result.message,
                "timed": result.timed,
                "variants": [v.to_json() for v in kept],
                "verdicts": verdicts,
                "focus": focus,
                "diagnosis": self.diagnosis,
                **({"control": 0} if control and kept and kept[0] == variants[0] else {}),
            }
        )
        self._save()
        took = f" in {result.duration_s:.0f} s" + (f" ({result.compile_note})" if result.compile_note else "")
        # What the ratios are over: the bench's baseline may differ (its autotuned kernels tune afresh).
        original = f"; the original's calls {result.reference_ms:.4f} ms in screening" if result.reference_ms else ""
        self._say(f"{label}: {result.message}{took}{original}")
        leaders = sorted((v["ratio"], i) for i, v in enumerate(verdicts) if v["ratio"])[:LEADERS]
        if leaders:
            shown = ", ".join(f"{self.space.describe(kept[i])} {1 / ratio:.2f}x" for ratio, i in leaders)
            self._say(f"leaders in screening (the original's time over theirs): {shown}")
        if self._bar() < 1.0:
            self._say(f"a finalist must beat {self._bar_said()}")
        if self.diagnosis and len(self.state["rounds"]) == 1:
            self._say(f"diagnosis: {self.diagnosis} (focus: {focus})")

    def _later_round(self, focus: Focus, seed: int) -> list[Variant]:
        """The next round: the leaders' neighbours (and the leaders of different groups combined) not screened yet,
        then what earlier rounds did not reach in their time (once more), then first-round candidates not tried yet;
        at most ``LATER_ROUND``, none the same as one screened before."""
        reached, unreached = self.record.reach()
        tried = reached | set(unreached)
        leaders = [v for v, _ in self._distinct()[:LEADERS]]
        refined = self.space.refine(leaders, tried, LATER_ROUND, focus) if leaders else []
        again = [v for v, missed in unreached.items() if missed < 2]
        fresh = [v for v in self.space.first_round(len(tried) + LATER_ROUND, focus, seed) if v not in tried]
        return list(dict.fromkeys([*refined, *again, *fresh]))[:LATER_ROUND]

    def _distinct(self) -> list[tuple[Variant, float]]:
        """``ScreenedRounds.ranked``, one entry for the configurations that compiled the very same kernels: the one
        that changes the fewest knobs (the smallest diff), at the best ratio among them (their differences are the
        timing's noise): otherwise two finalists can be one kernel, the second also changing the `num_warps` of a
        branch its test never takes."""
        kernels: dict[Variant, str] = {}
        for variant, verdict in self.record.screened():  # a round that did not run it knows none of its kernels
            kernels[variant] = kernels.get(variant) or verdict.get("kernels") or ""
        found: dict[str, tuple[Variant, float]] = {}
        for variant, ratio in self.record.ranked():
            key = kernels.get(variant) or repr(variant)  # unknown kernels: its own configuration
            best = found.get(key)
            if best is None:
                found[key] = (variant, ratio)
            elif len(self.space.param_changes(variant)) < len(self.space.param_changes(best[0])):
                found[key] = (variant, best[1])
        return list(found.values())

    def _smallest_alike(self, ranked: list[tuple[Variant, float]]) -> list[tuple[Variant, float]]:
        """`ranked` with each configuration said by the one with the fewest changes among those whose changes are some
        of its own and that screened within ``ALIKE_WITHIN`` of it (itself where none does), once, fastest first: the
        same gain, a smaller diff for its reviewer."""
        changes = {v: set(self.space.param_changes(v)) for v, _ in ranked}
        found: dict[Variant, float] = {}
        for variant, ratio in ranked:
            alike = [(v, r) for v, r in ranked if r <= ratio * (1 + ALIKE_WITHIN) and changes[v] <= changes[variant]]
            smallest, at = min(alike, key=lambda item: (len(changes[item[0]]), item[1]))
            found.setdefault(smallest, at)
        return sorted(found.items(), key=lambda item: item[1])

    def _control(self) -> Variant | None:
        """The own config an autotuned kernel's finalists must beat (the bar), to screen again in a later round:
        the original's own time there comes from its autotuner's choice, which may differ from round to round, so
        that leaders ranked over a slower original's time would look faster than those of a round over a faster one."""
        own = [
            (ratio, v) for v, ratio in self.record.first_round_ratios().items() if self.space.own_index(v) is not None
        ]
        best = min(own, key=lambda item: item[0], default=None)
        return best[1] if best is not None and best[0] < 1.0 else None

    def _bar(self) -> float:
        """What a finalist must beat in screening, relative to the original: the original itself, or the best of an
        autotuned kernel's own configs pinned where that is faster (its autotuner's kept choice was not the best)."""
        own = [ratio for v, ratio in self.record.ranked() if self.space.own_index(v) is not None]
        return min([1.0, *own])

    def _finalists(self) -> list[Finalist]:
        if "finalists" not in self.state:
            bar = self._bar()
            new = self._smallest_alike([(v, ratio) for v, ratio in self._distinct() if self.space.own_index(v) is None])
            chosen = [(v, ratio) for v, ratio in new if ratio < bar * (1 - SCREEN_GAIN)][: self.finalists]
            if not chosen:  # the confirmation kept for one would go unspent: the best within the bench's reach
                chosen = [(v, ratio) for v, ratio in new if ratio < bar * (1 - NEAR_GAIN)][:1]
            self.state["finalists"] = [{"variant": v.to_json(), "ratio": ratio} for v, ratio in chosen]
            self._save()
        finalists = []
        for entry in self.state["finalists"]:
            variant = Variant.from_json(entry["variant"])
            review = atomic_path_notes(self.space.source, self.space.param_changes(variant))
            review += tightened_contracts(self.space.source, self.space.param_changes(variant))
            review += [pinned_note(kernel, configs) for kernel, configs in self.space.pinned(variant)]
            review += [definition_note(kernel, options) for kernel, options in self.space.set_at_definition(variant)]
            finalist = Finalist(self.space.describe(variant), self.space.render(variant), entry["ratio"], review=review)
            own = self._own_best(variant)
            if own is not None:
                finalist.autotune_best = (self.space.describe(own), self.space.render(own))
            finalists.append(finalist)
        return finalists

    def _own_best(self, variant: Variant) -> Variant | None:
        """The best screened own config of each autotuned kernel `variant` changes, pinned (None: it changes none, or
        none of their own configs was timed)."""
        best: dict[str, tuple[tuple[str, int], ...]] = {}
        for screened, _ in self.record.ranked():  # fastest first
            if self.space.own_index(screened) is not None:
                ((group, values),) = screened.changes
                best.setdefault(group, values)
        changes = tuple((group, best[group]) for group, _ in variant.changes if group in best)
        return Variant(changes, "own config") if changes else None

    def _untimed_summary(self) -> str:
        screened, correct = self.record.counts()
        statuses = self.record.statuses()
        wrong = statuses.count("wrong")
        failed = sum(s in ("failed", "skipped") for s in statuses)
        unreached = len(self.record.reach()[1])
        late = f"; {unreached} more not run in the time" if unreached else ""
        return (
            f"timing needs a GPU: {screened} launch configuration(s) of {self.space.knob_count} knob(s) were screened "
            f"for correctness only ({correct} correct, {wrong} wrong, {failed} failed or not accepted by the "
            f"compiler{late}); the original is kept"
        )

    def _no_finalist_summary(self) -> str:
        screened, correct = self.record.counts()
        late = len(self.record.reach()[1])
        if not screened:
            return (
                f"no configuration could be screened in the time: the {late} tried were not compiled or run before "
                f"the screening's deadline (a budget of {self.budget_s:.0f} s); a larger budget gives the search a "
                "chance"
            )
        said = f"{late} more were not run in the time" if late else "its launch configuration already suits this device"
        return (
            f"no configuration beat {self._bar_said()} by more than {NEAR_GAIN:.0%} in screening ({screened} "
            f"screened, {correct} correct, over {self.space.knob_count} knob(s)): {said}"
        )

    def _bar_said(self) -> str:
        bar = self._bar()
        if bar >= 1.0:
            return "the original"
        return f"the best of the original's own configs pinned ({1 / bar:.2f}x its autotuner's kept choice)"

    def _final_summary(self, best: Finalist | None, finalists: list[Finalist], over: dict[str, Any]) -> str:
        screened, correct = self.record.counts()
        tally = f"{screened} configuration(s) screened ({correct} correct), {len(finalists)} finalist(s) confirmed"
        if best is None:
            said = "; ".join(f"{f.note}: {_said(f)}" for f in finalists if f.confirmation is not None)
            return f"no finalist was confirmed faster by the full bench ({said}); {tally}"
        c = best.confirmation
        assert c is not None and c.speedup is not None
        return (f"{best.note}: {c.speedup:.3f}x [{c.speedup_low:.3f}, {c.speedup_high:.3f}] faster than the file as it "
                f"runs{over_autotune_said(over)}; {tally}")  # fmt: skip

    def _result(
        self,
        summary: str,
        best: Finalist | None = None,
        finalists: list[Finalist] | None = None,
        over: dict[str, Any] | None = None,
    ) -> SearchResult:
        screened, correct = self.record.counts()
        if self.stopped:
            summary += " (stopped early)"
        return SearchResult(
            improved=best is not None,
            summary=summary,
            best=best,
            finalists=finalists or [],
            knobs=self.space.knob_count,
            screened=screened,
            correct=correct,
            rounds=len(self.state["rounds"]),
            diagnosis=self.diagnosis or next((r.get("diagnosis", "") for r in self.state["rounds"]), ""),
            seconds=time.monotonic() - self.started,
            configurations=self._screened_rows(),
            review=best.review if best is not None else [],
            over_autotune_best=over or {},
        )

    def _screened_rows(self) -> list[dict[str, Any]]:
        """Every screened configuration, for a report (which lists the first ``SHOWN``) and the run's record: the
        fastest in screening first, then those that failed; `rung`: the last rung of the halving each was timed in
        (its ratio is over the original's samples up to it)."""
        rows = [{"change": self.space.describe(variant), "status": verdict["status"], "ratio": verdict.get("ratio"),
                 "rung": verdict.get("rung"), "message": verdict.get("message", "")}
                for variant, verdict in self.record.screened()]  # fmt: skip
        rows.sort(key=lambda row: (row["ratio"] is None, row["ratio"] or 0.0, row["status"] != "ok"))
        return rows


def over_autotune_said(over: dict[str, Any]) -> str:
    """What a report adds of `over` (``SearchResult.over_autotune_best``): ", 1.250x [1.220, 1.280] vs your autotune
    list's best (…)"; "" where the winner changes no autotuned kernel."""
    if not over:
        return ""
    if over.get("speedup") is None:
        return f", not timed against your autotune list's best ({over['config']}: {over.get('message', '')})"
    return (f", {over['speedup']:.3f}x [{over['low']:.3f}, {over['high']:.3f}] vs your autotune list's best "
            f"({over['config']}; {over['verdict']})")  # fmt: skip


def _kernels_of(screened: ScreenedVariant) -> str:
    """What a screened configuration compiled, as one string of its kernels' hashes ("" where one is unknown)."""
    hashes = sorted(k.hash for k in screened.kernels)
    return "+".join(hashes) if hashes and all(hashes) else ""


def _round_name(index: int) -> str:
    """The name of the round after `index` rounds: "second round", "third round", "round 4"."""
    return f"{ROUND_NAMES[index]} round" if index < len(ROUND_NAMES) else f"round {index + 1}"


def _said(finalist: Finalist) -> str:
    c = finalist.confirmation
    if c is None:
        return "not confirmed"
    if not c.ok:
        return c.message.splitlines()[0][:160] if c.message else "failed"
    if c.speedup is not None:
        return f"{c.speedup:.3f}x [{c.speedup_low:.3f}, {c.speedup_high:.3f}]"
    return "not timed"


def _undecided_but_ahead(c: Confirmation | None) -> bool:
    """Did the bench leave a correct finalist undecided while its speedup was above 1 (worth one more bench)?"""
    return c is not None and c.ok and is_undecided(c.speedup_verdict) and (c.speedup or 0.0) > 1.0


def _listed(items: list[str], shown: int = 3) -> str:
    """The first `shown` of `items`, and how many more."""
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more
