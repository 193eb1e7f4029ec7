"""The runs of references, owned in one place: each reference runs once (checks at once share its first run), is kept
for the candidates compared with it until forgotten, runs again where a candidate disagrees with it or hangs where it
did not, and how long its own run took is kept for the next run over many references (``reference_costs``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from . import check as check_stage
from . import reference_costs
from .check import ReferenceRun
from .inputs import BadInput, read_file, text_key
from .job_folders import JobFolders, file_name, removed
from .options import EvalOptions
from .pool import JobOutcome, WorkerPool
from .progress import Progress, relay, say
from .reference_probes import hung_probe, is_usable, judge_reference_probes, without_hung
from .shared.probe_rules import probe_place
from .shared.protocol import cache_request, probe_input_file
from .single_flight import SingleFlight
from .triton_file import Composed, TritonFile
from .verdict import verdict

HUNG_PROBE_RETRIES = 2  # runs of a reference again, each without a probe it hung in (``ReferenceRuns._job``)
REFERENCE_RERUNS = 3  # fresh processes that rerun a reference a candidate disagrees with (``ReferenceRuns.rerun``)


class ReferenceRuns:
    """The evaluator's reference runs, by the key of the reference's composed text."""

    def __init__(self, pool: WorkerPool, options: EvalOptions, folders: JobFolders):
        self._pool = pool
        self._options = options
        self._folders = folders
        self._kept: dict[str, ReferenceRun] = {}
        self._first_runs: SingleFlight[ReferenceRun] = SingleFlight()  # checks at once share one
        self._reruns: dict[str | None, asyncio.Lock] = {}

    async def run(self, reference: TritonFile, progress: Progress | None) -> ReferenceRun:
        """The kept run of `reference`, else its first run (shared with the checks that ask for it meanwhile);
        BadInput where the reference fails its own test."""
        composed = reference.compose()
        key = _key(reference, composed.text)
        cached = self._kept.get(key)
        if cached is not None:
            return cached
        if self._first_runs.running(key):
            say(progress, f"waiting for the run of the reference {Path(reference.path).name} that another check "
                          "started")  # fmt: skip

        listening = [progress]  # the run this check starts speaks to it while it waits, to no one once it has left

        def relayed(message: str) -> None:
            if listening[0] is not None:
                listening[0](message)

        async def first_run() -> ReferenceRun:
            started = time.perf_counter()
            try:
                run = await self._first_run(reference, composed, key, relayed if progress else None)
            except BadInput:
                await self._record_cost(key, time.perf_counter() - started)
                raise
            await self._record_cost(key, time.perf_counter() - started)
            self._kept[key] = run
            return run

        try:
            return await self._first_runs.run(key, first_run)
        finally:
            listening[0] = None

    def kept(self, reference: TritonFile) -> ReferenceRun | None:
        """The kept run of `reference`, where there is one (nothing runs)."""
        return self._kept.get(_key(reference, reference.compose().text))

    @contextlib.asynccontextmanager
    async def held(self, ref_run: ReferenceRun | None) -> AsyncIterator[None]:
        """While a check against `ref_run` runs: its outputs stay, even if it is forgotten meanwhile."""
        if ref_run is None:
            yield
            return
        ref_run.users += 1
        try:
            yield
        finally:
            ref_run.users -= 1
            if ref_run.forgotten and not ref_run.users:
                await removed(ref_run.outputs)

    async def forget(self, reference: TritonFile) -> None:
        """Drop the kept run of `reference` (``Evaluator.forget_reference``)."""
        ref_run = self._kept.pop(_key(reference, reference.compose().text), None)
        if ref_run is None:
            return
        ref_run.forgotten = True
        if not ref_run.users:
            await removed(ref_run.outputs)

    def known_seconds(self, references: list[Path]) -> dict[Path, float]:
        """How long each of `references`' own run took when it last ran with this compile store, for those known
        (``Evaluator.known_reference_seconds``)."""
        costs = reference_costs.load(self._options.compile_cache)
        known: dict[Path, float] = {}
        if not costs:  # nothing recorded (a first run, or no store): no file need be read
            return known
        for path in references:
            with contextlib.suppress(BadInput):
                reference = read_file(path, "reference")
                seconds = costs.get(_key(reference, reference.compose().text))
                if seconds is not None:
                    known[path] = seconds
        return known

    async def rerun(self, ref_run: ReferenceRun, progress: Progress | None) -> None:
        """A candidate's outputs differ from the reference's: run the reference again in fresh processes (its tests
        twice, its usable probes once; up to REFERENCE_RERUNS times, until one shows variation) so that outputs it
        does not reproduce leave the comparison (``check.rerun_variation``). Once per reference; concurrent
        candidates wait for it."""
        async with self._variation_lock(ref_run):
            if ref_run.reran:
                return
            job_dir = self._folders.new()
            path = job_dir / file_name(ref_run.tfile)
            path.write_text(ref_run.tfile.compose().text)
            probes = replay_probes(ref_run, job_dir)
            cache = cache_request(seed=ref_run.cache_key, keep=None)
            job = check_stage.check_job(
                path, path.stem, ref_run.tfile, job_dir, self._options, probes, cache, ref_run.poison,
                True,
            )  # fmt: skip
            try:
                for attempt in range(1, REFERENCE_RERUNS + 1):  # until it shows variation
                    say(progress, f"running the reference {Path(ref_run.tfile.path).name} again ({attempt} of "
                                  f"{REFERENCE_RERUNS}: is it deterministic?)")  # fmt: skip
                    outcome = await self._pool.run(job, timeout_s=self._options.timeout_s, on_event=relay(progress))
                    hung = hung_probe(outcome.last_progress) if outcome.status == "timeout" else None
                    if hung and ref_run.probes is not None:
                        why = f"the reference hung on these inputs when run again ({outcome.message})"
                        ref_run.probes = without_hung(ref_run.probes, hung, why)
                    found = (
                        outcome.status == "ok"
                        and outcome.result is not None
                        and await asyncio.to_thread(
                            check_stage.rerun_variation, ref_run, outcome.result, job_dir / "outputs", self._options
                        )
                    )
                    if found or outcome.status != "ok":
                        break
            finally:
                await removed(job_dir)
            ref_run.reran = True

    async def hangs_on(self, ref_run: ReferenceRun, composed: Composed, where: str, progress: Progress | None) -> bool:
        """A candidate's job hung in the probe `where`, which the reference finished when it made it: does the
        reference hang there too? A twin (the reference's program, byte for byte) answers it at once; otherwise the
        reference runs again (``rerun``, which drops a probe it hangs on). Some kernels finish only sometimes (one
        that spins on locks other programs set may hang in its own twin's probe on a busy device). Returns whether the
        probe left."""
        if not is_usable(ref_run.probes, where):
            return True  # another candidate's rerun of the reference already took it away
        if is_twin(composed, ref_run):
            async with self._variation_lock(ref_run):
                if ref_run.probes is not None:
                    why = "the reference's own code hung on these inputs in another run (its twin's)"
                    ref_run.probes = without_hung(ref_run.probes, where, why)
        else:
            await self.rerun(ref_run, progress)
        return not is_usable(ref_run.probes, where)

    async def fold_twin(self, ref_run: ReferenceRun, composed: Composed, outcome: JobOutcome, job_dir: Path) -> bool:
        """A candidate whose composed program is the reference's, byte for byte, is one more fresh-process run of
        the reference: fold its outputs into the reference's variation (``check.rerun_variation``). Safe with hostile
        code, since that code is exactly the reference's. Returns whether it applied."""
        if not is_twin(composed, ref_run) or outcome.status != "ok" or not isinstance(outcome.result, dict):
            return False
        async with self._variation_lock(ref_run):
            await asyncio.to_thread(
                check_stage.rerun_variation, ref_run, outcome.result, job_dir / "outputs", self._options
            )
        return True

    def _variation_lock(self, ref_run: ReferenceRun) -> asyncio.Lock:
        """Held while what a reference's reruns found is folded into it: concurrent candidates see it whole."""
        return self._reruns.setdefault(ref_run.cache_key, asyncio.Lock())

    async def _record_cost(self, key: str, seconds: float) -> None:
        await asyncio.to_thread(reference_costs.record, self._options.compile_cache, key, seconds)

    async def _first_run(
        self, reference: TritonFile, composed: Composed, key: str, progress: Progress | None
    ) -> ReferenceRun:
        make = (
            {
                "make": {
                    "seed": secrets.randbits(31),
                    "variants": self._options.probe_variants,
                    "budget_s": self._options.probe_budget_s,
                }
            }
            if self._options.fresh_inputs
            else None
        )
        cache = cache_request(seed=key, keep=key)
        first_problem, first_verdict = "", None
        for poison in (True, False):  # without poisoning only if it fails with it: see UNPOISONED_CAVEAT
            outcome, job_dir = await self._job(reference, composed, make, cache, poison, progress)
            say(progress, f"reading the outputs of the reference {Path(reference.path).name}")
            own = await asyncio.to_thread(
                verdict,
                outcome, composed, reference, None, None, job_dir, self._options, self._pool.facts, reference.path,
            )  # fmt: skip
            if own.not_checkable is not None:
                await removed(job_dir)
                return ReferenceRun(reference, outcome, job_dir, None, own, key)
            problem = check_stage.reference_problem(outcome)
            if not problem:
                break
            await removed(job_dir)
            if poison:
                first_problem, first_verdict = problem, own
            if not poison or not check_stage.failed_by_error(outcome):
                message = f"the reference {reference.path} does not pass its own test: {first_problem}"
                raise BadInput(message, first_verdict)
        result, outputs = outcome.result or {}, job_dir / "outputs"
        probes = await asyncio.to_thread(judge_reference_probes, result, outputs, self._options)
        unstable, unwritten = await asyncio.to_thread(check_stage.test_reproduction, result, outputs, self._options)
        return ReferenceRun(
            reference, outcome, job_dir, probes, cache_key=key, unstable=unstable, unwritten=unwritten, poison=poison,
            own=own,
        )  # fmt: skip

    async def _job(
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
        set may hang at other sizes, which its own test never asked of it."""
        hung: list[str] = []
        while True:
            job_dir = self._folders.new()
            path = job_dir / file_name(reference)
            path.write_text(composed.text)
            asked = {**make, "make": {**make["make"], "hung": hung}} if make is not None and hung else make
            job = check_stage.check_job(
                path, path.stem, reference, job_dir, self._options, asked, cache, poison, True,
                check_stage.reference_stop_kinds(poison),
            )  # fmt: skip
            say(progress, f"running the reference {Path(reference.path).name}")
            try:
                outcome = await self._pool.run(job, timeout_s=self._options.timeout_s, on_event=relay(progress))
            except BaseException:  # cancelled: nothing is cached, so nothing is kept
                await removed(job_dir)
                raise
            where = hung_probe(outcome.last_progress) if outcome.status == "timeout" and make is not None else None
            if where is None or len(hung) >= HUNG_PROBE_RETRIES:
                return outcome, job_dir
            await removed(job_dir)
            hung.append(probe_place(where))
            say(progress, f"the reference {Path(reference.path).name} hung in {where} ({outcome.message}): running "
                          "it again without that probe")  # fmt: skip


def replay_probes(ref_run: ReferenceRun, job_dir: Path) -> dict[str, Any] | None:
    """The job's `probes` field for replaying the reference's usable probes, their inputs copied into `job_dir`."""
    usable = ref_run.probes.usable if ref_run.probes is not None else ()
    for probe in usable:
        name = probe_input_file(probe["index"])
        shutil.copyfile(ref_run.outputs / "outputs" / name, job_dir / "outputs" / name)
    return {"replay": list(usable)} if usable else None


def usable_probes(ref_run: ReferenceRun) -> int:
    return len(ref_run.probes.usable) if ref_run.probes is not None else 0


def is_twin(composed: Composed, ref_run: ReferenceRun) -> bool:
    """Is the candidate's composed program the reference's, byte for byte (its code exactly the reference's)?"""
    return composed.text == ref_run.tfile.compose().text


def _key(reference: TritonFile, composed_text: str) -> str:
    """What a reference's run is kept, forgotten and costed under: its composed text, and for a repository's module
    the tests chosen to judge it."""
    tests = json.dumps(reference.repository, sort_keys=True) if reference.repository else ""
    return text_key(composed_text + tests)
