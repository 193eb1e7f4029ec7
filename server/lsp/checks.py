"""CheckManager: owns the warm `Evaluator` and schedules the checks and timings of open documents.

Per document: a check is debounced; a newer save or edit cancels the running check (its job process is killed);
results are cached by content (a bounded LRU), so an unchanged file is never re-run and changed code loses its
stale results. A module of a repository (``modules``) is checked by the repository's tests, on an evaluator whose
jobs may read that repository (one per repository). After a passing check of a file or module, in a git working
tree, the content is compared with its version at a base revision (``base_compare``): the saved kernels on the base's
test (a module's: the same repository tests, the base's text in its place), then, after the own timing, their timing
against the base's. Checks (the comparison's too) come before
timings: a check that starts preempts any timing in flight, which resumes once no check is running. After the
timings, the vendor's profiler measures the same calls (where one can run here).
Results go to the server through `CheckHooks`, which publishes only for the content that was checked (never for a
newer version).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from geak.evaluator import BadInput, BenchResult, CheckResult, EvalOptions, Evaluator, ProfileResult

from .analysis import content_key
from .base_compare import BaseMemory, BaseReport, BaseTarget, bench_against, check_and_compare, compare_on, find_base
from .engine import Engine
from .modules import ModuleLimits, ModuleTarget, RepositoryEvaluators, made_evaluator

log = logging.getLogger(__name__)
DEBOUNCE_S = 0.15
T = TypeVar("T")


@dataclass
class FileReport:
    """What running one content of a file said: the check, then (on a GPU) its timing."""

    key: str
    checked_at: float  # time.time() of the check
    check: CheckResult | None = None
    error: str = ""  # why there is no check result (bad input, the evaluator failed)
    bench: BenchResult | None = None
    timing_note: str = ""  # why there is no timing
    profile: ProfileResult | None = None  # what the vendor's profiler measured of its kernels, after the timing
    profile_note: str = ""  # why the profiler, which can run here, measured nothing
    base: BaseReport | None = None  # the comparison with its version at the base revision, after a passing check
    module: ModuleTarget | None = None  # a repository's module: the tests that judged it


@dataclass
class CheckHooks:
    """How the manager talks back to the server (all called on the server's loop)."""

    trusted: Callable[[], Awaitable[bool]]
    checked: Callable[[str, FileReport], None]  # uri, report: publish diagnostics if the content is current
    timed: Callable[[str, FileReport], None]  # uri, report: refresh inlay hints
    status_changed: Callable[[], None]  # a check or timing started or ended (see `CheckManager.activity`)


class ReportCache:
    """Bounded LRU of reports by content key."""

    def __init__(self, size: int = 128):
        self.size = size
        self._items: OrderedDict[str, FileReport] = OrderedDict()

    def get(self, key: str) -> FileReport | None:
        report = self._items.get(key)
        if report is not None:
            self._items.move_to_end(key)
        return report

    def put(self, report: FileReport) -> None:
        self._items[report.key] = report
        self._items.move_to_end(report.key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def drop(self, which: Callable[[FileReport], bool]) -> None:
        """Forget the reports `which` picks."""
        for key in [k for k, report in self._items.items() if which(report)]:
            del self._items[key]


class CheckManager:
    def __init__(self, engine: Engine, hooks: CheckHooks, options: EvalOptions, debounce_s: float = DEBOUNCE_S):
        self.engine = engine
        self.hooks = hooks
        self.options = options
        self.debounce_s = debounce_s
        self.cache = ReportCache()
        self._evaluator: Evaluator | None = None
        self.repositories = RepositoryEvaluators(engine)  # the evaluators of modules' checks
        self._evaluator_lock = asyncio.Lock()
        self._runtime: dict[str, Any] = {}
        self._pipelines: dict[str, asyncio.Task[FileReport | None]] = {}
        self._pipeline_keys: dict[str, str] = {}  # uri -> content key of its pipeline
        self._timings: set[asyncio.Future[Any]] = set()  # timings and profiles: a check preempts them
        self.profiler_missing: str | None = None  # why no profiler can run here, once a profile job said so
        self._checks_running = 0
        self._checks_idle = asyncio.Event()
        self._checks_idle.set()
        self.checks_run = 0
        self.activity: str | None = None  # what runs now
        self.bases = BaseMemory()  # bases that are no reference, and the last comparison said

    # ------------------------------------------------------------------------------------------ evaluator

    async def evaluator(self, repository: str | None = None) -> Evaluator:
        """The warm evaluator (created on the engine loop at first use); with `repository`, the one whose jobs may
        read that repository's folder (a module's tests run from it)."""
        if repository is not None:
            return await self.repositories.get(repository, self.options)
        async with self._evaluator_lock:
            if self._evaluator is None:
                self._evaluator = await self.engine.run(made_evaluator(self.options, ()))
            return self._evaluator

    async def set_module_limits(self, limits: ModuleLimits) -> None:
        """What a module's check on save runs of its tests: changed, the modules' checks start again."""
        if limits != self.repositories.limits:
            self.cancel_all()
            await self.repositories.close(limits)
            self.cache.drop(lambda report: report.module is not None)

    async def runtime(self) -> dict[str, Any]:
        """{"backend", "device", ...} of the evaluator's workers (starts a warm worker the first time)."""
        if not self._runtime:
            evaluator = await self.evaluator()
            self._runtime = await self.engine.run(evaluator.runtime())
        return self._runtime

    @property
    def known_runtime(self) -> dict[str, Any]:
        return self._runtime

    async def reconfigure(self, options: EvalOptions) -> None:
        """New evaluator settings (device, GPU): stop everything, close the old evaluator, forget results."""
        if options == self.options:
            return
        self.options = options
        self.profiler_missing = None  # another device may have one
        self.bases.unusable.clear()
        self.cancel_all()
        async with self._evaluator_lock:
            old, self._evaluator, self._runtime = self._evaluator, None, {}
            if old is not None:
                await self.engine.run(old.aclose())
        await self.repositories.close(self.repositories.limits)
        self.cache.clear()

    async def aclose(self) -> None:
        self.cancel_all()
        if self._evaluator is not None:
            await self.engine.run(self._evaluator.aclose())
            self._evaluator = None
        await self.repositories.close(self.repositories.limits)

    # ------------------------------------------------------------------------------------------ scheduling

    def request(
        self,
        uri: str,
        path: str,
        text: str,
        *,
        timing: bool,
        base: str = "",
        debounce: bool = True,
        checked: asyncio.Future[FileReport | None] | None = None,
        module: ModuleTarget | None = None,
    ) -> asyncio.Task:
        """Check (then compare with the revision `base`, where not empty, then time) this content of a document (of
        a `module`, where it is one: checked, and compared, by its repository's tests);
        replaces any check of the same document in flight, except one of this very content when nobody waits for
        this one (a save right after an open or a geak/check). `checked` receives the report as soon as the check
        (before the comparison and the timing) is done."""
        key = content_key(text)
        running = self._pipelines.get(uri)
        if checked is None and running is not None and not running.done() and self._pipeline_keys.get(uri) == key:
            return running
        self.cancel(uri)
        delay = self.debounce_s if debounce else 0.0
        task = asyncio.ensure_future(self._pipeline(uri, path, text, timing, base, delay, checked, module))
        if checked is not None:
            task.add_done_callback(lambda _: _cancel_pending(checked))
        self._pipelines[uri] = task
        self._pipeline_keys[uri] = key
        task.add_done_callback(lambda t: self._forget(uri, t))
        return task

    def covers(self, uri: str, text: str) -> bool:
        """Is this content of the document checked already, or being checked now?"""
        key = content_key(text)
        task = self._pipelines.get(uri)
        in_flight = task is not None and not task.done() and self._pipeline_keys.get(uri) == key
        return in_flight or self.cache.get(key) is not None

    def cancel(self, uri: str) -> None:
        """Stop the check or timing of a document (it was edited, closed, or is checked again)."""
        self._pipeline_keys.pop(uri, None)
        task = self._pipelines.pop(uri, None)
        if task is not None and not task.done():
            task.cancel()

    def cancel_all(self) -> None:
        for uri in list(self._pipelines):
            self.cancel(uri)

    def busy(self) -> bool:
        return any(not t.done() for t in self._pipelines.values())

    def _set_activity(self, activity: str | None) -> None:
        self.activity = activity
        self.hooks.status_changed()

    def _forget(self, uri: str, task: asyncio.Task) -> None:
        if self._pipelines.get(uri) is task:
            del self._pipelines[uri]
            self._pipeline_keys.pop(uri, None)
        self.hooks.status_changed()
        if not task.cancelled() and task.exception() is not None:
            log.error("check of %s failed", uri, exc_info=task.exception())

    async def _pipeline(
        self,
        uri: str,
        path: str,
        text: str,
        timing: bool,
        base: str,
        debounce_s: float,
        checked: asyncio.Future[FileReport | None] | None,
        module: ModuleTarget | None = None,
    ) -> FileReport | None:
        try:
            trusted, found = await trusted_base(self.hooks.trusted, path, base, module, debounce_s)
            known = self.bases.known(found, text) if isinstance(found, BaseTarget) else None  # said without a run
            report = None
            if trusted:
                key = content_key(text)
                report = self.cache.get(key)
                if report is None or report.module != module:  # a module's result holds for the tests it ran
                    comparable = found if isinstance(found, BaseTarget) and known is None else None
                    report = await self._check(path, text, key, module, comparable)
        except BaseException:
            if checked is not None and not checked.done():
                checked.cancel()
            raise
        if checked is not None and not checked.done():
            checked.set_result(report)
        if report is None:
            return None
        self.hooks.checked(uri, report)
        if report.check is None or not report.check.ok:
            return report
        if found is not None:
            await self._compare(uri, path, text, report, found, known)
        if timing and report.bench is None and not report.timing_note:
            await self._time(uri, path, text, report, module)
        compared = report.base
        if timing and compared is not None and compared.rev == base and compared.outcome == "matches":
            await self._time_against_base(uri, path, text, report, compared)
        profiled = report.profile is not None or report.profile_note or self.profiler_missing is not None
        if timing and report.bench is not None and not profiled and module is None:  # the profiler runs a file's test
            await self._profile(uri, path, text, report)
        return report

    @contextlib.asynccontextmanager
    async def _checking(self, activity: str) -> AsyncIterator[None]:
        """While a check runs: timings in flight are preempted (they resume once no check runs)."""
        self._checks_running += 1
        self._checks_idle.clear()
        for timing in list(self._timings):  # checks first: a timing in flight is preempted and resumes later
            timing.cancel()
        self._set_activity(activity)
        try:
            yield
        finally:
            self._checks_running -= 1
            if self._checks_running == 0:
                self._checks_idle.set()
            self._set_activity(None)

    async def _check(
        self, path: str, text: str, key: str, module: ModuleTarget | None, base: BaseTarget | None
    ) -> FileReport:
        """The content's check; with `base`, its test outputs weighed against the base's from the same job, where the
        base's run is kept (a match is said at once; the probes follow in ``_compare``)."""
        async with self._checking(f"checking {Path(path).name}"):
            try:
                evaluator = await self.evaluator(module.root if module is not None else None)
                if base is not None:
                    check, compared = await self.engine.run(check_and_compare(evaluator, base, path, text))
                else:
                    work = module.check(evaluator, text) if module else evaluator.check(path, source=text)
                    check, compared = await self.engine.run(work), None
                report = FileReport(key, time.time(), check=check, module=module, base=compared)
                self.cache.put(report)
                self.checks_run += 1
                if compared is not None:
                    self.bases.said(path, compared)
            except BadInput as e:
                report = FileReport(key, time.time(), error=str(e), module=module)
                self.cache.put(report)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the evaluator itself failed (a worker could not start...): say so, don't cache
                log.exception("the check of %s could not run", path)
                report = FileReport(key, time.time(), error=f"GEAK could not run the check: {e}", module=module)
        return report

    async def _compare(
        self,
        uri: str,
        path: str,
        text: str,
        report: FileReport,
        found: BaseTarget | BaseReport,
        known: BaseReport | None,
    ) -> None:
        """The passing content against its version at a base (`found`, or why there is none): said without a run
        where it can be (`known`: new, the same code, a base that is no reference; or already compared with this
        base's text), else its kernels run the base's test and probes. A later save cancels it (its job is killed)."""
        if isinstance(found, BaseTarget):
            done = report.base
            if done is not None and done.rev == found.base.rev and done.base_key == found.key and done.probed:
                return  # compared with this very text of the base already
            compared = known or await self._check_against(path, text, found)
        else:
            compared = found
        report.base = compared
        self.bases.said(path, compared)
        self.hooks.checked(uri, report)

    async def _check_against(self, path: str, text: str, target: BaseTarget) -> BaseReport:
        async with self._checking(f"comparing {Path(path).name} with {target.base.rev}"):
            compared = await compare_on(self.engine, await self.evaluator(target.root), target, path, text)
        self.bases.ran(target, compared)
        return compared

    async def _time(self, uri: str, path: str, text: str, report: FileReport, module: ModuleTarget | None) -> None:
        runtime = await self.runtime()
        if runtime.get("backend") == "interpreter":
            report.timing_note = "timing needs a GPU (kernels ran in Triton's CPU interpreter)"
            return
        evaluator = await self.evaluator(module.root if module is not None else None)

        def timed() -> Awaitable[BenchResult]:
            return module.bench(evaluator, text) if module else evaluator.bench(path, source=text, check_first=False)

        try:
            bench = await self._preemptible(f"timing {Path(path).name}", timed)
        except Exception as e:
            log.exception("timing %s failed", path)
            report.timing_note = f"timing failed: {e}"
            return
        if bench.ok:
            report.bench = bench
        else:
            report.timing_note = bench.message
        self.hooks.timed(uri, report)

    async def _time_against_base(
        self, uri: str, path: str, text: str, report: FileReport, compared: BaseReport
    ) -> None:
        """The saved kernels timed against the base's (a paired timing), once their outputs match the base's; once
        per comparison."""
        if compared.timed:
            return
        runtime = await self.runtime()
        if runtime.get("backend") == "interpreter":
            compared.timing_note = "timing needs a GPU (kernels ran in Triton's CPU interpreter)"
            return
        target = compared.target
        assert target is not None
        evaluator = await self.evaluator(target.root)
        try:
            bench = await self._preemptible(f"timing {Path(path).name} against {target.base.rev}",
                                            lambda: bench_against(evaluator, target, path, text))  # fmt: skip
        except Exception as e:
            log.exception("timing %s against %s failed", path, target.label)
            compared.timing_note = f"timing against {target.label} failed: {e}"
            return
        if bench.ok:
            compared.bench = bench
            log.info("%s: %s", Path(path).name, compared.said)
        else:
            compared.timing_note = bench.message
        self.hooks.timed(uri, report)
        self.hooks.checked(uri, report)  # a significant slowdown is a warning at the kernel
        self.hooks.status_changed()  # the status says the speed against the base

    async def _profile(self, uri: str, path: str, text: str, report: FileReport) -> None:
        """After a timing: the vendor's profiler over the same calls (achieved occupancy, DRAM and SM throughput),
        for the hover. Where no profiler can run, it is said once and not tried again (``profiler_missing``)."""
        evaluator = await self.evaluator()
        try:
            profile = await self._preemptible(f"profiling {Path(path).name}",
                                              lambda: evaluator.profile(path, source=text))  # fmt: skip
        except Exception as e:
            log.exception("profiling %s failed", path)
            report.profile_note = f"profiling failed: {e}"
            return
        if profile.unavailable:
            self.profiler_missing = profile.message
            log.info("kernels are not profiled: %s", profile.message)
        elif profile.ok:
            report.profile = profile
        else:
            report.profile_note = profile.message
        self.hooks.timed(uri, report)

    async def _preemptible(self, activity: str, make: Callable[[], Awaitable[T]]) -> T:
        """Run `make()` on the engine once no check runs; a check that starts cancels it (its job is killed), and it
        runs again once checks are idle."""
        while True:
            await self._checks_idle.wait()
            self._set_activity(activity)
            inner = asyncio.ensure_future(self.engine.run(make()))
            self._timings.add(inner)
            try:
                await asyncio.wait({inner})
            except asyncio.CancelledError:
                inner.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait({inner})
                raise
            finally:
                self._timings.discard(inner)
                self._set_activity(None)
            if not inner.cancelled():
                return inner.result()


async def trusted_base(
    trusted: Callable[[], Awaitable[bool]], path: str, rev: str, module: ModuleTarget | None, debounce_s: float
) -> tuple[bool, BaseTarget | BaseReport | None]:
    """Whether the workspace may run code, and then the file's version at `rev` (where `rev` is set), or why there is
    none: found while the debounce runs out."""

    async def found() -> tuple[bool, BaseTarget | BaseReport | None]:
        if not await trusted():
            return False, None
        return True, (await asyncio.to_thread(find_base, path, rev, module) if rev else None)

    (trusted_, base), _ = await asyncio.gather(found(), asyncio.sleep(debounce_s))
    return trusted_, base


def _cancel_pending(future: asyncio.Future) -> None:
    """A pipeline cancelled before its first step never runs its own handlers: its waiter must not wait forever."""
    if not future.done():
        future.cancel()
