"""The agent's view of the evaluator: check a candidate against the original file, then time it against it.

A candidate's latency is reported on one scale for the whole run: the original's time (measured once) divided by
the candidate's speedup, which the evaluator measures interleaved with the original in one process. That is far
steadier than comparing times taken in different processes.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from geak.evaluator import (
    BenchResult,
    CallCost,
    CheckResult,
    CompiledKernelFacts,
    Evaluator,
    ModuleTests,
    Progress,
    ScreenResult,
    TritonFile,
    as_module,
    read_source,
    read_triton_file,
    timing_cost,
    with_profile,
)
from geak.evaluator import slowness_summary as summary

from .memory import Evaluation


class CandidateEvaluator:
    """Evaluates candidate code for one problem file. `timing` is False where no GPU is visible. `module`: the file
    is a repository's module, judged by the repository's tests (``geak.evaluator.module_tests``): every check, bench
    and screening of the run is of texts in its place."""

    def __init__(
        self,
        evaluator: Evaluator,
        original_path: str | Path,
        *,
        original: TritonFile | None = None,
        screen_rounds: int | None = None,
        module: ModuleTests | None = None,
    ):
        self.evaluator = evaluator
        self.original_path = Path(original_path)
        self.module = module
        # what the evaluator's calls add for a module: every case of its tests, whatever the evaluator's limits (a
        # screening, which only ranks, keeps them)
        self._target = {"module": module.with_every_case()} if module is not None else {}
        if original is None:
            path = self.original_path
            original = read_triton_file(path) if module is None else as_module(module, read_source(path), str(path))
        self.original: TritonFile = original
        self.screen_rounds = screen_rounds
        self.timing: bool | None = None
        self.runtime: dict = {}
        self.baseline_ms: float | None = None
        self.baseline_costs: tuple[CallCost, ...] = ()  # the original's timed calls on the device's roofline
        self.baseline_kernels: tuple[CompiledKernelFacts, ...] = ()  # what the compiler made of its kernels
        self.check_s: float | None = None  # how long the original's own check took
        self.bench_s: float | None = None  # and its bench (less measuring the device's peaks, once per device)
        self.reference_s: float | None = None  # and its first run as a reference, with its probes

    async def start(self, progress: Progress | None = None, profile: bool = False) -> Evaluation:
        """Learn the backend and evaluate the original itself (its test must pass; its time is the baseline).
        `profile`: then measure its kernels with the vendor's profiler too, where one can run (what the optimizer's
        prompt says of them; the search without a model does not wait for it)."""
        self.runtime = await self.evaluator.runtime()
        self.timing = self.runtime.get("backend") != "interpreter"
        started = time.perf_counter()
        check = await self._check(None, None, progress)
        self.check_s = time.perf_counter() - started
        if not check.ok:
            return from_check(check)
        if not self.timing:
            return from_check(check)
        started = time.perf_counter()
        bench = await self.evaluator.bench(self.original_path, check_first=False, progress=progress, **self._target)
        self.bench_s = time.perf_counter() - started - bench.peaks_s
        if bench.ok and bench.total_ms:
            self.baseline_ms = bench.total_ms
            self.baseline_costs = tuple(timing_cost(c, bench.peaks) for c in bench.calls)
            kernels = {k.kernel: k for c in bench.calls for k in c.kernels}
            self.baseline_kernels = tuple(kernels.values())
            if profile and self.module is None:  # the profiler runs a file's own tests
                measured = await self.evaluator.profile(self.original_path, progress=progress)
                self.baseline_kernels = with_profile(self.baseline_kernels, measured)
        return from_bench(check, bench, self.baseline_ms)

    async def prepare_reference(self, progress: Progress | None = None) -> float:
        """Run the original as the reference of the checks to come, where it has not run yet; how long that run
        took (at least its own check: a run kept from before costs nothing now, but a check against it does)."""
        if self.reference_s is None:
            started = time.perf_counter()
            await self.evaluator.prepare_reference(self.original_path, progress=progress, **self._target)
            self.reference_s = max(time.perf_counter() - started, self.check_s or 0.0)
        return self.reference_s

    async def release(self) -> None:
        """Forget the original's run as a reference (its outputs, on disk): the evaluator outlives this problem (a
        batch's slot, the editor's server)."""
        await self.evaluator.forget_reference(self.original_path, **self._target)

    @property
    def diagnosis(self) -> str:
        """Why the original is slow: its slowest call on the roofline, what the compiler made of its kernels."""
        return summary(self.baseline_costs, self.baseline_kernels)

    async def screen(
        self, baseline: str, variants: list[str], deadline_s: float, finalists: int, progress: Progress | None = None
    ) -> ScreenResult:
        """Screen variants of `baseline` (kernel code or a whole file) with the original's test."""
        return await self.evaluator.screen(
            self.original_path, variants, baseline=baseline, deadline_s=deadline_s, finalists=finalists,
            progress=progress, **({"module": self.module} if self.module is not None else {}),
        )  # fmt: skip

    async def evaluate(self, code: str, *, rounds: int | None = None, progress: Progress | None = None) -> Evaluation:
        """Check `code` (kernel code, or a whole file) against the original; time it if it passes."""
        check = await self._check(code, self.original_path, progress)
        if not check.ok or not self.timing:
            return from_check(check)
        bench = await self.bench(code, self.original_path, rounds or self.screen_rounds, progress)
        return from_bench(check, bench, self.baseline_ms)

    async def bench(
        self, code: str, against: Path, rounds: int | None, progress: Progress | None = None
    ) -> BenchResult:
        """The paired bench of `code` against the file at `against` (both checked already)."""
        return await self.evaluator.bench(
            source=code, against=against, check_first=False, rounds=rounds, progress=progress, **self._target
        )

    async def _check(self, code: str | None, against: Path | None, progress: Progress | None) -> CheckResult:
        """`code` (None: the original) checked, against the file at `against` where given; a repository's module by
        every case of its tests."""
        if self._target:
            return await self.evaluator.check_module(
                self._target["module"], source=code, against=against, progress=progress
            )
        if code is None:
            return await self.evaluator.check(self.original_path, against=against, progress=progress)
        return await self.evaluator.check(source=code, against=against, progress=progress)


def from_check(check: CheckResult) -> Evaluation:
    """The agent's record of a check: pass, stage, message, and whether the code ran (GEAK's call accuracy)."""
    # GEAK's call accuracy: the tests ran through without raising. No test outcome at all means the file never got
    # that far (it failed, hung or crashed while importing).
    called = bool(check.tests) and not any(t.kind in ("error", "timeout", "crash") for t in check.tests)
    return Evaluation(
        ok=check.ok,
        stage=check.stage,
        message=check.message,
        diagnostics=[asdict(d) for d in check.diagnostics],
        called=called and check.stage in ("call", "exec"),
        notes=list(check.caveats_beyond_summary()),
    )


def from_bench(check: CheckResult, bench: BenchResult, baseline_ms: float | None) -> Evaluation:
    """A check and the timing against the original: speedup with its interval, latency on the run's scale."""
    evaluation = from_check(check)
    if not bench.ok:
        evaluation.ok = False
        evaluation.stage = "perf"
        evaluation.message = f"correct, but timing failed: {bench.message}"
        evaluation.diagnostics = [asdict(d) for d in bench.diagnostics]
        return evaluation
    evaluation.timed = True
    evaluation.stage = "perf"
    s = bench.speedup
    if s is not None:
        evaluation.speedup, evaluation.speedup_low, evaluation.speedup_high = s.ratio, s.low, s.high
        evaluation.speedup_verdict = s.verdict
    own = bench.total_ms
    evaluation.latency_ms = baseline_ms / s.ratio if s is not None and baseline_ms else own
    bw = [c.pct_peak_bw for c in bench.calls if c.pct_peak_bw is not None]
    fl = [c.pct_peak_flops for c in bench.calls if c.pct_peak_flops is not None]
    evaluation.pct_peak_bw = max(bw) if bw else None
    evaluation.pct_peak_flops = max(fl) if fl else None
    evaluation.message = bench.message
    return evaluation
