"""The evaluator's public entry point: `Evaluator.check`, `Evaluator.bench` (and `screen`, `profile`), async, with
progress callbacks.

User code only ever runs in worker processes (``pool.py``); this module parses, composes the file with the
reference's test, dispatches jobs, compares outputs and turns everything into plain result data.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import importlib.util
import keyword
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from . import bench as bench_stage
from . import check as check_stage
from . import job_package, reference_costs, screening_verdict
from . import peaks as peaks_cache
from . import profile as profile_stage
from .options import EvalOptions
from .pool import JobOutcome, WorkerPool, usable_cores
from .reference_probes import hung_probe, is_usable, judge_reference_probes, without_hung
from .results import BenchResult, CheckResult, Diagnostic, Peaks, ProfileResult, ScreenedVariant, ScreenResult
from .shared.probe_rules import probe_place
from .shared.protocol import PeaksJob, cache_request, probe_input_file
from .shared.screening import ScreenPlan
from .single_flight import SingleFlight
from .speedup import crossed
from .timing_rules import CROSSOVER_WITHIN, REMEASURE_ABOVE, BatchClock
from .triton_file import Composed, TritonFile, TritonFileError, parse_triton_file, read_source, read_triton_file
from .verdict import UNPOISONED_CAVEAT, verdict

Progress = Callable[[str], None]
CANDIDATE_LABEL = "<candidate>"  # a source checked without a file name
HUNG_PROBE_RETRIES = 2  # runs of a reference again, each without a probe it hung in (``_reference_job``)
REFERENCE_RERUNS = 3  # fresh processes that rerun a reference a candidate disagrees with (see _rerun_reference)


class BadInput(ValueError):
    """The input cannot be evaluated (missing file, not a Triton file, no test, a reference that fails). A reference
    that fails its own test carries that verdict (`verdict`)."""

    def __init__(self, message: str, verdict: CheckResult | None = None):
        super().__init__(message)
        self.verdict = verdict


class Evaluator:
    """Checks and times Triton files. Reuse one Evaluator: workers stay warm and reference runs are cached."""

    def __init__(self, options: EvalOptions | None = None, pool: WorkerPool | None = None):
        self.options = options or EvalOptions()
        self.pool = pool or WorkerPool(
            backend=self.options.backend,
            spares=self.options.spares,
            max_concurrent=self.options.max_concurrent,
            host_jobs=self.options.host_jobs,
            gpu_id=self.options.gpu_id,
            isolation=self.options.isolation,
            compile_cache=self.options.compile_cache,
        )
        self._scratch = Path(tempfile.mkdtemp())
        self._references: dict[str, check_stage.ReferenceRun] = {}
        self._first_runs: SingleFlight[check_stage.ReferenceRun] = SingleFlight()  # checks at once share one
        self._reruns: dict[str | None, asyncio.Lock] = {}
        self._versions: dict[str, str] = {}  # a user's file -> the text key of its last version checked
        self._peaks: Peaks | None = None
        self._measuring_peaks = asyncio.Lock()  # timings started together wait for one measurement of the device
        self._serial = 0
        _import_in_background("torch")  # read outputs with it later; meanwhile the workers start

    async def __aenter__(self) -> Evaluator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.pool.aclose()
        await _removed(self._scratch)

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
        reference = self._read(against, "reference") if against is not None else None
        candidate_text = source if source is not None else self._text_of(file)
        try:
            candidate = parse_triton_file(candidate_text, label, require_tests=reference is None)
        except TritonFileError as e:
            if e.kind != "syntax" and reference is None:
                raise BadInput(str(e)) from e
            return CheckResult(
                ok=False,
                stage="parse",
                backend=None,
                file=label,
                message=str(e),
                diagnostics=(Diagnostic(e.line, e.column, "error", str(e), file=label),),
                reference=str(against) if against else None,
                duration_s=time.perf_counter() - started,
            )
        ref_run = await self._reference_run(reference, progress) if reference is not None else None
        if ref_run is not None:
            ref_run.users += 1  # its outputs stay until this check ends, even if it is forgotten meanwhile
        try:
            return await self._check_candidate(candidate, reference, ref_run, label, progress, started)
        finally:
            if ref_run is not None:
                ref_run.users -= 1
                if ref_run.forgotten and not ref_run.users:
                    await _removed(ref_run.outputs)

    async def prepare_reference(self, file: str | Path, progress: Progress | None = None) -> None:
        """Run `file` as a reference now (with its probes), where no run of it is kept: the checks against it then
        find it done. A search does it before planning, to know what checking a finalist takes."""
        await self._reference_run(self._read(file, "reference"), progress)

    async def forget_reference(self, file: str | Path) -> None:
        """Drop the kept run of `file` as a reference (its outputs stay on disk until the evaluator closes): for work
        over many references, once no check against it is to come. A check against it still running keeps it until
        that check ends; a later check runs the reference again."""
        try:
            key = _text_key(self._read(file, "reference").compose().text)
        except BadInput:
            return
        ref_run = self._references.pop(key, None)
        if ref_run is None:
            return
        ref_run.forgotten = True
        if not ref_run.users:
            await _removed(ref_run.outputs)

    async def _check_candidate(
        self,
        candidate: TritonFile,
        reference: TritonFile | None,
        ref_run: check_stage.ReferenceRun | None,
        label: str,
        progress: Progress | None,
        started: float,
    ) -> CheckResult:
        """`check`'s verdict once the reference (if any) has run."""
        if ref_run is not None and ref_run.not_checkable is not None:
            ref_verdict = ref_run.not_checkable
            return replace(
                ref_verdict,
                file=label,
                kernels=candidate.kernels,
                reference=reference.path,
                message=f"{ref_verdict.message} (in the reference {Path(reference.path).name})",
                tests=(),
                duration_s=time.perf_counter() - started,
            )
        composed = (reference or candidate).compose(candidate.kernel_section)
        poison = ref_run.poison if ref_run is not None else True
        result = await self._candidate_job(composed, candidate, reference, ref_run, label, poison, progress)
        if ref_run is None and poison and not result.ok and any(t.kind == "error" for t in result.tests):
            # The user's own file raised: only because new allocations are poisoned? (A wrong result, which an
            # unwritten output gives, a crash or a hang are never retried.)
            unpoisoned = await self._candidate_job(composed, candidate, None, None, label, False, progress)
            if unpoisoned.ok:
                result, poison = unpoisoned, False
        if not poison:
            result = replace(result, caveats=(*result.caveats, UNPOISONED_CAVEAT))
        return _with_duration(result, time.perf_counter() - started)

    async def check_against_self(
        self, file: str | Path, progress: Progress | None = None
    ) -> tuple[CheckResult, CheckResult | None]:
        """`check(file)` and, where it passes, `check(file, against=file)`, in two jobs rather than three: the file's
        run as a reference is also its own check (the same tests, the same verdict). Returns (alone, against itself),
        the second None where the file fails alone."""
        started = time.perf_counter()
        reference = self._read(file, "file")
        try:
            ref_run = await self._reference_run(reference, progress)
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

    async def _candidate_job(
        self,
        composed: Composed,
        candidate: TritonFile,
        reference: TritonFile | None,
        ref_run: check_stage.ReferenceRun | None,
        label: str,
        poison: bool,
        progress: Progress | None,
        again: bool = False,
    ) -> CheckResult:
        """One check job of `composed` (a candidate with the reference's test, or a file alone) and its verdict.
        Where the candidate differs and a rerun of the reference takes probes away (the reference fails there too),
        the job runs once more (`again`): a fault on such a probe ended the candidate's probes before the others.
        So does a job that hung in a probe on which the reference hangs too (``_reference_hangs_on``)."""
        job_dir = self._new_dir()
        owner = reference or candidate
        path = job_dir / _file_name(owner)
        path.write_text(composed.text)
        probes = _replay_probes(ref_run, job_dir) if ref_run is not None else None
        if ref_run is not None:  # a candidate starts from the reference's compilations and keeps none of its own
            cache = cache_request(seed=ref_run.cache_key, keep=None)
        else:  # the user's own file: it also starts from what its previous version compiled
            key = _text_key(composed.text)
            earlier = self._versions.get(label) if label != CANDIDATE_LABEL else None
            cache = cache_request(seed=[key, earlier] if earlier and earlier != key else key, keep=key)
            self._versions[label] = key
        job = check_stage.check_job(
            path, path.stem, owner, job_dir, self.options, probes, cache, poison
        )
        _say(progress, f"running the tests of {Path(label).name}")
        try:
            outcome = await self.pool.run(job, timeout_s=self.options.timeout_s, on_event=_relay(progress))
            judge = lambda: verdict(
                outcome, composed, candidate, reference, ref_run, job_dir, self.options, self.pool.info, label
            )
            hung = hung_probe(outcome.last_progress) if outcome.status == "timeout" and not again else None
            if hung and ref_run is not None and await self._reference_hangs_on(ref_run, composed, hung, progress):
                _say(progress, f"running the tests of {Path(label).name} again without {hung}, on which the "
                               "reference hangs too")  # fmt: skip
                return await self._candidate_job(
                    composed, candidate, reference, ref_run, label, poison, progress, again=True
                )
            against_reference = " with the reference's" if ref_run is not None else ""
            _say(progress, f"comparing the outputs of {Path(label).name}{against_reference}")
            result = await asyncio.to_thread(judge)
            if _differs(result) and ref_run is not None:  # the reference itself may not reproduce what differs
                usable = _usable_probes(ref_run)
                if await self._fold_reference_twin(ref_run, composed, outcome, job_dir):
                    result = await asyncio.to_thread(judge)
                if _differs(result):
                    await self._rerun_reference(ref_run, progress)
                    result = await asyncio.to_thread(judge)
                if _differs(result) and _usable_probes(ref_run) < usable and not again:
                    _say(progress, f"running the tests of {Path(label).name} again without the probes the reference "
                                   "fails on")  # fmt: skip
                    return await self._candidate_job(
                        composed, candidate, reference, ref_run, label, poison, progress, again=True
                    )
            return result
        finally:
            await _removed(job_dir)

    async def _rerun_reference(self, ref_run: check_stage.ReferenceRun, progress: Progress | None) -> None:
        """A candidate's outputs differ from the reference's: run the reference again in fresh processes (its tests
        twice, its usable probes once; up to REFERENCE_RERUNS times, until one shows variation) so that outputs it
        does not reproduce leave the comparison (``check.rerun_variation``). Once per reference; concurrent
        candidates wait for it."""
        async with self._variation_lock(ref_run):
            if ref_run.reran:
                return
            job_dir = self._new_dir()
            path = job_dir / _file_name(ref_run.tfile)
            path.write_text(ref_run.tfile.compose().text)
            probes = _replay_probes(ref_run, job_dir)
            cache = cache_request(seed=ref_run.cache_key, keep=None)
            job = check_stage.check_job(
                path, path.stem, ref_run.tfile, job_dir, self.options, probes, cache, ref_run.poison,
                True,
            )  # fmt: skip
            try:
                for attempt in range(1, REFERENCE_RERUNS + 1):  # until it shows variation
                    _say(progress, f"running the reference {Path(ref_run.tfile.path).name} again ({attempt} of "
                                   f"{REFERENCE_RERUNS}: is it deterministic?)")  # fmt: skip
                    outcome = await self.pool.run(job, timeout_s=self.options.timeout_s, on_event=_relay(progress))
                    hung = hung_probe(outcome.last_progress) if outcome.status == "timeout" else None
                    if hung and ref_run.probes is not None:
                        why = f"the reference hung on these inputs when run again ({outcome.message})"
                        ref_run.probes = without_hung(ref_run.probes, hung, why)
                    found = outcome.status == "ok" and outcome.result is not None and await asyncio.to_thread(
                        check_stage.rerun_variation, ref_run, outcome.result, job_dir / "outputs", self.options
                    )
                    if found or outcome.status != "ok":
                        break
            finally:
                await _removed(job_dir)
            ref_run.reran = True

    async def _reference_hangs_on(
        self, ref_run: check_stage.ReferenceRun, composed: Composed, where: str, progress: Progress | None
    ) -> bool:
        """A candidate's job hung in the probe `where`, which the reference finished when it made it: does the
        reference hang there too? A twin (the reference's program, byte for byte) answers it at once; otherwise the
        reference runs again (``_rerun_reference``, which drops a probe it hangs on). Some kernels finish only
        sometimes (TritonBench-revised `spinning_lock_reduction.py` spins on locks other programs set, and hung in
        its own twin's probe of other sizes on an H200 busy with 13 other checks). Returns whether the probe left."""
        if not is_usable(ref_run.probes, where):
            return True  # another candidate's rerun of the reference already took it away
        if _is_twin(composed, ref_run):
            async with self._variation_lock(ref_run):
                if ref_run.probes is not None:
                    why = "the reference's own code hung on these inputs in another run (its twin's)"
                    ref_run.probes = without_hung(ref_run.probes, where, why)
        else:
            await self._rerun_reference(ref_run, progress)
        return not is_usable(ref_run.probes, where)

    async def _fold_reference_twin(
        self, ref_run: check_stage.ReferenceRun, composed: Composed, outcome: JobOutcome, job_dir: Path
    ) -> bool:
        """A candidate whose composed program is the reference's, byte for byte, is one more fresh-process run of
        the reference: fold its outputs into the reference's variation (``check.rerun_variation``). Safe with hostile
        code, since that code is exactly the reference's. Returns whether it applied."""
        if not _is_twin(composed, ref_run) or outcome.status != "ok" or not isinstance(outcome.result, dict):
            return False
        async with self._variation_lock(ref_run):
            await asyncio.to_thread(
                check_stage.rerun_variation, ref_run, outcome.result, job_dir / "outputs", self.options
            )
        return True

    def _variation_lock(self, ref_run: check_stage.ReferenceRun) -> asyncio.Lock:
        """Held while what a reference's reruns found is folded into it: concurrent candidates see it whole."""
        return self._reruns.setdefault(ref_run.cache_key, asyncio.Lock())

    async def _reference_run(self, reference: TritonFile, progress: Progress | None) -> check_stage.ReferenceRun:
        composed = reference.compose()
        key = _text_key(composed.text)
        cached = self._references.get(key)
        if cached is not None:
            return cached
        if self._first_runs.running(key):
            _say(progress, f"waiting for the run of the reference {Path(reference.path).name} that another check "
                           "started")  # fmt: skip

        listening = [progress]  # the run this check starts speaks to it while it waits, to no one once it has left

        def relay(message: str) -> None:
            if listening[0] is not None:
                listening[0](message)

        async def first_run() -> check_stage.ReferenceRun:
            started = time.perf_counter()
            try:
                run = await self._first_reference_run(reference, composed, key, relay if progress else None)
            except BadInput:
                await self._record_reference_cost(key, time.perf_counter() - started)
                raise
            await self._record_reference_cost(key, time.perf_counter() - started)
            self._references[key] = run
            return run

        try:
            return await self._first_runs.run(key, first_run)
        finally:
            listening[0] = None

    async def _record_reference_cost(self, key: str, seconds: float) -> None:
        await asyncio.to_thread(reference_costs.record, self.options.compile_cache, key, seconds)

    def known_reference_seconds(self, references: list[Path]) -> dict[Path, float]:
        """How long each of `references`' own run took when it last ran with this compile store
        (``reference_costs``), for those known: work over many references can start the slow ones first."""
        costs = reference_costs.load(self.options.compile_cache)
        known: dict[Path, float] = {}
        if not costs:  # nothing recorded (a first run, or no store): no file need be read
            return known
        for path in references:
            with contextlib.suppress(BadInput):
                seconds = costs.get(_text_key(self._read(path, "reference").compose().text))
                if seconds is not None:
                    known[path] = seconds
        return known

    async def _first_reference_run(
        self, reference: TritonFile, composed: Composed, key: str, progress: Progress | None
    ) -> check_stage.ReferenceRun:
        make = (
            {"make": {"seed": secrets.randbits(31), "variants": self.options.probe_variants}}
            if self.options.fresh_inputs
            else None
        )
        cache = cache_request(seed=key, keep=key)
        first_problem, first_verdict = "", None
        for poison in (True, False):  # without poisoning only if it fails with it: see UNPOISONED_CAVEAT
            outcome, job_dir = await self._reference_job(reference, composed, make, cache, poison, progress)
            _say(progress, f"reading the outputs of the reference {Path(reference.path).name}")
            own = await asyncio.to_thread(
                verdict,
                outcome, composed, reference, None, None, job_dir, self.options, self.pool.info, reference.path,
            )  # fmt: skip
            if own.not_checkable is not None:
                await _removed(job_dir)
                return check_stage.ReferenceRun(reference, outcome, job_dir, None, own, key)
            problem = check_stage.reference_problem(outcome)
            if not problem:
                break
            await _removed(job_dir)
            if poison:
                first_problem, first_verdict = problem, own
            if not poison or not check_stage.failed_by_error(outcome):
                message = f"the reference {reference.path} does not pass its own test: {first_problem}"
                raise BadInput(message, first_verdict)
        result, outputs = outcome.result or {}, job_dir / "outputs"
        probes = await asyncio.to_thread(judge_reference_probes, result, outputs, self.options)
        unstable, unwritten = await asyncio.to_thread(check_stage.test_reproduction, result, outputs, self.options)
        return check_stage.ReferenceRun(
            reference, outcome, job_dir, probes, cache_key=key, unstable=unstable, unwritten=unwritten, poison=poison,
            own=own,
        )  # fmt: skip

    async def _reference_job(
        self,
        reference: TritonFile,
        composed: Composed,
        make: dict[str, Any] | None,
        cache: dict[str, Any],
        poison: bool,
        progress: Progress | None,
    ) -> tuple[JobOutcome, Path]:
        """One run of the reference's check job (and its job folder). Where it hung in a probe it made, it runs
        again without that probe, at most ``HUNG_PROBE_RETRIES`` times: a kernel that spins on locks other programs
        set may hang at other sizes (TritonBench-revised `spinning_lock_reduction.py`, at 304 programs on an H200),
        which its own test never asked of it."""
        hung: list[str] = []
        while True:
            job_dir = self._new_dir()
            path = job_dir / _file_name(reference)
            path.write_text(composed.text)
            asked = {**make, "make": {**make["make"], "hung": hung}} if make is not None and hung else make
            job = check_stage.check_job(
                path, path.stem, reference, job_dir, self.options, asked, cache, poison, True,
                check_stage.reference_stop_kinds(poison),
            )  # fmt: skip
            _say(progress, f"running the reference {Path(reference.path).name}")
            try:
                outcome = await self.pool.run(job, timeout_s=self.options.timeout_s, on_event=_relay(progress))
            except BaseException:  # cancelled: nothing is cached, so nothing is kept
                await _removed(job_dir)
                raise
            where = hung_probe(outcome.last_progress) if outcome.status == "timeout" and make is not None else None
            if where is None or len(hung) >= HUNG_PROBE_RETRIES:
                return outcome, job_dir
            await _removed(job_dir)
            hung.append(probe_place(where))
            _say(progress, f"the reference {Path(reference.path).name} hung in {where} ({outcome.message}): running "
                           "it again without that probe")  # fmt: skip

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
    ) -> BenchResult:
        """Time the captured bench calls (the `bench_*` functions', else the tests'). With `against`, the
        reference and the candidate are interleaved in one process and a speedup interval is reported.
        The candidate must pass `check` first (unless `check_first=False` because the caller just did).
        `rounds` fixes the number of interleaved timing rounds (default: the options' `bench_rounds`, else, against a
        reference, as many as the speedup needs to be decided; ``bench.round_plan``)."""
        started = time.perf_counter()
        label = str(file) if file is not None else CANDIDATE_LABEL
        check = await self.check(file, source=source, against=against, progress=progress) if check_first else None
        info = await self.pool.runtime_info()
        if check is not None and not check.ok:
            return BenchResult(
                ok=False,
                stage=check.stage,
                backend=check.backend,
                file=label,
                message=f"not timed: the check failed ({check.message})",
                check=check,
                diagnostics=check.diagnostics,
                reference=str(against) if against else None,
            )
        if info.get("backend") == "interpreter":
            return BenchResult(
                ok=False,
                stage="perf",
                backend="interpreter",
                file=label,
                check=check,
                message="timing needs a GPU: no CUDA or ROCm device is visible "
                "(correctness was checked with the Triton interpreter)",
            )
        reference = self._read(against, "reference") if against is not None else None
        candidate_text = source if source is not None else self._text_of(file)
        candidate = parse_triton_file(candidate_text, label, require_tests=reference is None)
        owner = reference or candidate
        measuring = time.perf_counter()
        peaks = await self.device_peaks(progress)
        peaks_s = time.perf_counter() - measuring
        texts = {"candidate": owner.compose(candidate.kernel_section).text}
        if reference is not None:
            texts = {"reference": reference.compose().text, **texts}
        _say(progress, "timing" + (" against the reference" if reference else ""))
        result = await self._timed(texts, owner, rounds, 0, label, reference, check, info, peaks, progress)
        s = result.speedup
        if result.ok and s is not None and s.significant and 1 / CROSSOVER_WITHIN < s.ratio < CROSSOVER_WITHIN:
            _say(progress, f"a {s.ratio:.3f}x speedup: timing it again with the candidate prepared first")
            swapped = await self._timed(
                texts, owner, rounds, 0, label, reference, check, info, peaks, progress, candidate_first=True
            )
            if not swapped.ok or swapped.speedup is None:
                result = swapped  # its failure is the verdict
            elif _timed_calls(swapped) != _timed_calls(result):  # the candidate, imported first, chose them
                result = replace(
                    swapped,
                    ok=False,
                    speedup=None,
                    message="timing rejected: timed again with the candidate prepared first, it timed other calls "
                    f"({', '.join(_timed_calls(swapped)) or 'none'}) than the first timing "
                    f"({', '.join(_timed_calls(result))})",
                )
            else:
                both = crossed(s, swapped.speedup)
                result = replace(
                    result,
                    speedup=both,
                    alone_s=result.alone_s + swapped.alone_s,
                    phases_s={
                        k: result.phases_s.get(k, 0.0) + swapped.phases_s.get(k, 0.0)
                        for k in {**result.phases_s, **swapped.phases_s}
                    },
                    message=f"{result.message}; timed again with the candidate prepared first: "
                    f"{swapped.speedup.ratio:.3f}x; both orders together {both.ratio:.3f}x ({both.verdict})",
                )
        elif result.ok and s is not None and s.ratio > REMEASURE_ABOVE:
            _say(progress, f"a {s.ratio:.1f}x speedup: measuring it again on fresh inputs")
            again = await self._timed(texts, owner, rounds, 1, label, reference, check, info, peaks, progress)
            if again.ok and again.speedup is not None:
                again = replace(
                    again,
                    speedup=replace(again.speedup, remeasured_from=s.ratio),
                    message=f"{again.message} (re-measured on fresh inputs; first measurement {s.ratio:.3f}x)",
                )
            result = again
        return replace(_with_duration(result, time.perf_counter() - started), peaks_s=peaks_s)

    async def _timed(
        self,
        texts: dict[str, str],
        owner: TritonFile,
        rounds: int | None,
        input_seed: int,
        label: str,
        reference: TritonFile | None,
        check: CheckResult | None,
        info: dict[str, Any],
        peaks: Peaks,
        progress: Progress | None,
        candidate_first: bool = False,
    ) -> BenchResult:
        """One bench job: the variants timed interleaved in one process, the caller's clock over the timed batch.
        The variants are loaded and prepared in the order of `texts` (the reference first), or, `candidate_first`,
        the other way round."""
        job_dir = self._new_dir()
        order = list(texts.items())[::-1] if candidate_first else list(texts.items())
        modules = [self._bench_module(name, text, owner, job_dir) for name, text in order]
        # Compiled code is taken from the reference (or the file alone) and kept only when no candidate is in the job.
        first = _text_key(next(iter(texts.values())))
        cache = cache_request(seed=first, keep=first if len(texts) == 1 and reference is None else None)
        plan = bench_stage.round_plan(self.options, rounds, reference is not None, peaks.noise_margin)
        job = bench_stage.bench_job(modules, owner, self.options, job_dir / "outputs", plan, input_seed, cache)
        clock = BatchClock()
        relay = _relay(progress)

        def on_event(event: dict[str, Any]) -> None:
            clock.on_event(event)
            if relay is not None:
                relay(event)

        try:
            outcome = await self.pool.run(job, timeout_s=self.options.timeout_s * 2, on_event=on_event)
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
                self.options.tolerances,
            )
        finally:
            await _removed(job_dir)

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
    ) -> ScreenResult:
        """Screen many variants (kernel code, or whole files) with the test of `against` in one job: each runs the
        captured calls on the test's own inputs (its outputs compared here with the baseline's), and on a GPU the
        correct ones are ranked by short timings until `finalists` are left. `baseline`: the code they are variants
        of (default: `against` itself). Screen timings only rank; the full check and bench confirm."""
        started = time.perf_counter()
        reference = self._read(against, "reference")
        info = await self.pool.runtime_info()
        peaks = await self.device_peaks(progress) if info.get("backend") != "interpreter" else None
        base_kernel = reference.kernel_section if baseline is None else self._kernel_section(baseline)
        if base_kernel is None:
            raise BadInput("the baseline of a screening does not parse")
        job_dir = self._new_dir()
        reference_text = reference.compose(base_kernel).text
        modules = [self._bench_module("reference", reference_text, reference, job_dir)]
        labels, unparsed = [], {}
        for i, variant in enumerate(variants, 1):
            label, kernel = f"v{i}", self._kernel_section(variant)
            labels.append(label)
            if kernel is None:
                unparsed[label] = ScreenedVariant(label, "failed", "does not parse")
            else:
                modules.append(self._bench_module(label, reference.compose(kernel).text, reference, job_dir))
        plan = ScreenPlan(deadline_s, finalists, compile_workers=min(16, usable_cores()))
        cache = cache_request(seed=_text_key(reference_text), keep=None)
        timed = info.get("backend") != "interpreter"
        job = screening_verdict.screen_job(modules, reference, self.options, job_dir / "outputs", plan, cache, timed)
        _say(progress, f"screening {len(variants)} variant(s) of {Path(reference.path).name}")
        try:
            outcome = await self.pool.run(job, timeout_s=deadline_s + self.options.timeout_s, on_event=_relay(progress))
            result = await asyncio.to_thread(
                screening_verdict.screen_result, outcome, labels, job_dir / "outputs", info, peaks, self.options
            )
        finally:
            await _removed(job_dir)
        if unparsed:
            result = replace(result, variants=tuple(unparsed.get(v.label, v) for v in result.variants))
        return _with_duration(result, time.perf_counter() - started)

    # ------------------------------------------------------------------------------------------ profile

    async def profile(
        self, file: str | Path | None = None, *, source: str | None = None, progress: Progress | None = None
    ) -> ProfileResult:
        """Each kernel of the file measured by the vendor's profiler over the calls a timing would time (achieved
        occupancy, DRAM and SM throughput, duration), in a sandboxed job with the device alone. Informational: no
        check runs here (check the file first); `unavailable` where no profiler can run (no GPU, no Nsight
        Compute, ROCm)."""
        started = time.perf_counter()
        label = str(file) if file is not None else CANDIDATE_LABEL
        try:
            owner = parse_triton_file(source if source is not None else self._text_of(file), label, require_tests=True)
        except TritonFileError as e:
            raise BadInput(str(e)) from e
        info = await self.pool.runtime_info()
        if info.get("backend") == "interpreter":
            return ProfileResult(ok=False, unavailable=True, file=label, message="profiling needs a GPU: no CUDA or "
                                 "ROCm device is visible")  # fmt: skip
        job_dir = self._new_dir()
        text = owner.compose().text
        module = self._bench_module("profiled", text, owner, job_dir)
        job_package.write_package(job_dir)  # what the profiler's own process imports: the job cannot see the zygote's
        job = profile_stage.profile_job(module, owner, self.options, job_dir, cache_request(_text_key(text), None))
        _say(progress, "profiling the kernels")
        try:
            outcome = await self.pool.run(job, timeout_s=self.options.timeout_s * 2, on_event=_relay(progress))
        finally:
            await _removed(job_dir)
        result = profile_stage.profile_result(outcome, label, owner, info.get("device"))
        return _with_duration(result, time.perf_counter() - started)

    def _kernel_section(self, code: str) -> str | None:
        try:
            return parse_triton_file(code, CANDIDATE_LABEL, require_tests=False).kernel_section
        except TritonFileError:
            return None

    async def device_peaks(self, progress: Progress | None = None) -> Peaks:
        """The device's ceilings and noise margin: validated cache, else measured once in a job that runs no user
        code (and cached by this process only), else the datasheet's. Callers at once wait for the one measurement:
        six `geak eval` timings that started together each measured the device, alone, one after another (about
        70 s on an H200 before the first timing ended)."""
        if self._peaks is not None:
            return self._peaks
        async with self._measuring_peaks:
            if self._peaks is None:
                self._peaks = await self._device_peaks(progress)
        return self._peaks

    async def _device_peaks(self, progress: Progress | None) -> Peaks:
        info = await self.pool.runtime_info()
        cached = peaks_cache.read_cached(info) if self.options.measure_peaks else None
        if cached is not None:
            return cached
        _say(progress, "measuring the device's peaks and noise floor (once per device)")
        job = asdict(PeaksJob(kind="peaks", measure=self.options.measure_peaks))
        outcome = await self.pool.run(job, timeout_s=self.options.timeout_s, on_event=_relay(progress))
        found = (outcome.result or {}).get("peaks") if outcome.status == "ok" else None
        peaks = peaks_cache.measured_peaks(found, str(info.get("device")))
        if peaks is not None:
            peaks_cache.store(info, peaks)
        else:
            peaks = peaks_cache.datasheet_peaks(str(info.get("device")), int((found or {}).get("l2_bytes") or 0))
        return peaks

    def _bench_module(self, label: str, text: str, owner: TritonFile, job_dir: Path) -> dict[str, Any]:
        module_name = self._module_name()  # neutral: the file's name does not say which variant is the reference
        path = job_dir / f"{module_name}.py"
        path.write_text(text)
        return {
            "label": label,
            "path": str(path),
            "module_name": module_name,
            "wrappers": list(owner.entry_points),
            "kernels": [k.name for k in owner.kernels],
        }

    # ------------------------------------------------------------------------------------------ helpers

    def _read(self, path: str | Path, role: str) -> TritonFile:
        try:
            return read_triton_file(path)
        except FileNotFoundError as e:
            raise BadInput(f"{role} {path}: no such file") from e
        except TritonFileError as e:
            raise BadInput(f"{role} {path}: {e}") from e

    def _text_of(self, file: str | Path | None) -> str:
        if file is None:
            raise BadInput("give a file or source text")
        try:
            return read_source(file)
        except FileNotFoundError as e:
            raise BadInput(f"{file}: no such file") from e
        except TritonFileError as e:
            raise BadInput(str(e)) from e

    def _new_dir(self) -> Path:
        """A job's directory: named alike for references and candidates (a job cannot tell which it runs)."""
        self._serial += 1
        path = self._scratch / f"job{self._serial}"
        (path / "outputs").mkdir(parents=True)
        return path

    def _module_name(self) -> str:
        self._serial += 1
        return f"kernels_{self._serial}"


def _timed_calls(result: BenchResult) -> list[str]:
    """The signatures of the reference's calls a timing timed (which calls, ``calls_to_time``)."""
    return [c.signature for c in result.reference_calls]


async def _removed(path: Path) -> None:
    """Remove a job's directory off the event loop: removing the outputs of checks held a `geak eval`'s loop for
    16 s of 250 on an H200 (every job's messages waiting meanwhile)."""
    await asyncio.to_thread(shutil.rmtree, path, True)


def _import_in_background(module: str) -> None:
    """Start importing `module` on a thread of its own: a command's first outputs are read with torch, whose import
    (seconds) then overlaps the workers' start instead of following it."""
    if module not in sys.modules:
        threading.Thread(target=importlib.import_module, args=(module,), daemon=True, name=f"import {module}").start()


def _file_name(owner: TritonFile) -> str:
    """The name a check job's file goes by (its module's name is the stem): the test's owner's, as when it runs
    alone, so reference and candidate jobs look alike; `kernels.py` where that name cannot name a module."""
    stem = Path(owner.path).stem
    plain = stem.isidentifier() and not keyword.iskeyword(stem) and stem not in sys.stdlib_module_names
    return f"{stem}.py" if plain and importlib.util.find_spec(stem) is None else "kernels.py"


def _replay_probes(ref_run: check_stage.ReferenceRun, job_dir: Path) -> dict[str, Any] | None:
    """The job's `probes` field for replaying the reference's usable probes, their inputs copied into `job_dir`."""
    usable = ref_run.probes.usable if ref_run.probes is not None else ()
    for probe in usable:
        name = probe_input_file(probe["index"])
        shutil.copyfile(ref_run.outputs / "outputs" / name, job_dir / "outputs" / name)
    return {"replay": list(usable)} if usable else None


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _relay(progress: Progress | None) -> Callable[[dict[str, Any]], None] | None:
    if progress is None:
        return None

    def on_event(event: dict[str, Any]) -> None:
        running = f"running {event.get('test') or 'the file'}"
        if "programs" in event:
            progress(f"{running} ({event['programs']:,} kernel programs interpreted)")
        elif "compiling" in event:
            progress(f"{running}: compiling {event['compiling']}")
        elif "compiled" in event:
            progress(f"{running}: compiled {event['compiled']} in {event.get('compile_s', '?')} s")
        elif "test" in event:
            progress(f"running {event['test']}")
        elif "stage" in event:
            progress(str(event["stage"]))
        elif "bench" in event:
            progress(f"timing {event['bench']}")
        elif "screen" in event:
            progress(f"screening: {event['screen']}")

    return on_event


def _with_duration(result, seconds: float):
    return replace(result, duration_s=seconds)


def _usable_probes(ref_run: check_stage.ReferenceRun) -> int:
    return len(ref_run.probes.usable) if ref_run.probes is not None else 0


def _is_twin(composed: Composed, ref_run: check_stage.ReferenceRun) -> bool:
    """Is the candidate's composed program the reference's, byte for byte (its code exactly the reference's)?"""
    return composed.text == ref_run.tfile.compose().text


def _differs(result: CheckResult) -> bool:
    """Did the candidate's outputs differ from the reference's?"""
    return result.comparison is not None and bool(result.comparison.mismatches)
