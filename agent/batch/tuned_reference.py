"""The golden file after the search without a model (`geak eval --tuned-reference`): a prediction's speedup over it
credits only what tuning the golden file's launches alone does not reach (a block-size sweep is not the model's
skill). One search per golden file, on the first slot that times a prediction of it, kept for the others."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path

from geak.evaluator import BadInput, TritonFileError

from ..config import AgentConfig
from ..evaluation import CandidateEvaluator
from ..loop import GeakAgent
from .eval_slots import EvalSlot


@dataclass(frozen=True)
class TunedReference:
    """`path`: the golden file after the search (the golden file itself where the search kept it: `improved`
    False); `summary`: the search's own account of what it found; `error`: why there is none (the search could not
    run)."""

    path: Path
    improved: bool
    summary: str
    seconds: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        said = {"improved": self.improved, "summary": self.summary, "seconds": self.seconds}
        return said | ({"error": self.error} if self.error is not None else {})


class TunedReferences:
    """Each golden file's search, run once (a second prediction of the same file waits for the first's search)."""

    def __init__(self, agent: AgentConfig, folder: Path):
        self.agent = agent
        self.folder = folder
        self._searches: dict[Path, asyncio.Task[TunedReference]] = {}

    def of(self, reference: Path, slot: EvalSlot) -> asyncio.Task[TunedReference]:
        """The search of `reference` (started on `slot` where none has started)."""
        if reference not in self._searches:
            self._searches[reference] = asyncio.ensure_future(self._search(reference, slot))
        return self._searches[reference]

    async def _search(self, reference: Path, slot: EvalSlot) -> TunedReference:
        key = hashlib.sha256(reference.read_bytes()).hexdigest()[:16]
        config = self.agent.model_copy(update={"output_path": self.folder / "runs" / key, "search": True})
        candidates: CandidateEvaluator | None = None
        try:
            candidates = CandidateEvaluator(slot.evaluator, reference)
            result = await GeakAgent(config, candidates).optimize()
        except (BadInput, TritonFileError) as e:  # the golden file passed as a reference, but not as a file to tune
            return TunedReference(reference, False, "", error=str(e))
        finally:
            if candidates is not None:
                await candidates.release()
        seconds = (result.search or {}).get("seconds")
        summary = (result.search or {}).get("summary") or result.message
        if not result.improved or not result.new_text:
            return TunedReference(reference, False, summary, seconds)
        tuned = self.folder / key / reference.name
        tuned.parent.mkdir(parents=True, exist_ok=True)
        tuned.write_text(result.new_text)
        return TunedReference(tuned, True, summary, seconds)
