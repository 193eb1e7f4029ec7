"""The evaluator's public entry point: `Evaluator.check`, `Evaluator.bench` (and `screen`, `profile`), async, with
progress callbacks.

User code only ever runs in worker processes (``pool.py``); this module parses, composes the file with the
reference's test, dispatches jobs, compares outputs and turns everything into plain result data. The references' runs
are ``reference_runs``'s, the candidates' check jobs ``candidate_runs``'s, and their verdicts ``verdict``'s.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import bench as bench_stage
from . import job_package, screening_verdict
from . import profile as profile_stage
from .bench_runs import BenchRuns
from .candidate_runs import CANDIDATE_LABEL, CandidateRuns
from .device_peaks import DevicePeaks
from .inputs import BadInput, read_file, source_text, text_key
from .job_folders import JobFolders, removed
from .options import EvalOptions
from .pool import WorkerPool, usable_cores
from .progress import Progress, relay, say
from .reference_runs import ReferenceRuns
from .repo_tests import ModuleTests, as_module
from .results import BenchResult, CheckResult, Diagnostic, Peaks, ProfileResult, ScreenedVariant, ScreenResult
from .runtime_facts import RuntimeFacts
from .shared.protocol import cache_request
from .shared.screening import ScreenPlan
from .timing_rules import CROSSOVER_WITHIN, REMEASURE_ABOVE
from .triton_file import TritonFile, TritonFileError, parse_triton_file
from .verdict import UNPOISONED_CAVEAT


class Evaluator:
    """Checks and times Triton files. Reuse one Evaluator: workers stay warm and reference runs are cached."""

    def __init__(
        self, options: EvalOptions | None = None, pool: WorkerPool | None = None, readable: tuple[str, ...] = ()
    ):
        """`readable`: folders jobs may read (never write) although the sandbox hides them: the repositories of the
        modules `check_module` checks."""
        self.options = options or EvalOptions()
        self.pool = pool or WorkerPool(
            backend=self.options.backend,
            spares=self.options.spares,
            max_concurrent=self.options.max_concurrent,
            host_jobs=self.options.host_jobs,
            gpu_id=self.options.gpu_id,
            isolation=self.options.isolation,
            compile_cache=self.options.compile_cache,
            show=readable,
        )
        self._folders = JobFolders()
        self._scratch = self._folders.scratch
        self._references = ReferenceRuns(self.pool, self.options, self._folders)
        self._candidates = CandidateRuns(self.pool, self.options, self._folders, self._references)
        self._benches = BenchRuns(self.pool, self.options, self._folders)
        self._peaks = DevicePeaks(self.pool, self.options)
        _import_in_background("torch")  # read outputs with it later; meanwhile the workers start

    async def __aenter__(self) -> Evaluator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.pool.aclose()
        await self._folders.aclose()

    async def runtime(self) -> dict[str, Any]:
        """{"backend": cuda|rocm|interpreter, "device": ..., "arch": ..., versions}."""
        return await self.pool.runtime_info()

    # ------------------------------------------------------------------------------------------ check

    async def check(
        self,
        file: str | Path | None = None,
        *,
        source: str | None = None,
        against: str | Path | None = None,
        progress: Progress | None = None,
    ) -> CheckResult:
        """Parse → call → exec. With `against`, the candidate's kernel code runs the reference's test, and its
        outputs must match the reference's (given test and fresh random inputs)."""
        started = time.perf_counter()
        label = str(file) if file is not None else CANDIDATE_LABEL
        reference = read_file(against, "reference") if against is not None else None
        candidate_text = source if source is not None else source_text(file)
        try:
            candidate = parse_triton_file(candidate_text, label, require_tests=reference is None)
        except TritonFileError as e:
            if e.kind != "syntax" and reference is None:
                raise BadInput(str(e)) from e
            return _unparsed(e, label, against, started)
        return await self._judged(candidate, reference, label, progress, started)

    async def check_module(
        self,
        target: ModuleTests,
        *,
        source: str | None = None,
        against: str | Path | None = None,
        progress: Progress | None = None,
    ) -> CheckResult:
        """`check` for a module of a repository, judged by the repository's tests (`target`: ``repo_tests``): the
        candidate's text (`source`, default: the module's own) in the module's place; with `against` (a file: the
        module's original, say), that text runs the same tests as the reference, and the kernels' calls the tests
        make must give its outputs on its fresh and probe inputs. Jobs must be able to read the repository
        (`readable`)."""
        started = time.perf_counter()
        label = str(target.path)
        try:
            reference = as_module(target, source_text(against), str(against)) if against is not None else None
        except TritonFileError as e:
            raise BadInput(f"reference {against}: {e}") from e
        try:
            candidate = as_module(target, source if source is not None else source_text(target.path), label)
        except TritonFileError as e:
            if e.kind != "syntax":
                raise BadInput(str(e)) from e
            return _unparsed(e, label, against, started)
        return await self._judged(candidate, reference, label, progress, started)

    async def check_and_compare_tests(
        self,
        file: str | Path | None = None,
        *,
        source: str | None = None,
        against: str | Path,
        module: ModuleTests | None = None,
        progress: Progress | None = None,
    ) -> tuple[CheckResult, CheckResult | None]:
        """`check(file)` (`check_module(module)` with `module`) and, from its very job, its tests' outputs weighed
        against those of the kept run of `against`: one job where `check` and then `check(against=…)` take two. The
        second is None where one job cannot tell: no run of `against` is kept (nothing runs it here), the file
        fails, or its test section is not `against`'s. Its probes are not replayed, and the reference is not run
        again where an output differs: `check(file, against=…)` does both, and has the last word."""
        started = time.perf_counter()
        reference = _read(against, "reference", module)
        label = str(module.path if module is not None else file)
        text = source if source is not None else source_text(module.path if module is not None else file)
        try:
            candidate = parse_triton_file(text, label) if module is None else as_module(module, text, label)
        except TritonFileError:  # said as `check` says it
            alone = (
                self.check(file, source=text, progress=progress)
                if module is None
                else self.check_module(module, source=text, progress=progress)
            )
            return await alone, None
        ref_run = self._references.kept(reference)
        if ref_run is None:
            return await self._judged(candidate, None, label, progress, started), None
        async with self._references.held(ref_run):
            return await self._candidates.own_and_compared(candidate, reference, ref_run, label, progress, started)

    async def _judged(
        self, candidate: TritonFile, reference: TritonFile | None, label: str, progress: Progress | None, started: float
    ) -> CheckResult:
        """The candidate's verdict, against the reference's kept run (made first where there is none)."""
        ref_run = await self._references.run(reference, progress) if reference is not None else None
        async with self._references.held(ref_run):
            return await self._candidates.verdict(candidate, reference, ref_run, label, progress, started)

    async def prepare_reference(
        self, file: str | Path, progress: Progress | None = None, module: ModuleTests | None = None
    ) -> None:
        """Run `file` as a reference now (with its probes), where no run of it is kept: the checks against it then
        find it done. A search does it before planning, to know what checking a finalist takes. `module`: `file`
        is a text of a repository's module (judged by its tests)."""
        await self._references.run(_read(file, "reference", module), progress)

    async def forget_reference(self, file: str | Path, module: ModuleTests | None = None) -> None:
        """Drop the kept run of `file` as a reference (its outputs stay on disk until the evaluator closes): for work
        over many references, once no check against it is to come. A check against it still running keeps it until
        that check ends; a later check runs the reference again."""
        try:
            reference = _read(file, "reference", module)
        except BadInput:
            return
        await self._references.forget(reference)

    def known_reference_seconds(self, references: list[Path]) -> dict[Path, float]:
        """How long each of `references`' own run took when it last ran with this compile store
        (``reference_costs``), for those known: work over many references can start the slow ones first."""
        return self._references.known_seconds(references)

    async def check_against_self(
        self, file: str | Path, progress: Progress | None = None
    ) -> tuple[CheckResult, CheckResult | None]:
        """`check(file)` and, where it passes, `check(file, against=file)`, in two jobs rather than three: the file's
        run as a reference is also its own check (the same tests, the same verdict). Returns (alone, against itself),
        the second None where the file fails alone."""
        started = time.perf_counter()
        reference = read_file(file, "file")
        try:
            ref_run = await self._references.run(reference, progress)
        except BadInput as e:
            if e.verdict is None:
                raise
            return _with_duration(e.verdict, time.perf_counter() - started), None
        alone = ref_run.not_checkable or ref_run.own
        if alone is None or not alone.ok:
            return _with_duration(alone, time.perf_counter() - started), None
        if not ref_run.poison:
            alone = replace(alone, caveats=(*alone.caveats, UNPOISONED_CAVEAT))
        alone = _with_duration(alone, time.perf_counter() - started)
        return alone, await self.check(file, against=file, progress=progress)

    # ------------------------------------------------------------------------------------------ bench

    async def bench(
        self,
        file: str | Path | None = None,
        *,
        source: str | None = None,
        against: str | Path | None = None,
        progress: Progress | None = None,
        check_first: bool = True,
        rounds: int | None = None,
        module: ModuleTests | None = None,
    ) -> BenchResult:
        """Time the captured bench calls (the `bench_*` functions', else the tests'). With `against`, the
        reference and the candidate are interleaved in one process and a speedup interval is reported.
        The candidate must pass `check` first (unless `check_first=False` because the caller just did).
        `rounds` fixes the number of interleaved timing rounds (default: the options' `bench_rounds`, else, against a
        reference, as many as the speedup needs to be decided; ``bench.round_plan``). `module`: the texts are a
        repository's module, whose tests' calls of its wrappers are timed (`file` defaults to the module's)."""
        started = time.perf_counter()
        file = module.path if module is not None and file is None and source is None else file
        label = str(file) if file is not None else CANDIDATE_LABEL
        if check_first:
            checked = dict(source=source, against=against, progress=progress)
            check = await (self.check(file, **checked) if module is None else self.check_module(module, **checked))
        else:
            check = None
        info = RuntimeFacts.from_dict(await self.pool.runtime_info())
        if check is not None and not check.ok:
            return bench_stage.check_failed(check, label, against)
        if info.backend == "interpreter":
            return bench_stage.needs_a_gpu(check, label)
        reference = _read(against, "reference", module) if against is not None else None
        candidate_text = source if source is not None else source_text(file)
        candidate = _parsed(candidate_text, label, module, require_tests=reference is None)
        owner = reference or candidate
        measuring = time.perf_counter()
        peaks = await self.device_peaks(progress)
        peaks_s = time.perf_counter() - measuring
        texts = {"candidate": owner.compose(candidate.kernel_section).text}
        if reference is not None:
            texts = {"reference": reference.compose().text, **texts}
        say(progress, "timing" + (" against the reference" if reference else ""))
        result = await self._benches.timed(texts, owner, rounds, 0, label, reference, check, info, peaks, progress)
        s = result.speedup
        if result.ok and s is not None and s.significant and 1 / CROSSOVER_WITHIN < s.ratio < CROSSOVER_WITHIN:
            say(progress, f"a {s.ratio:.3f}x speedup: timing it again with the candidate prepared first")
            swapped = await self._benches.timed(
                texts, owner, rounds, 0, label, reference, check, info, peaks, progress, candidate_first=True
            )
            result = bench_stage.in_both_orders(result, swapped)
        elif result.ok and s is not None and s.ratio > REMEASURE_ABOVE:
            say(progress, f"a {s.ratio:.1f}x speedup: measuring it again on fresh inputs")
            again = await self._benches.timed(texts, owner, rounds, 1, label, reference, check, info, peaks, progress)
            result = bench_stage.remeasured(again, s.ratio)
        return replace(_with_duration(result, time.perf_counter() - started), peaks_s=peaks_s)

    # ------------------------------------------------------------------------------------------ screen

    async def screen(
        self,
        against: str | Path,
        variants: list[str],
        *,
        baseline: str | None = None,
        deadline_s: float = 60.0,
        finalists: int = 2,
        progress: Progress | None = None,
        module: ModuleTests | None = None,
    ) -> ScreenResult:
        """Screen many variants (kernel code, or whole files) with the test of `against` in one job: each runs the
        captured calls on the test's own inputs (its outputs compared here with the baseline's), and on a GPU the
        correct ones are ranked by short timings until `finalists` are left. `baseline`: the code they are variants
        of (default: `against` itself). Screen timings only rank; the full check and bench confirm. `module`: the
        texts are a repository's module, screened on the calls its tests make."""
        started = time.perf_counter()
        reference = _read(against, "reference", module)
        info = RuntimeFacts.from_dict(await self.pool.runtime_info())
        peaks = await self.device_peaks(progress) if info.backend != "interpreter" else None
        base_kernel = reference.kernel_section if baseline is None else _kernel_section(baseline)
        if base_kernel is None:
            raise BadInput("the baseline of a screening does not parse")
        job_dir = self._folders.new()
        reference_text = reference.compose(base_kernel).text
        modules = [self._benches.module("reference", reference_text, reference, job_dir)]
        labels, unparsed = [], {}
        for i, variant in enumerate(variants, 1):
            label, kernel = f"v{i}", _kernel_section(variant)
            labels.append(label)
            if kernel is None:
                unparsed[label] = ScreenedVariant(label, "failed", "does not parse")
            else:
                modules.append(self._benches.module(label, reference.compose(kernel).text, reference, job_dir))
        plan = ScreenPlan(deadline_s, finalists, compile_workers=min(16, usable_cores()))
        cache = cache_request(seed=text_key(reference_text), keep=None)
        timed = info.backend != "interpreter"
        job = screening_verdict.screen_job(modules, reference, self.options, job_dir / "outputs", plan, cache, timed)
        say(progress, f"screening {len(variants)} variant(s) of {Path(reference.path).name}")
        try:
            outcome = await self.pool.run(job, timeout_s=deadline_s + self.options.timeout_s, on_event=relay(progress))
            result = await asyncio.to_thread(
                screening_verdict.screen_result, outcome, labels, job_dir / "outputs", info, peaks, self.options
            )
        finally:
            await removed(job_dir)
        if unparsed:
            result = replace(result, variants=tuple(unparsed.get(v.label, v) for v in result.variants))
        return _with_duration(result, time.perf_counter() - started)

    # ------------------------------------------------------------------------------------------ profile

    async def profile(
        self, file: str | Path | None = None, *, source: str | None = None, progress: Progress | None = None
    ) -> ProfileResult:
        """Each kernel of the file measured by the vendor's profiler over the calls a timing would time (achieved
        occupancy, DRAM and SM throughput, duration), in a sandboxed job with the device alone. Informational: no
        check runs here (check the file first); `unavailable` where no profiler can run (no GPU; no Nsight
        Compute on NVIDIA, no rocprofv3 on ROCm)."""
        started = time.perf_counter()
        label = str(file) if file is not None else CANDIDATE_LABEL
        try:
            owner = parse_triton_file(source if source is not None else source_text(file), label, require_tests=True)
        except TritonFileError as e:
            raise BadInput(str(e)) from e
        info = RuntimeFacts.from_dict(await self.pool.runtime_info())
        if info.backend == "interpreter":
            return ProfileResult(ok=False, unavailable=True, file=label, message="profiling needs a GPU: no CUDA or "
                                 "ROCm device is visible")  # fmt: skip
        job_dir = self._folders.new()
        text = owner.compose().text
        module = self._benches.module("profiled", text, owner, job_dir)
        job_package.write_package(job_dir)  # what the profiler's own process imports: the job cannot see the zygote's
        job = profile_stage.profile_job(module, owner, self.options, job_dir, cache_request(text_key(text), None))
        say(progress, "profiling the kernels")
        try:
            outcome = await self.pool.run(job, timeout_s=self.options.timeout_s * 2, on_event=relay(progress))
        finally:
            await removed(job_dir)
        result = profile_stage.profile_result(outcome, label, owner, info.device, info.units)
        return _with_duration(result, time.perf_counter() - started)

    async def device_peaks(self, progress: Progress | None = None) -> Peaks:
        """The device's ceilings and noise margin (``device_peaks.DevicePeaks``)."""
        return await self._peaks.get(progress)


def _read(path: str | Path, role: str, module: ModuleTests | None) -> TritonFile:
    """The file at `path` for its `role`, or, for a repository's `module`, its text as that module; BadInput where it
    cannot be."""
    if module is None:
        return read_file(path, role)
    try:
        return as_module(module, source_text(path), str(path))
    except TritonFileError as e:
        raise BadInput(f"{role} {path}: {e}") from e


def _parsed(text: str, label: str, module: ModuleTests | None, require_tests: bool) -> TritonFile:
    return (
        parse_triton_file(text, label, require_tests=require_tests)
        if module is None
        else as_module(module, text, label)
    )


def _kernel_section(code: str) -> str | None:
    try:
        return parse_triton_file(code, CANDIDATE_LABEL, require_tests=False).kernel_section
    except TritonFileError:
        return None


def _unparsed(error: TritonFileError, label: str, against: str | Path | None, started: float) -> CheckResult:
    """The verdict on a candidate that does not parse."""
    return CheckResult(
        ok=False,
        stage="parse",
        backend=None,
        file=label,
        message=str(error),
        diagnostics=(Diagnostic(error.line, error.column, "error", str(error), file=label),),
        reference=str(against) if against else None,
        duration_s=time.perf_counter() - started,
    )


def _import_in_background(module: str) -> None:
    """Start importing `module` on a thread of its own: a command's first outputs are read with torch, whose import
    (seconds) then overlaps the workers' start instead of following it."""
    if module not in sys.modules:
        threading.Thread(target=importlib.import_module, args=(module,), daemon=True, name=f"import {module}").start()


def _with_duration(result, seconds: float):
    return replace(result, duration_s=seconds)
