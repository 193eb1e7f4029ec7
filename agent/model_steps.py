"""The model's part of a chain's round in the GEAK loop: the Generator, the Reflector and the Optimizer ask the model
(with the prompts of ``prompts`` and a one-shot example of the corpus), and each reply's code is extracted and
evaluated as a new candidate of the run's memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from . import prompts
from .chain_aims import Aim, aim_named, chain_aim
from .code_extraction import extract_code, extract_strategy
from .config import AgentConfig
from .edit_blocks import extract_edited
from .evaluation import CandidateEvaluator
from .llm import ChatModel, ChatReply, LLMError, ModelUnusable
from .memory import Candidate, ChainState, Evaluation, ProblemMemory
from .retrieval import KernelCorpus


@dataclass
class ModelSteps:
    """One run's model steps. `emit` sends a progress event (kind, message, its fields); `report` says what a new
    candidate's evaluation found; while the model thinks, a `waiting` event every `waiting_report_s` says for how
    long."""

    config: AgentConfig
    candidates: CandidateEvaluator
    model: ChatModel
    corpus: KernelCorpus | None
    instruction: str | None
    memory: ProblemMemory
    ctx: prompts.Context
    emit: Callable[..., None]
    report: Callable[[Candidate], None]
    waiting_report_s: float

    async def improve(self, state: ChainState, base: Candidate | None, note: str) -> Candidate:
        """Optimizer + Generator when timed passing candidates exist, else the Generator from the original. The
        original is an ancestor too (1.00x), so that no candidate slower than it becomes the base. Chains are
        independent (their pass@k is one over independent tries, and they do not converge on one line): a chain's
        optimizer sees its own candidates and attempts only."""
        memory = self.memory
        own = [c for c in memory.passing() if c.chain == state.chain and c.evaluation and c.evaluation.timed]
        ancestors = own[: self.config.ancestor_num]
        if self.ctx.timing and ancestors:
            if self.instruction is None and self.candidates.baseline_ms:  # generate mode never shows the original
                ancestors = sorted([*ancestors, self._original()], key=lambda c: c.evaluation.sort_key)
            reply = await self._ask(
                prompts.optimizer(
                    self.ctx,
                    ancestors,
                    prompts.ledger([c for c in memory.candidates if c.chain == state.chain]),
                    avoid=state.last_strategy if note else "",
                    aim=self._aim(state),
                ),
                state,
                "optimizer: a strategy",
                "optimizer",
            )
            strategy = extract_strategy(reply.text)
            state.last_strategy = strategy
            best = ancestors[0]
            messages = prompts.implement(self.ctx, best, strategy, self._one_shot(best.code), self._aim(state))
            parent = best.id if best.origin != "original" else None
            return await self._generate(state, "optimize", messages, parent=parent, strategy=strategy, base=best.code)
        if base is None and self.instruction is not None:
            messages = prompts.from_instruction(self.ctx, self.instruction, self._one_shot(self.instruction), note)
            return await self._generate(state, "generate", messages)
        code = base.code if base is not None else memory.original_code
        messages = prompts.generate(self.ctx, code, self._one_shot(code), note, self._aim(state))
        return await self._generate(state, "generate", messages, parent=base.id if base else None, base=code)

    async def reflect(self, state: ChainState, failed: Candidate) -> Candidate:
        """Reflexion on a failed candidate. One whose reply had no usable code (cut off, a wrapper missing) is
        asked again with the task and the code it was to start from, since there is no code to reflect on."""
        if failed.code:
            wrong = failed.evaluation is not None and failed.evaluation.stage == "exec"
            reference = self.memory.original_code if wrong and self.instruction is None else None
            tried = self._fixes_before(failed)
            messages = prompts.reflect(self.ctx, failed, self._one_shot(failed.code), tried, reference)
            start = failed.code
        else:
            start = self._start_of(failed)
            task = self.instruction if self.instruction is not None and start is None else None
            one_shot = self._one_shot(start or task or self.memory.original_code)
            messages = prompts.reflect_on_reply(self.ctx, failed, start, task, one_shot)
        return await self._generate(state, "reflect", messages, parent=failed.id, strategy=failed.strategy, base=start)

    def _aim(self, state: ChainState) -> Aim | None:
        """The bottleneck this chain is aimed at where several run (chosen once, from the original's why-slow facts,
        and kept in the checkpoint); None for a lone chain."""
        if self.config.parallel < 2:
            return None
        if aim_named(state.aim) is None:
            state.aim = chain_aim(state.chain, self.ctx.timed_calls, self.memory.original_code).name
        return aim_named(state.aim)

    def _original(self) -> Candidate:
        """The original as a measured candidate: the 1.00x ancestor."""
        baseline = Evaluation(True, "perf", "the original", timed=True, latency_ms=self.candidates.baseline_ms)
        baseline.speedup, baseline.speedup_verdict = 1.0, "the baseline"
        return Candidate("original", -1, 0, "original", self.memory.original_code, evaluation=baseline)

    def _fixes_before(self, failed: Candidate) -> list[Candidate]:
        """A failed fix's line of attack, oldest first: the failed attempt it began with, and each fix since (itself
        included, with its diagnosis); none for a first failure."""
        line = []
        at = failed if failed.origin == "reflect" else None
        while at is not None and not at.passed:
            line.append(at)
            at = self.memory.get(at.parent) if at.origin == "reflect" else None
        return line[::-1]

    def _start_of(self, failed: Candidate) -> str | None:
        """The code a candidate without code was to be written from: its nearest ancestor's with code, else the
        original's (None in generate mode, which starts from the instruction)."""
        parent = self.memory.get(failed.parent)
        while parent is not None and not parent.code:
            parent = self.memory.get(parent.parent)
        if parent is not None:
            return parent.code
        return None if self.instruction is not None else self.memory.original_code

    async def _ask(self, messages, state: ChainState, purpose: str, role: str) -> ChatReply:
        """The model's reply. A request that failed (an `LLMError`: time-out, server error, a body that is no chat
        completion) is no attempt of the model's: it is asked again, and `ModelHealth` decides when the model is
        given up (`ModelUnusable`, raised). While waiting, a `waiting` event every `waiting_report_s` says for how
        long."""
        while True:
            try:
                return await self._request(messages, state, purpose, role)
            except ModelUnusable:
                raise
            except LLMError as e:
                self.emit(
                    "waiting",
                    f"chain {state.chain}, round {state.round + 1}: the request failed ({e}); asking the model again",
                    chain=state.chain,
                    round=state.round,
                )

    async def _request(self, messages, state: ChainState, purpose: str, role: str) -> ChatReply:
        temperature = self.config.fix_temperature if role == "reflector" else None  # None: the model's own
        request = asyncio.ensure_future(self.model.complete(messages, temperature=temperature, role=role))
        started = time.monotonic()
        try:
            while not (await asyncio.wait({request}, timeout=self.waiting_report_s))[0]:
                self.emit(
                    "waiting",
                    f"chain {state.chain}, round {state.round + 1}: waiting for the model ({purpose}), "
                    f"{time.monotonic() - started:.0f} s",
                    chain=state.chain,
                    round=state.round,
                )
            return request.result()
        finally:
            request.cancel()

    async def _generate(self, state, origin, messages, *, parent=None, strategy="", base=None) -> Candidate:
        """Ask for a candidate and evaluate it. `base`: the code the prompt shows to rewrite; in diff mode
        (``Context.edits``) the reply's SEARCH/REPLACE blocks are applied to it."""
        purpose = f"{origin} of c{state.chain}.{sum(c.chain == state.chain for c in self.memory.candidates) + 1}"
        role = "reflector" if origin == "reflect" else "generator"
        reply = await self._ask(messages, state, purpose + (f" from {parent}" if parent else ""), role)
        extract = partial(extract_edited, base=base) if self.ctx.edits and base is not None else extract_code
        extraction = extract(reply.text, required_names=self.ctx.contract.required, finish_reason=reply.finish_reason)
        candidate = Candidate(
            self.memory.next_id(state.chain),
            state.chain,
            state.round,
            origin,
            extraction.code or "",
            parent=parent,
            strategy=strategy,
            reflection=extraction.prose[:4000] if origin == "reflect" else "",
        )
        self.memory.candidates.append(candidate)
        if extraction.code is None:
            candidate.note = extraction.reason or "no code"
            candidate.evaluation = Evaluation(False, "reply", f"no usable code in the reply: {candidate.note}")
        else:
            candidate.evaluation = await self.candidates.evaluate(extraction.code)
        self.report(candidate)
        return candidate

    def _one_shot(self, code: str) -> str | None:
        if not self.config.one_shot or self.corpus is None:
            return None
        own = Path(self.candidates.original.path).resolve()
        hits = self.corpus.most_similar(code, k=1, exclude=own)
        return hits[0][0].code if hits else None
