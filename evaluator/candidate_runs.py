"""The check jobs of candidates (a candidate's kernel code with the reference's test, or a user's file alone) and
their verdicts; where what the reference itself cannot run cut a candidate's run short, the job runs once more, for a
named reason (``Retry``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from . import check as check_stage
from .check import ReferenceRun
from .inputs import text_key
from .job_folders import JobFolders, file_name, removed
from .options import EvalOptions
from .pool import JobOutcome, WorkerPool
from .progress import Progress, relay, say
from .reference_probes import ReferenceProbes, hung_probe
from .reference_runs import ReferenceRuns, replay_probes, usable_probes
from .results import CheckResult
from .shared.protocol import cache_request
from .triton_file import Composed, TritonFile
from .verdict import UNPOISONED_CAVEAT, verdict

CANDIDATE_LABEL = "<candidate>"  # a source checked without a file name


class Retry(Enum):
    """Why a candidate's check job runs once more (at most once): a fault on, or a hang in, a probe the reference
    itself cannot run ended the candidate's probes before the others."""

    REFERENCE_HANGS_TOO = "without {probe}, on which the reference hangs too"  # it hung in that probe
    REFERENCE_FAILS_PROBES = "without the probes the reference fails on"  # it differs; a rerun took probes away


@dataclass(frozen=True)
class _Again:
    reason: Retry
    probe: str = ""  # the probe it hung in


class CandidateRuns:
    """Runs the check jobs of candidates against the references' kept runs (``ReferenceRuns``)."""

    def __init__(self, pool: WorkerPool, options: EvalOptions, folders: JobFolders, references: ReferenceRuns):
        self._pool = pool
        self._options = options
        self._folders = folders
        self._references = references
        self._versions: dict[str, str] = {}  # a user's file -> the text key of its last version checked

    async def verdict(
        self,
        candidate: TritonFile,
        reference: TritonFile | None,
        ref_run: ReferenceRun | None,
        label: str,
        progress: Progress | None,
        started: float,
    ) -> CheckResult:
        """`Evaluator.check`'s verdict once the reference (if any) has run."""
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
        if ref_run is None:
            result, _ = await self._own(candidate, label, progress)
        else:
            composed = reference.compose(candidate.kernel_section)
            result = await self.job(composed, candidate, reference, ref_run, label, ref_run.poison, progress)
            if not ref_run.poison:
                result = replace(result, caveats=(*result.caveats, UNPOISONED_CAVEAT))
        return replace(result, duration_s=time.perf_counter() - started)

    async def own_and_compared(
        self,
        candidate: TritonFile,
        reference: TritonFile,
        ref_run: ReferenceRun,
        label: str,
        progress: Progress | None,
        started: float,
    ) -> tuple[CheckResult, CheckResult | None]:
        """`Evaluator.check_and_compare_tests`: the candidate's own check and, where it passes and its job is the
        one its kernels would run with the reference's test (the same test section, ``_same_job``), that job's test
        outputs weighed against the reference's kept ones (its probes are not replayed: None otherwise)."""
        weighed: list[CheckResult] = []
        tests_only = replace(ref_run, probes=ReferenceProbes())
        composed = reference.compose(candidate.kernel_section)

        def weigh(outcome: JobOutcome, job_dir: Path) -> None:
            weighed.append(verdict(
                outcome, composed, candidate, reference, tests_only, job_dir, self._options, self._pool.facts, label
            ))  # fmt: skip

        shared = _same_job(candidate, reference, ref_run, composed.text)
        own, poisoned = await self._own(candidate, label, progress, weigh if shared else None)
        compared = weighed[0] if weighed and poisoned and own.ok else None
        return replace(own, duration_s=time.perf_counter() - started), compared

    async def _own(
        self,
        candidate: TritonFile,
        label: str,
        progress: Progress | None,
        also: Callable[[JobOutcome, Path], None] | None = None,
    ) -> tuple[CheckResult, bool]:
        """A user's file alone, and whether its verdict comes from its run with new allocations poisoned (else
        from its run without them, where it raised only with them). `also` is handed the poisoned run where it
        passes, before its folder goes."""
        composed = candidate.compose()
        result = await self.job(composed, candidate, None, None, label, True, progress, also)
        if result.ok or not any(t.kind == "error" for t in result.tests):
            return result, True
        # It raised: only because new allocations are poisoned? (A wrong result, which an unwritten output gives, a
        # crash or a hang are never retried.)
        unpoisoned = await self.job(composed, candidate, None, None, label, False, progress)
        if unpoisoned.ok:
            return replace(unpoisoned, caveats=(*unpoisoned.caveats, UNPOISONED_CAVEAT)), False
        return result, True

    async def job(
        self,
        composed: Composed,
        candidate: TritonFile,
        reference: TritonFile | None,
        ref_run: ReferenceRun | None,
        label: str,
        poison: bool,
        progress: Progress | None,
        also: Callable[[JobOutcome, Path], None] | None = None,
    ) -> CheckResult:
        """One check job of `composed` and its verdict, run once more where its first run asks for it (``Retry``);
        `also` (a user's file alone) is handed a passing run's outcome and folder (``own_and_compared``)."""
        again = False
        while True:
            judged = await self._run(composed, candidate, reference, ref_run, label, poison, progress, again, also)
            if isinstance(judged, CheckResult):
                return judged
            why = judged.reason.value.format(probe=judged.probe)
            say(progress, f"running the tests of {Path(label).name} again {why}")
            again = True

    async def _run(
        self,
        composed: Composed,
        candidate: TritonFile,
        reference: TritonFile | None,
        ref_run: ReferenceRun | None,
        label: str,
        poison: bool,
        progress: Progress | None,
        again: bool,
        also: Callable[[JobOutcome, Path], None] | None = None,
    ) -> CheckResult | _Again:
        """One run of the check job and its verdict, or, on a first run (not `again`), why it runs once more: where
        the candidate differs and a rerun of the reference takes probes away (the reference fails there too), or
        where it hung in a probe on which the reference hangs too (``ReferenceRuns.hangs_on``)."""
        job_dir = self._folders.new()
        owner = reference or candidate
        path = job_dir / file_name(owner)
        path.write_text(composed.text)
        probes = replay_probes(ref_run, job_dir) if ref_run is not None else None
        if ref_run is not None:  # a candidate starts from the reference's compilations and keeps none of its own
            cache = cache_request(seed=ref_run.cache_key, keep=None)
        else:  # the user's own file: it also starts from what its previous version compiled
            key = text_key(composed.text)
            earlier = self._versions.get(label) if label != CANDIDATE_LABEL else None
            cache = cache_request(seed=[key, earlier] if earlier and earlier != key else key, keep=key)
            self._versions[label] = key
        job = check_stage.check_job(path, path.stem, owner, job_dir, self._options, probes, cache, poison)
        say(progress, f"running the tests of {Path(label).name}")
        try:
            outcome = await self._pool.run(job, timeout_s=self._options.timeout_s, on_event=relay(progress))
            judge = lambda: verdict(
                outcome, composed, candidate, reference, ref_run, job_dir, self._options, self._pool.facts, label
            )
            hung = hung_probe(outcome.last_progress) if outcome.status == "timeout" and not again else None
            if hung and ref_run is not None and await self._references.hangs_on(ref_run, composed, hung, progress):
                return _Again(Retry.REFERENCE_HANGS_TOO, hung)
            against_reference = " with the reference's" if ref_run is not None else ""
            say(progress, f"comparing the outputs of {Path(label).name}{against_reference}")
            result = await asyncio.to_thread(judge)
            if _differs(result) and ref_run is not None:  # the reference itself may not reproduce what differs
                usable = usable_probes(ref_run)
                if await self._references.fold_twin(ref_run, composed, outcome, job_dir):
                    result = await asyncio.to_thread(judge)
                if _differs(result):
                    await self._references.rerun(ref_run, progress)
                    result = await asyncio.to_thread(judge)
                if _differs(result) and usable_probes(ref_run) < usable and not again:
                    return _Again(Retry.REFERENCE_FAILS_PROBES)
            if also is not None and result.ok:
                await asyncio.to_thread(also, outcome, job_dir)
            return result
        finally:
            await removed(job_dir)


def _same_job(candidate: TritonFile, reference: TritonFile, ref_run: ReferenceRun, composed: str) -> bool:
    """Is the candidate's own check job the job its kernels run with the reference's test: the same program (its
    test section is the reference's), under the same module name, recording the same calls, and the reference ran
    with new allocations poisoned, as a user's file first does? `composed`: its kernels with the reference's tests."""
    same_calls = candidate.entry_points == reference.entry_points and candidate.repository == reference.repository
    return (
        ref_run.not_checkable is None
        and ref_run.poison
        and same_calls
        and composed == candidate.compose().text
        and file_name(candidate) == file_name(reference)
        and (candidate.tests, candidate.benches, candidate.test_style, candidate.output_source)
        == (reference.tests, reference.benches, reference.test_style, reference.output_source)
    )


def _differs(result: CheckResult) -> bool:
    """Did the candidate's outputs differ from the reference's?"""
    return result.comparison is not None and bool(result.comparison.mismatches)
