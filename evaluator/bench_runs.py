"""The bench jobs of `Evaluator.bench` (and the modules of every timing job): the variants timed interleaved in one
process, the caller's clock over the timed batch."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from . import bench as bench_stage
from .inputs import text_key
from .job_folders import JobFolders, removed
from .options import EvalOptions
from .pool import WorkerPool
from .progress import Progress, relay
from .results import BenchResult, CheckResult, Peaks
from .runtime_facts import RuntimeFacts
from .shared.protocol import cache_request
from .timing_rules import BatchClock
from .triton_file import TritonFile


class BenchRuns:
    """Runs the bench jobs of an evaluator's pool, in its job folders."""

    def __init__(self, pool: WorkerPool, options: EvalOptions, folders: JobFolders):
        self._pool = pool
        self._options = options
        self._folders = folders

    def module(self, label: str, text: str, owner: TritonFile, job_dir: Path) -> dict[str, Any]:
        """`text` written into `job_dir` as a module of its own, and its spec for a timing job (named `label`)."""
        module_name = self._folders.module_name()
        (job_dir / f"{module_name}.py").write_text(text)
        return bench_stage.module_spec(label, job_dir / f"{module_name}.py", module_name, owner, self._options)

    async def timed(
        self,
        texts: dict[str, str],
        owner: TritonFile,
        rounds: int | None,
        input_seed: int,
        label: str,
        reference: TritonFile | None,
        check: CheckResult | None,
        info: RuntimeFacts,
        peaks: Peaks,
        progress: Progress | None,
        candidate_first: bool = False,
    ) -> BenchResult:
        """One bench job: the variants timed interleaved in one process, the caller's clock over the timed batch.
        The variants are loaded and prepared in the order of `texts` (the reference first), or, `candidate_first`,
        the other way round."""
        job_dir = self._folders.new()
        order = list(texts.items())[::-1] if candidate_first else list(texts.items())
        modules = [self.module(name, text, owner, job_dir) for name, text in order]
        # Compiled code is taken from the reference (or the file alone) and kept only when no candidate is in the job.
        first = text_key(next(iter(texts.values())))
        cache = cache_request(seed=first, keep=first if len(texts) == 1 and reference is None else None)
        plan = bench_stage.round_plan(self._options, rounds, reference is not None, peaks.noise_margin)
        job = bench_stage.bench_job(modules, owner, self._options, job_dir / "outputs", plan, input_seed, cache)
        clock = BatchClock()
        relayed = relay(progress)

        def on_event(event: dict[str, Any]) -> None:
            clock.on_event(event)
            if relayed is not None:
                relayed(event)

        try:
            outcome = await self._pool.run(job, timeout_s=self._options.timeout_s * 2, on_event=on_event)
            # Reading and comparing the timed calls' outputs can take seconds: off the event loop.
            return await asyncio.to_thread(
                bench_stage.bench_result,
                outcome,
                label,
                reference,
                check,
                info,
                peaks,
                job_dir / "outputs",
                clock.window_s,
                plan,
                self._options.tolerances,
            )
        finally:
            await removed(job_dir)
