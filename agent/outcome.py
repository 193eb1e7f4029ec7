"""The result of an optimization run, as plain data (JSON for `--json`, the editor, and caches)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from math import comb
from typing import Any

from .memory import Candidate


@dataclass
class OptimizeResult:
    file: str
    improved: bool
    message: str
    timing: bool
    runtime: dict[str, Any]
    baseline_ms: float | None
    best: Candidate | None
    new_text: str | None
    diff: str
    candidates: list[Candidate]
    pass_at_k: dict[int, float] = field(default_factory=dict)
    call_accuracy: float | None = None
    exec_accuracy: float | None = None
    # Token counts of the whole run, resumed runs included: prompt, completion (reasoning included), reasoning and
    # cached (prompt) tokens and requests, then the same per role ("generator.prompt_tokens", "optimizer.", ...).
    usage: dict[str, int] = field(default_factory=dict)
    usage_this_run: dict[str, int] = field(default_factory=dict)
    checkpoint: str = ""
    stopped: bool = False
    search: dict[str, Any] = field(default_factory=dict)  # the launch search's tally and the baseline's diagnosis
    review: list[str] = field(default_factory=list)  # the best's notes for its reviewer: what the test cannot show

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["pass_at_k"] = {str(k): v for k, v in self.pass_at_k.items()}
        return data


def pass_at_k(n: int, c: int) -> dict[int, float]:
    """Unbiased pass@k over n independent chains of which c passed (Chen et al.), for k = 1..n."""
    return {k: 1.0 - (comb(n - c, k) / comb(n, k) if n - c >= k else 0.0) for k in range(1, n + 1)}
