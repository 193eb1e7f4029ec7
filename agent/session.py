"""One optimize run of one Triton file, wired together: evaluator, model, one-shot corpus and the GEAK agent.

Shared by `geak optimize` (which lets the session own a fresh evaluator) and the language server (which lends its
warm one). `stop()` ends the run cleanly with the best so far and its checkpoint; cancelling the task that awaits
`run()` cancels the evaluator jobs in flight (their worker processes are killed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from geak.evaluator import BadInput, Evaluator, ModuleTests, TritonFileError, as_module, read_source, read_triton_file

from .config import AgentConfig, eval_options
from .evaluation import CandidateEvaluator
from .llm import ChatModel
from .loop import GeakAgent, ProgressCallback
from .outcome import OptimizeResult
from .retrieval import KernelCorpus


class OptimizeSession:
    """Optimizes `file` with `config`. `evaluator` None: the session starts its own (on `backend`) and closes it.
    `kernel` names one `@triton.jit` kernel to focus on (prompts and the launch-parameter search); None = all.
    `module`: `file` is a repository's module, and its repository's tests (``geak.evaluator.module_tests``) judge
    every candidate in its place (a lent evaluator must be able to read the repository)."""

    def __init__(
        self,
        file: str | Path,
        config: AgentConfig,
        *,
        evaluator: Evaluator | None = None,
        backend: str = "auto",
        progress: ProgressCallback | None = None,
        kernel: str | None = None,
        module: ModuleTests | None = None,
    ):
        self.file = Path(file)
        self.module = module
        self.config = config
        self.evaluator = evaluator
        self.backend = backend
        self.progress = progress
        self.kernel = kernel
        self._agent: GeakAgent | None = None
        self._stop_requested = False

    @property
    def uses_model(self) -> bool:
        return self.config.model_configured

    def stop(self) -> None:
        """Finish the candidate in flight, checkpoint, and return the best so far from `run()`."""
        self._stop_requested = True
        if self._agent is not None:
            self._agent.stop()

    async def run(self, *, resume: bool = False) -> OptimizeResult:
        """The whole run. Raises `BadInput` (file or checkpoint unusable, the original fails its test),
        `LLMError` (the model cannot be used); a `kernel` the file lacks is bad input."""
        cfg = self.config
        try:
            original = await asyncio.to_thread(self._read)
        except FileNotFoundError as e:
            raise BadInput(f"{self.file}: no such file") from e
        except TritonFileError as e:
            raise BadInput(str(e)) from e
        if self.kernel is not None and self.kernel not in {k.name for k in original.kernels}:
            raise BadInput(f"{self.file} has no @triton.jit kernel named {self.kernel!r}")
        model = ChatModel(cfg) if cfg.model_configured else None
        corpus = None
        if cfg.one_shot and model is not None:
            corpus = await asyncio.to_thread(KernelCorpus.load, cfg.corpus_path)
        own = self.evaluator is None
        readable = (str(self.module.repository.root),) if self.module is not None else ()
        evaluator = Evaluator(eval_options(cfg, self.backend), readable=readable) if own else self.evaluator
        candidates = CandidateEvaluator(evaluator, self.file, original=original, module=self.module)
        try:
            self._agent = GeakAgent(cfg, candidates, model, corpus, progress=self.progress, kernel=self.kernel)
            if self._stop_requested:
                self._agent.stop()
            return await self._agent.optimize(resume=resume)
        finally:
            if model is not None:
                await model.aclose()
            if own:
                await evaluator.aclose()
            else:
                await candidates.release()

    def _read(self):
        if self.module is None:
            return read_triton_file(self.file)
        return as_module(self.module, read_source(self.file), str(self.file))
