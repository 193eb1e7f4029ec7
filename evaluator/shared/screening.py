"""The plan of a screening job, as both sides read it: how long it may take and how it narrows its variants.

A screening job runs many variants of a file's launch configuration on the test's own inputs (the caller compares
their outputs) and ranks them by short timings, by successive halving: every variant still in the race is timed a few
samples, the slower half is dropped, the samples double, until the finalists remain. Screen timings only rank: no
speed is ever claimed from them (a finalist is confirmed by the full check and the paired bench).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ScreenPlan:
    deadline_s: float  # seconds from the job's start: past it no variant is compiled, run or timed any more
    finalists: int  # the halving stops when this many variants (the reference aside) are left
    first_samples: int = 3  # timed samples of each variant in the first rung; doubled at each further rung
    rep_ms: float = 5.0  # device time of one sample of a call timed one by one (a flushed timing)
    compile_workers: int = 8  # processes compiling the variants in parallel
    timing_share: float = 0.35  # on a GPU, the part of the deadline kept for timing (variants stop running before)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScreenPlan:
        """The plan a job was sent; ValueError for counts or times out of range."""
        plan = cls(
            float(data["deadline_s"]),
            int(data["finalists"]),
            int(data["first_samples"]),
            float(data["rep_ms"]),
            int(data["compile_workers"]),
            float(data["timing_share"]),
        )
        if plan.deadline_s <= 0 or plan.finalists < 1 or plan.first_samples < 1 or plan.rep_ms <= 0:
            raise ValueError(f"a screening plan out of range: {plan}")
        if not 0 <= plan.timing_share < 1:
            raise ValueError(f"timing_share {plan.timing_share} is not in [0, 1)")
        if not 1 <= plan.compile_workers <= 64:
            raise ValueError(f"compile_workers {plan.compile_workers} is not in 1..64")
        return plan


def survivors(ranked: int, finalists: int) -> int:
    """How many of `ranked` timed variants go on to the next rung: the faster half (rounded up), at least the
    finalists."""
    return min(ranked, max(finalists, (ranked + 1) // 2))
