"""The GEAK loop: Generator → Evaluator → Reflector → Optimizer, over `parallel` chains and `max_iteration` rounds
(the model's part of a round: ``model_steps``), then the LLM-free launch-configuration search (``tuning``: the
default when no model is configured, and a final polish).

Driven from asyncio: LLM calls of different chains overlap, evaluations queue on the evaluator's worker pool.
Progress goes to a callback; `stop()` (or cancelling the task) ends the run cleanly with its checkpoint kept.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from geak.evaluator import BadInput

from . import checkpoint, prompts
from .config import AgentConfig
from .evaluation import CandidateEvaluator
from .file_edit import merged_file, unified_diff
from .knowledge import for_code, knowledge_for
from .llm import ChatModel
from .memory import Candidate, ChainState, Evaluation, ProblemMemory
from .model_steps import ModelSteps
from .outcome import OptimizeResult, pass_at_k
from .retrieval import KernelCorpus
from .run_memory import starting_memory
from .tasks import all_or_none
from .tuning.launch_search import over_autotune_said, search_launch_configs
from .tuning.launch_space import focus_of

log = logging.getLogger(__name__)
WAITING_REPORT_S = 15.0  # how often a `waiting` progress event says how long the model has been thinking
# A finalist's paired benches, counted in the original's own bench: each times both sides, and a speedup under 1.25x
# is timed in both orders.
CONFIRM_BENCHES = 3.0


@dataclass(frozen=True)
class ProgressEvent:
    kind: str  # start | round | waiting | candidate | search | final | done
    message: str
    chain: int | None = None
    round: int | None = None
    candidate: str | None = None
    best_speedup: float | None = None


ProgressCallback = Callable[[ProgressEvent], None]


@dataclass
class _Run:
    memory: ProblemMemory
    ctx: prompts.Context
    store: checkpoint.Checkpoint
    usage_before: dict = field(default_factory=dict)
    search: dict = field(default_factory=dict)  # the launch search's tally, for the result


class GeakAgent:
    """Optimizes one Triton file. `model` None runs the LLM-free search only. `kernel` names the one
    `@triton.jit` kernel to work on (the prompts ask for it, the search tunes only its launches); None = all.

    With `instruction` (generate mode, the paper's setting) the model writes the kernel code from the task's
    instruction; the original file is only the reference (its test is attached to the candidates, its code is
    never shown), and the launch-parameter search tunes the model's fastest correct candidate, if any."""

    def __init__(
        self,
        config: AgentConfig,
        candidates: CandidateEvaluator,
        model: ChatModel | None = None,
        corpus: KernelCorpus | None = None,
        progress: ProgressCallback | None = None,
        kernel: str | None = None,
        instruction: str | None = None,
    ):
        self.config = config
        self.kernel = kernel
        self.instruction = instruction
        self.candidates = candidates
        self.model = model
        self.corpus = corpus
        self.progress = progress
        self._stop = False
        self.waiting_report_s = WAITING_REPORT_S
        self._round_waiters: dict[int, int] = {}

    def stop(self) -> None:
        """Finish the candidate in flight, checkpoint, and return the best so far."""
        self._stop = True

    def _emit(self, kind: str, message: str, **kw) -> None:
        log.info(message)
        if self.progress is not None:
            self.progress(ProgressEvent(kind, message, **kw))

    # ------------------------------------------------------------------------------------------ the run

    async def optimize(self, *, resume: bool = False) -> OptimizeResult:
        """The whole run. Raises `BadInput` (the original fails its test, the checkpoint is unusable or held by
        another run) and `ModelUnusable` (the model was given up; the checkpoint keeps what was done)."""
        original = self.candidates.original
        store = checkpoint.Checkpoint(checkpoint.paths_for(self.config.output_path, original.path), original.path)
        try:
            store.open()
        except checkpoint.CheckpointError as e:
            raise BadInput(str(e)) from None
        try:
            return await self._optimize(store, resume)
        finally:
            store.close()

    async def _optimize(self, store: checkpoint.Checkpoint, resume: bool) -> OptimizeResult:
        cfg = self.config
        original = self.candidates.original
        with_model = self.model is not None and self.config.model_configured
        baseline = await self.candidates.start(lambda message: self._emit("waiting", message), profile=with_model)
        if not baseline.ok:
            raise BadInput(
                f"{original.path} does not pass its own test, so there is nothing to optimize from: {baseline.message}"
            )
        memory, usage_before = starting_memory(
            self.config, self.candidates.original, store, resume, baseline, lambda message: self._emit("start", message)
        )
        runtime = self.candidates.runtime
        timing = bool(self.candidates.timing)
        device = (
            f"{runtime.get('device')} ({runtime.get('backend')}, {runtime.get('arch')})"
            if timing
            else "a GPU (none is visible here: kernels run in Triton's CPU interpreter, speed is not measured)"
        )
        knowledge = knowledge_for(runtime.get("backend"), runtime.get("arch"), cfg.target_gpu) if cfg.knowledge else ""
        knowledge = for_code(knowledge, original.kernel_section)
        context = prompts.Context(
            original,
            device,
            knowledge,
            timing,
            self.kernel,
            self.candidates.diagnosis,
            baseline_ms=self.candidates.baseline_ms,
            timed_calls=self.candidates.baseline_costs,
            fresh_inputs=cfg.fresh_inputs > 0,
            probe_variants=cfg.probe_variants,
            search_after=cfg.search,
            tolerances=self.candidates.evaluator.options.tolerances,
            edits=self.instruction is None and cfg.diff_mode_applies(len(original.kernel_section)),
        )
        run = _Run(memory, context, store, usage_before)
        base = f"baseline {self.candidates.baseline_ms:.4f} ms" if self.candidates.baseline_ms else "no timing"
        focus = f" (kernel {self.kernel})" if self.kernel else ""
        self._emit("start", f"optimizing {original.path}{focus} on {runtime.get('device')} ({base})")
        self._emit("start", f"checkpoint: {store.paths.latest}")
        if self.model is None:
            self._emit("start", "no model configured (model_id, --model): tuning launch configurations by measurement")
        self._save(run)  # a checkpoint from the start: a run stopped in its first step can be resumed
        try:
            if with_model:
                steps = self._model_steps(run)
                await all_or_none(self._chain(run, steps, state) for state in memory.chains)
            if not memory.search_done and (cfg.search or self.model is None) and not self._stop:
                await self._search(run)
            final = await self._final(run)
        finally:
            self._save(run)
        return final

    def _total_usage(self, run: _Run) -> dict[str, int]:
        """Token counts of the whole run, resumed runs included."""
        usage = dict(run.usage_before)
        if self.model is not None:
            for k, v in self.model.usage_counts().items():
                usage[k] = usage.get(k, 0) + v
        return usage

    def _save(self, run: _Run) -> None:
        run.store.save(self.config.to_public_dict(), self._total_usage(run))

    def _round_finished(self, run: _Run, round_: int) -> None:
        done = self._round_waiters.get(round_, 0) + 1
        self._round_waiters[round_] = done
        if done == len(run.memory.chains):
            run.memory.completed_rounds = round_ + 1
            self._save(run)
            run.store.snapshot(round_)

    # ------------------------------------------------------------------------------------------ chains

    def _model_steps(self, run: _Run) -> ModelSteps:
        assert self.model is not None
        return ModelSteps(
            config=self.config,
            candidates=self.candidates,
            model=self.model,
            corpus=self.corpus,
            instruction=self.instruction,
            memory=run.memory,
            ctx=run.ctx,
            emit=self._emit,
            report=lambda candidate: self._report(run, candidate),
            waiting_report_s=self.waiting_report_s,
        )

    async def _chain(self, run: _Run, steps: ModelSteps, state: ChainState) -> None:
        cfg = self.config
        while state.round < cfg.max_iteration and not self._stop:
            memory = run.memory
            current = memory.get(state.current)
            note = ""
            if current is not None and not current.passed and state.debug_count >= cfg.max_perf_debug_num:
                state.trapped += 1
                note = (
                    f"A previous line of attack failed {state.debug_count} fixes in a row and was abandoned; "
                    "take a different approach."
                )
                self._emit(
                    "round",
                    f"chain {state.chain}: debugging trap after {state.debug_count} failed fixes; "
                    "starting again from the best candidates",
                    chain=state.chain,
                    round=state.round,
                )
                state.current, state.debug_count, current = None, 0, None
            self._emit(
                "round",
                f"chain {state.chain}, round {state.round + 1}/{cfg.max_iteration}",
                chain=state.chain,
                round=state.round,
            )
            if current is not None and not current.passed:
                new = [await steps.reflect(state, current)]
                state.debug_count += 0 if new[0].passed else 1
            else:
                base = current if current is not None else None
                new = await all_or_none(steps.improve(state, base, note) for _ in range(cfg.descendant_num))
                state.debug_count = 0
            chosen = sorted(new, key=lambda c: (not c.passed, c.evaluation.sort_key if c.evaluation else math.inf))
            state.current = chosen[0].id
            state.round += 1
            self._save(run)
            self._round_finished(run, state.round - 1)

    def _report(self, run: _Run, c: Candidate) -> None:
        ev = c.evaluation
        if ev is None:
            return
        if ev.ok and ev.speedup is not None:
            interval = f"[{ev.speedup_low:.3f}, {ev.speedup_high:.3f}]"
            verdict = f"correct, {ev.latency_ms:.4f} ms, speedup {ev.speedup:.3f}x {interval} ({ev.speedup_verdict})"
        elif ev.ok:
            verdict = "correct (not timed)"
        else:
            verdict = f"fails at {ev.stage}: {ev.message.splitlines()[0][:160] if ev.message else ''}"
        best = run.memory.best()
        self._emit(
            "candidate",
            f"{c.id} ({c.origin}): {verdict}",
            chain=c.chain,
            round=c.round,
            candidate=c.id,
            best_speedup=best.evaluation.speedup if best and best.evaluation else None,
        )

    # ------------------------------------------------------------------------------------------ search

    async def _search(self, run: _Run) -> None:
        memory = run.memory
        best = memory.best()
        if best is None and self.instruction is not None:  # generate mode: only the model's code is tuned
            best = next((c for c in memory.passing() if c.evaluation and c.evaluation.timed), None)
            if best is None:
                self._emit("search", "no timed correct candidate of the model to tune: no launch-configuration search")
                memory.search_done = True
                return
        start = best.code if best is not None else self.candidates.original.text
        label = f"the best candidate {best.id}" if best is not None else "the original"
        self._emit("search", f"tuning the launch configurations of {label}")
        backend = _SearchBackend(self, run, best.id if best is not None else None)
        result = await search_launch_configs(
            start,
            backend,
            budget_s=self.config.search_time_s,
            device_backend=self.candidates.runtime,
            kernel=self.kernel,
            focus=focus_of(self.candidates.baseline_costs, self.candidates.baseline_kernels),
            state=memory.search_state,
            on_event=lambda message: self._emit("search", message),
            on_state=lambda state: self._save(run),
            should_stop=lambda: self._stop,
        )
        memory.search_done = not self._stop
        run.search = {
            "summary": result.summary,
            "knobs": result.knobs,
            "screened": result.screened,
            "correct": result.correct,
            "rounds": result.rounds,
            "finalists": len(result.finalists),
            "diagnosis": self.candidates.diagnosis or result.diagnosis,
            "seconds": round(result.seconds, 1),
            "configurations": result.configurations,
            "over_autotune_best": result.over_autotune_best,
        }
        self._emit("search", result.summary)

    # ------------------------------------------------------------------------------------------ result

    async def _final(self, run: _Run) -> OptimizeResult:
        memory = run.memory
        original = self.candidates.original
        best = memory.best()
        message = ""
        if best is not None and not self._stop and best.origin != "search":  # a search finalist was just confirmed
            rounds = self.config.bench_rounds
            self._emit("final", f"re-measuring {best.id}" + (f" with {rounds} rounds" if rounds else ""))
            final = await self.candidates.evaluate(
                best.code, rounds=self.config.bench_rounds, progress=lambda message: self._emit("waiting", message)
            )
            if final.ok and final.faster:
                best.evaluation = final
            else:
                message = f"{best.id} did not hold up when re-measured ({final.message}); no change is proposed"
                best.evaluation = final
                best = None
        if best is not None:
            new_text = merged_file(original, best.code)
            ev = best.evaluation
            message = (
                f"{best.id} ({best.origin}) is {ev.speedup:.3f}x faster "
                f"[{ev.speedup_low:.3f}, {ev.speedup_high:.3f}] and passes the test"
            )
            if best.origin == "search":
                message += over_autotune_said(run.search.get("over_autotune_best") or {})
            if best.review:
                message += f"; {_notes(len(best.review))} what the test cannot show: read before applying it"
        else:
            new_text = None
            if not message:
                message = (
                    "speed cannot be measured without a GPU: candidates were checked for correctness only, "
                    "and none is proposed"
                    if not self.candidates.timing
                    else "no candidate was significantly faster than the original"
                )
        llm = [c for c in memory.candidates if c.origin in ("generate", "reflect", "optimize")]
        chains_passed = [any(c.passed for c in llm if c.chain == s.chain) for s in memory.chains]
        result = OptimizeResult(
            file=original.path,
            improved=best is not None,
            message=message,
            timing=bool(self.candidates.timing),
            runtime=self.candidates.runtime,
            baseline_ms=self.candidates.baseline_ms,
            best=best,
            new_text=new_text,
            diff=unified_diff(original.text, new_text, Path(original.path).name) if new_text else "",
            candidates=list(memory.candidates),
            pass_at_k=pass_at_k(len(chains_passed), sum(chains_passed)) if llm else {},
            call_accuracy=sum(bool(c.evaluation and c.evaluation.called) for c in llm) / len(llm) if llm else None,
            exec_accuracy=sum(c.passed for c in llm) / len(llm) if llm else None,
            usage=self._total_usage(run) if self.model is not None or run.usage_before else {},
            usage_this_run=self.model.usage_counts() if self.model is not None else {},
            checkpoint=str(run.store.paths.latest),
            stopped=self._stop,
            search=run.search,
            review=list(best.review) if best is not None else [],
        )
        self._emit("done", message, best_speedup=best.evaluation.speedup if best and best.evaluation else None)
        return result


def _notes(count: int) -> str:
    return "a review note says" if count == 1 else f"{count} review notes say"


class _SearchBackend:
    """The launch search's view of the run: screening through the evaluator, and each finalist confirmed (full check
    and paired bench against the original) as a candidate of the run, reused where a resumed run finished it."""

    def __init__(self, agent: GeakAgent, run: _Run, parent: str | None):
        self.agent = agent
        self.run = run
        self.parent = parent
        self.timing = bool(agent.candidates.timing)

    async def confirm_estimate(self) -> float | None:
        """A finalist's check (about what the original's first run as the reference takes: run now, where it has not
        run, and kept for the checks to come) and its paired benches (``CONFIRM_BENCHES`` of the original's)."""
        candidates = self.agent.candidates
        if not self.timing or candidates.bench_s is None:
            return None
        progress = lambda message: self.agent._emit("waiting", message)
        return await candidates.prepare_reference(progress) + CONFIRM_BENCHES * candidates.bench_s

    async def screen(self, baseline: str, variants: list[str], deadline_s: float, finalists: int):
        progress = lambda message: self.agent._emit("waiting", message)
        return await self.agent.candidates.screen(baseline, variants, deadline_s, finalists, progress)

    async def compare(self, source: str, reference: str) -> Evaluation:
        """The paired bench of `source` against `reference` (both checked already), the reference a file of its own in
        a scratch folder (the bench composes both into modules of its job; the original's folder is not needed)."""
        candidates = self.agent.candidates
        progress = lambda message: self.agent._emit("waiting", message)
        with tempfile.TemporaryDirectory(prefix="geak-autotune-best-") as folder:
            path = Path(folder) / candidates.original_path.name
            path.write_text(reference)
            bench = await candidates.bench(source, path, candidates.screen_rounds, progress)
        s = bench.speedup
        if not bench.ok or s is None:
            return Evaluation(False, "perf", bench.message)
        return Evaluation(True, "perf", bench.message, timed=True, speedup=s.ratio, speedup_low=s.low,
                          speedup_high=s.high, speedup_verdict=s.verdict)  # fmt: skip

    async def confirm(self, source: str, note: str, review: list[str]) -> Evaluation:
        memory = self.run.memory
        done = next((c for c in memory.candidates if c.origin == "search" and c.code == source and c.evaluation), None)
        if done is not None and done.evaluation is not None:  # confirmed before a resume: not run again
            return done.evaluation
        number = sum(1 for c in memory.candidates if c.origin == "search") + 1
        candidate = Candidate(f"s{number}", -1, 0, "search", source, parent=self.parent, note=note, review=review)
        progress = lambda message: self.agent._emit("waiting", message)
        candidate.evaluation = await self.agent.candidates.evaluate(source, progress=progress)
        memory.candidates.append(candidate)
        self.agent._report(self.run, candidate)
        self.agent._save(self.run)
        return candidate.evaluation
