"""The agent's memory: every candidate with its verdict, timing, reflection and strategy, and each chain's state.

Plain dataclasses that round-trip through JSON, so a run can be checkpointed at any moment and resumed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Origin = Literal["original", "generate", "reflect", "optimize", "search"]


@dataclass
class Evaluation:
    """What the evaluator said of one candidate (plain data from `CheckResult`/`BenchResult`)."""

    ok: bool
    stage: str
    message: str
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    timed: bool = False
    latency_ms: float | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_verdict: str | None = None  # the evaluator's: "faster", "slower" or "within noise (±m%)"
    pct_peak_bw: float | None = None
    pct_peak_flops: float | None = None
    called: bool = False  # ran without raising (GEAK's call accuracy)
    notes: list[str] = field(default_factory=list)  # the check's caveats beyond its summary (the reflector sees them)

    @property
    def faster(self) -> bool:
        """Significantly faster than the original: the speedup interval clears the device's noise floor."""
        return self.speedup_verdict == "faster"

    @property
    def sort_key(self) -> float:
        return self.latency_ms if self.latency_ms is not None else float("inf")


@dataclass
class Candidate:
    id: str
    chain: int
    round: int
    origin: Origin
    code: str  # the kernel section (or, for search candidates, the whole rewritten file)
    parent: str | None = None
    evaluation: Evaluation | None = None
    reflection: str = ""
    strategy: str = ""
    note: str = ""  # why no code came out of a reply, or the launch parameters of a search candidate
    review: list[str] = field(default_factory=list)  # what its reviewer must hear that the test cannot show

    @property
    def passed(self) -> bool:
        return self.evaluation is not None and self.evaluation.ok


@dataclass
class ChainState:
    """One independent chain: the line of code it is working on and how many fixes that line has had."""

    chain: int
    round: int = 0
    current: str | None = None  # candidate id
    debug_count: int = 0
    trapped: int = 0  # times the debugging trap fired
    last_strategy: str = ""
    aim: str = ""  # the bottleneck this chain is aimed at, one of several chains' (``chain_aims``)


@dataclass
class ProblemMemory:
    """Everything about one problem (one Triton file): its candidates and chains."""

    file: str
    original_code: str
    candidates: list[Candidate] = field(default_factory=list)
    chains: list[ChainState] = field(default_factory=list)
    baseline: Evaluation | None = None
    completed_rounds: int = 0
    search_done: bool = False
    original_text: str = ""  # the whole original file (`original_code` is its kernel section)
    search_state: dict[str, Any] = field(default_factory=dict)  # the launch search's rounds and finalists (resume)

    def get(self, candidate_id: str | None) -> Candidate | None:
        return next((c for c in self.candidates if c.id == candidate_id), None)

    def passing(self) -> list[Candidate]:
        """Correct candidates, fastest first (untimed ones last, in order of creation)."""
        ok = [c for c in self.candidates if c.passed and c.origin != "original"]
        return sorted(ok, key=lambda c: c.evaluation.sort_key if c.evaluation else float("inf"))

    def best(self) -> Candidate | None:
        """The fastest correct candidate that is significantly faster than the original, if any."""
        timed = [c for c in self.passing() if c.evaluation and c.evaluation.timed]
        faster = [c for c in timed if c.evaluation.faster]
        return faster[0] if faster else None

    def next_id(self, chain: int) -> str:
        return f"c{chain}.{sum(1 for c in self.candidates if c.chain == chain) + 1}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemMemory:
        def evaluation(d: dict[str, Any] | None) -> Evaluation | None:
            return Evaluation(**d) if d else None

        candidates = [
            Candidate(**{**c, "evaluation": evaluation(c.get("evaluation"))}) for c in data.get("candidates", [])
        ]
        return cls(
            file=data["file"],
            original_code=data["original_code"],
            candidates=candidates,
            chains=[ChainState(**s) for s in data.get("chains", [])],
            baseline=evaluation(data.get("baseline")),
            completed_rounds=data.get("completed_rounds", 0),
            search_done=data.get("search_done", False),
            search_state=data.get("search_state", {}),
        )
