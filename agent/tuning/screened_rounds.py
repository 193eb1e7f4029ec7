"""What the launch search's screening rounds found, read from their record (plain JSON, the state a stopped search
resumes from): which configurations a round reached, their ratios to the original on the first round's scale, and the
counts a report gives."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .launch_space import Variant

UNREACHED = frozenset({"not run", "not timed"})  # a screened configuration its round had no time for


@dataclass(frozen=True)
class ScreenedRounds:
    """The rounds screened so far, in order (the search appends to `rounds`); each holds its configurations, their
    verdicts and, for a later round, the index of its control (the bar's own config screened again)."""

    rounds: list[dict[str, Any]]

    def reach(self) -> tuple[set[Variant], dict[Variant, int]]:
        """(the configurations a round reached, those none did -> how many rounds missed each)."""
        reached: set[Variant] = set()
        missed: dict[Variant, int] = {}
        for variant, verdict in self.screened():
            if verdict["status"] in UNREACHED:
                missed[variant] = missed.get(variant, 0) + 1
            else:
                reached.add(variant)
        return reached, {v: n for v, n in missed.items() if v not in reached}

    def screened(self) -> Iterator[tuple[Variant, dict[str, Any]]]:
        """Every configuration each round screened, with its verdict there, round after round (a later round's
        control, screened again, only in the first)."""
        for r in self.rounds:
            for index, (data, verdict) in enumerate(zip(r["variants"], r["verdicts"], strict=False)):
                if index != r.get("control"):
                    yield Variant.from_json(data), verdict

    def ranked(self) -> list[tuple[Variant, float]]:
        """Every correct, timed configuration screened so far, fastest relative to the original first, each round's
        ratios on the first round's scale (``scale``)."""
        found: dict[Variant, float] = {}
        for r in self.rounds:
            scale = self.scale(r)
            for data, verdict in zip(r["variants"], r["verdicts"], strict=False):
                if verdict["status"] == "ok" and verdict.get("ratio"):
                    variant, ratio = Variant.from_json(data), verdict["ratio"] * scale
                    found[variant] = min(found.get(variant, ratio), ratio)
        return sorted(found.items(), key=lambda item: item[1])

    def first_round_ratios(self) -> dict[Variant, float]:
        """The first round's correct, timed configurations and their ratios to the original there."""
        first = self.rounds[0]
        pairs = zip(first["variants"], first["verdicts"], strict=False)
        return {Variant.from_json(data): v["ratio"] for data, v in pairs if v["status"] == "ok" and v.get("ratio")}

    def scale(self, round_: dict[str, Any]) -> float:
        """What puts a later round's ratios on the first round's scale: its control's ratio in the first round over
        its ratio in this one (1 where the round has none, or it was not timed there)."""
        index = round_.get("control")
        if index is None or round_ is self.rounds[0]:
            return 1.0
        verdict = round_["verdicts"][index] if index < len(round_["verdicts"]) else {}
        before = self.first_round_ratios().get(Variant.from_json(round_["variants"][index]))
        now = verdict.get("ratio") if verdict.get("status") == "ok" else None
        return before / now if before and now else 1.0

    def statuses(self) -> list[str]:
        """Every screened configuration's status, round after round ("not run": out of time); a later round's
        control is counted once, in the first."""
        return [verdict["status"] for _, verdict in self.screened()]

    def counts(self) -> tuple[int, int]:
        """(configurations screened: run, whatever came of it; those correct). One a round did not reach is counted
        where a later round reached it."""
        ran = [status for status in self.statuses() if status not in UNREACHED]
        return len(ran), sum(status in ("ok", "same") for status in ran)
