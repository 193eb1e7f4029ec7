"""Batch runs over a suite (`geak run`): the GEAK loop on every selected problem, spread over the evaluation slots
(one warm worker pool per GPU, interpreter pools without a GPU, or Ray actors), with model calls of many problems
overlapping evaluation (asyncio).

Outputs in `output_path`: `results.jsonl` (one GEAK-format line per finished problem, appended and synced as it
finishes, so a crash or Ctrl-C loses no finished problem; `resume` skips them), `problems/` (each problem's agent
checkpoints, from which an interrupted problem resumes), `run.json` (settings and evaluation slots with their
devices), `summary.json` and `scaling.png`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geak.evaluator import BadInput, TritonFileError

from .. import checkpoint
from ..config import AgentConfig
from ..evaluation import CandidateEvaluator
from ..llm import ChatModel, LLMError, ModelUnusable
from ..loop import GeakAgent, ProgressEvent
from ..outcome import OptimizeResult
from ..retrieval import KernelCorpus
from ..tasks import all_or_none
from ..tuning.launch_search import FINALISTS
from . import metrics
from .dataloaders import Dataloader, ProblemError, ProblemState, reference_file
from .eval_slots import EvalSlot, batch_eval_options, local_slots
from .records_file import append_record, read_records, rewrite_records
from .run_config import RunConfig
from .scaling_plot import plot_scaling

log = logging.getLogger(__name__)
RESULTS, SUMMARY, PLOT, RUN_INFO = "results.jsonl", "summary.json", "scaling.png", "run.json"
MODEL_ORIGINS = ("generate", "reflect", "optimize")


class BatchError(ValueError):
    """A batch that cannot start (bad selection, an earlier run's results in the way)."""


@dataclass(frozen=True)
class BatchEvent:
    """kind: slot | start | problem_start | candidate | problem_done | note."""

    kind: str
    message: str
    problem: str | None = None
    slot: str | None = None
    done: int = 0
    budget: int = 0
    record: dict[str, Any] | None = None


@dataclass
class BatchOutcome:
    output: Path
    problems: int
    ran: int  # problems finished by this invocation (the rest were finished before a resume)
    wall_s: float
    summary: dict[str, Any]
    curves: list[dict[str, Any]]
    slots: list[str] = field(default_factory=list)
    plot: Path | None = None

    @property
    def problems_per_hour(self) -> float | None:
        return self.ran / self.wall_s * 3600 if self.ran and self.wall_s > 0 else None


def select_problems(run: RunConfig, loader: Dataloader) -> list[ProblemState]:
    """`target_kernels` (by file name), then GEAK's slice `start_idx`, `datalen`."""
    states = list(loader.problem_states)
    if run.target_kernels is not None:
        known = {ps.filename for ps in states}
        unknown = sorted(set(run.target_kernels) - known)
        if unknown:
            raise BatchError(f"target_kernels not in the suite: {', '.join(unknown)}")
        states = [ps for ps in states if ps.filename in set(run.target_kernels)]
    end = None if run.datalen is None else run.start_idx + run.datalen
    chosen = states[run.start_idx : end]
    if not chosen:
        raise BatchError(f"no problem selected: start_idx {run.start_idx} of {len(states)} problems")
    names = [Path(ps.filename).stem for ps in chosen]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise BatchError(f"problem file names must be unique (checkpoints are named by them): {', '.join(duplicates)}")
    return chosen


class BatchRun:
    def __init__(
        self,
        run: RunConfig,
        agent: AgentConfig,
        loader: Dataloader,
        *,
        resume: bool = False,
        progress: Callable[[BatchEvent], None] | None = None,
    ):
        self.run = run
        self.agent = agent
        self.loader = loader
        self.resume = resume
        self.progress = progress
        self.out = Path(agent.output_path)
        self.model: ChatModel | None = None
        self.corpus: KernelCorpus | None = None
        self._write_lock = asyncio.Lock()

    def _emit(self, kind: str, message: str, **kw: Any) -> None:
        log.info(message)
        if self.progress is not None:
            self.progress(BatchEvent(kind, message, **kw))

    async def execute(self) -> BatchOutcome:
        problems = select_problems(self.run, self.loader)
        results = self.out / RESULTS
        earlier = read_records(results, "filename")
        if earlier and not self.resume:
            raise BatchError(
                f"{results} holds {len(earlier)} result(s) of an earlier run: continue it with --resume, "
                "or choose another output_path"
            )
        if earlier or results.exists():  # drop a line torn by a crash, so appends start on a line of their own
            rewrite_records(results, earlier)
        finished = {r["filename"] for r in earlier}
        pending = [ps for ps in problems if ps.filename not in finished]
        self.out.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        slots = self._slots()
        try:
            described = [await slot.describe() for slot in slots]
            for line in described:
                self._emit("slot", f"evaluator {line}")
            self._write_run_info(problems, described)
            self._emit(
                "start",
                f"{len(problems)} problem(s), {len(pending)} to run ({self.run.mode} mode), {len(slots)} evaluator(s)",
                budget=len(problems),
                done=len(problems) - len(pending),
            )
            self.model = ChatModel(self.agent) if self.agent.model_configured else None
            if self.model is not None and self.agent.one_shot:
                self.corpus = KernelCorpus.load(self.agent.corpus_path)
            await self._run_all(pending, slots)
        finally:
            await asyncio.gather(*(slot.evaluator.aclose() for slot in slots), return_exceptions=True)
            if self.model is not None:
                await self.model.aclose()
            if self.run.ray_address:
                from .ray_evaluation import shutdown_ray

                shutdown_ray(self.run.ray_address)
        wall = time.perf_counter() - started
        return self._finish(problems, len(pending), wall, described)

    def _slots(self) -> list[EvalSlot]:
        if self.run.ray_address:
            from .ray_evaluation import ray_slots

            return ray_slots(self.run.ray_address, batch_eval_options(self.agent, "auto", None), self.run.workers)
        return local_slots(self.run, self.agent)

    def _write_run_info(self, problems: list[ProblemState], slots: list[str]) -> None:
        info = {
            "run": self.run.model_dump(mode="json"),
            "agent": self.agent.to_public_dict(),
            "problems": [ps.filename for ps in problems],
            "evaluators": slots,
        }
        (self.out / RUN_INFO).write_text(json.dumps(info, indent=1))

    async def _run_all(self, pending: list[ProblemState], slots: list[EvalSlot]) -> None:
        on_gpus = bool(slots) and slots[0].gpu is not None
        per_slot = max(self.run.jobs_per_gpu if on_gpus else 1, 2 if self.model is not None else 1)
        limit = asyncio.Semaphore(self.run.concurrency or len(slots) * per_slot)

        async def one(ps: ProblemState) -> None:
            async with limit:
                slot = min(slots, key=lambda s: s.active)
                slot.active += 1
                try:
                    record = await self._solve(ps, slot)
                finally:
                    slot.active -= 1
                await self._append(record)
                verdict = "pass" if record["pass_exe"] else "call only" if record["pass_call"] else "fail"
                speed = f", {record['speedup']:.3f}x" if record.get("speedup") else ""
                why = f" ({record['error'].splitlines()[0][:160]})" if record.get("error") else ""
                self._emit(
                    "problem_done",
                    f"{ps.filename}: {verdict}{speed} on {slot.name} in {record['wall_s']:.0f} s{why}",
                    problem=ps.filename,
                    slot=slot.name,
                    record=record,
                )

        await all_or_none(one(ps) for ps in pending)

    async def _append(self, record: dict[str, Any]) -> None:
        async with self._write_lock:
            append_record(self.out / RESULTS, record)

    def _budget(self) -> int:
        cfg = self.agent
        llm = cfg.max_iteration * cfg.parallel * cfg.descendant_num if self.model is not None else 0
        return llm + (FINALISTS if cfg.search or self.model is None else 0)

    async def _solve(self, ps: ProblemState, slot: EvalSlot) -> dict[str, Any]:
        started = time.perf_counter()
        generate = self.run.mode == "generate"
        record = _base_record(ps, self.run.mode, slot)
        budget, done = self._budget(), 0
        self._emit("problem_start", f"{ps.filename} → {slot.name}", problem=ps.filename, slot=slot.name, budget=budget)

        def on_progress(event: ProgressEvent) -> None:
            nonlocal done
            if event.kind == "candidate":
                done += 1
                self._emit("candidate", event.message, problem=ps.filename, slot=slot.name, done=done, budget=budget)

        candidates: CandidateEvaluator | None = None
        try:
            reference = reference_file(ps, self.out / "references")
            cfg = self.agent.model_copy(update={"output_path": self.out / "problems"})
            candidates = CandidateEvaluator(slot.evaluator, reference)
            agent = GeakAgent(
                cfg,
                candidates,
                self.model,
                self.corpus,
                progress=on_progress,
                instruction=ps.instruction if generate else None,
            )
            resume = self.resume and checkpoint.paths_for(cfg.output_path, reference).latest.exists()
            result = await agent.optimize(resume=resume)
            await self._fill(record, result, candidates, generate)
        except (BadInput, ProblemError, TritonFileError) as e:
            record.update(error=str(e), reference_error=True)
        except ModelUnusable:
            raise
        except LLMError as e:
            record["error"] = f"model: {e}"
        except Exception as e:  # a bug must not take the other problems down; it is recorded and logged
            log.exception("problem %s failed", ps.filename)
            record["error"] = f"{type(e).__name__}: {e}"
        finally:
            if candidates is not None:
                await candidates.release()
        record["wall_s"] = round(time.perf_counter() - started, 2)
        return record

    async def _fill(
        self, record: dict[str, Any], result: OptimizeResult, candidates: CandidateEvaluator, generate: bool
    ) -> None:
        produced = [c for c in result.candidates if c.origin != "original"]
        model_made = [c for c in produced if c.origin in MODEL_ORIGINS]
        pick = result.best
        passed_any = any(c.passed for c in model_made)
        if pick is None and generate:
            passing = sorted((c for c in model_made if c.passed), key=lambda c: c.evaluation.sort_key)
            pick = passing[0] if passing else None
            if pick is not None and result.timing and pick.evaluation.timed:  # screened with few rounds: re-measure
                pick.evaluation = await candidates.evaluate(pick.code, rounds=self.agent.bench_rounds)
        runtime = result.runtime or {}
        record.update(
            device=runtime.get("device"),
            backend=runtime.get("backend"),
            baseline_ms=result.baseline_ms,
            candidates=len(produced),
            improved=result.improved,
            message=result.message,
            history=metrics.history(result.candidates),
        )
        if generate:
            last = model_made[-1] if model_made else None
            chosen = pick or last
            record.update(
                predict=chosen.code if chosen else None,
                pass_call=any(c.evaluation and c.evaluation.called for c in model_made),
                pass_exe=passed_any,
            )
        else:  # the file GEAK hands back: the best candidate, or the unchanged original
            record.update(
                predict=pick.code if pick else candidates.original.kernel_section, pass_call=True, pass_exe=True
            )
            if pick is None and result.timing:
                record.update(speedup=1.0, speedup_low=1.0, speedup_high=1.0)
        if pick is not None and pick.passed and pick.evaluation.speedup is not None:
            ev = pick.evaluation
            record.update(
                speedup=ev.speedup,
                speedup_low=ev.speedup_low,
                speedup_high=ev.speedup_high,
                speedup_verdict=ev.speedup_verdict,
            )
        if model_made:
            chains = sorted({c.chain for c in model_made})
            record.update(
                chains=self.agent.parallel,
                chains_passed=sum(any(c.passed for c in model_made if c.chain == chain) for chain in chains),
            )

    def _finish(self, problems: list[ProblemState], ran: int, wall: float, slots: list[str]) -> BatchOutcome:
        selected = {ps.filename for ps in problems}
        records = [r for r in read_records(self.out / RESULTS, "filename") if r["filename"] in selected]
        summary = metrics.summarize(records)
        curves = metrics.iteration_curves(records)
        summary.update(wall_s=round(wall, 1), ran=ran, evaluators=slots)
        if ran and wall > 0:
            summary["problems_per_hour"] = round(ran / wall * 3600, 1)
        (self.out / SUMMARY).write_text(json.dumps({"summary": summary, "curves": curves}, indent=1))
        plot = None
        if curves:
            title = f"{self.run.suite or self.run.dataloader}: {len(records)} problems, {self.run.mode} mode"
            plot = plot_scaling(curves, self.out / PLOT, title)
        return BatchOutcome(self.out, len(problems), ran, wall, summary, curves, slots, plot)


def _base_record(ps: ProblemState, mode: str | None, slot: EvalSlot) -> dict[str, Any]:
    """GEAK's result keys first (instruction, label, filename, test_code, predict, speedup), then ours."""
    return {
        "instruction": ps.instruction,
        "label": ps.label,
        "filename": ps.filename,
        "test_code": ps.test_code,
        "predict": None,
        "speedup": None,
        "pass_call": False,
        "pass_exe": False,
        "difficulty": ps.difficulty,
        "mode": mode,
        "slot": slot.name,
        "gpu": slot.gpu or (slot.runtime or {}).get("visible"),
        "error": None,
        "reference_error": False,
    }
