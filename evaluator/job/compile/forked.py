"""Triton compiles in forked processes, for the screening job's many variants and a check's dry pass.

Triton's front end (the AST walk that writes the first IR) holds the GIL, so the thread pool Triton's
``AsyncCompileMode`` is meant for compiles little faster than one by one. ``ForkedCompiles`` is an executor for that
mode that runs nothing when a compile is submitted: ``pump`` (called while the caller submits more) and ``run`` compile
each submitted closure in a forked child of the job process, several at once, in the order submitted (the most promising
first), until a deadline. A child writes what it compiled to the job's Triton cache on disk and exits; the job process
then runs the closure itself, which finds the binary in that cache and only reads it.

A child never touches the GPU: Triton's compile is given its target and needs no device (the job process opened its
GPU context before the fork, and no GPU context survives one). A child that fails, crashes or is killed at the
deadline only loses its own compile: the variant then compiles at its first run, or is not run (``not_in_time``).
A compile already in the job's Triton cache (seeded from a trusted run that compiled it, or compiled since by another
process of the job: a check's dry pass, ``dry_pass``, and the job itself) is read in the job process when its
turn comes, with no fork (``compile_mode``).
"""

from __future__ import annotations

import gc
import hashlib
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from .. import process_ties
from ..process_ties import die_with_parent

POLL_S = 0.01  # between two looks at the children


def idle_cores() -> int:
    """The host's cores not busy now (its core count less its load over the last minute): how many compiles may run
    at once beside the rest of its work; 0 where the load cannot be read."""
    try:
        return int((os.cpu_count() or 2) - os.getloadavg()[0])
    except OSError:
        return 0


class NotCompiledInTime(RuntimeError):
    """A compile the deadline stopped (or never started)."""


class _Pending(Future):
    """A submitted compile. Asked for its result before ``run`` (a wrapper that reads its launch's kernel), it
    compiles in this process at once rather than wait for a run that this very thread would have to start. `here`:
    already compiled (``_Cached``), read in this process when its turn comes."""

    def __init__(self, fn: Callable[[], Any], here: bool = False):
        super().__init__()
        self.fn = fn
        self.here = here
        self.key: Any = None  # Triton's key of the compile, where the mode said it (``compile_mode``)

    def settle_here(self) -> None:
        if self.done():
            return
        try:
            self.set_result(self.fn())
        except BaseException as e:  # a compile error belongs to the variant, not to the screening
            self.set_exception(e)

    def result(self, timeout: float | None = None) -> Any:
        self.settle_here()
        return super().result(timeout)


@dataclass
class CompileReport:
    """What ``run`` did: counts of the submitted compiles by how they ended."""

    submitted: int = 0
    compiled: int = 0
    failed: int = 0
    not_in_time: set[int] = field(default_factory=set)  # indices of the submissions
    failed_at: set[int] = field(default_factory=set)  # indices of the submissions whose compile raised in its child


class ForkedCompiles(Executor):
    """An executor for Triton's ``AsyncCompileMode``: compiles are queued by ``submit``, started by ``pump`` (while
    the caller submits more) and finished by ``run``."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.queued: list[_Pending] = []
        self._next = 0  # the first queued compile not started
        self._running: dict[int, int] = {}  # pid -> index
        self._outcome: dict[int, int | str] = {}  # index -> the child's exit code (0: compiled), or why none started
        self._frozen = False
        self._index_of: dict[Any, int] = {}  # a compile's key (Triton's) -> its submission
        self.asked: list[int] = []  # per compile a launch asked for, its submission: a new one or one already queued

    def asked_for(self, key: Any) -> None:
        """Note that a launch asked for the compile of `key`: just submitted, or submitted before (Triton's mode
        then hands back the pending one, so a second variant with the same kernel needs that same compile)."""
        index = self._index_of.setdefault(key, len(self.queued) - 1)
        self.asked.append(index)
        if self.queued[index].key is None:
            self.queued[index].key = key

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        pending = _Pending(lambda: fn(*args, **kwargs), here=isinstance(fn, _Cached))
        self.queued.append(pending)
        return pending

    def pump(self) -> None:
        """Collect the children that ended and start queued compiles, in order, while fewer than `workers` run;
        never waits."""
        for pid in list(self._running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self._outcome[self._running.pop(pid)] = os.waitstatus_to_exitcode(status)
        while self._next < len(self.queued) and len(self._running) < self.workers:
            index, self._next = self._next, self._next + 1
            pending = self.queued[index]
            if pending.done():  # asked for early, compiled here
                continue
            if pending.here or (pending.key is not None and in_triton_cache(pending.key)):
                pending.settle_here()  # in the cache (another process may have compiled it since): read here
                continue
            if not self._frozen:
                gc.freeze()  # the children's collections leave the parent's objects (and their pages) alone
                self._frozen = True
            try:
                self._running[self._fork(pending.fn)] = index
            except OSError as e:  # no process to be had (a process limit): the variant compiles at its run
                self._outcome[index] = f"no process to compile in ({e})"

    def run(self, deadline: float) -> CompileReport:
        """Compile every queued closure in forked children (at most `workers` at once) until `deadline`, then
        settle each one here: from the cache where its child compiled it, as failed where its child failed (the
        variant compiles at its first run and says why there), as not compiled in the time otherwise."""
        report = CompileReport(submitted=len(self.queued))
        try:
            while True:
                self.pump()
                if (self._next >= len(self.queued) and not self._running) or time.monotonic() >= deadline:
                    break
                time.sleep(POLL_S)
        finally:
            for pid in self._running:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            if self._frozen:
                gc.unfreeze()
            self._settle(report)  # every future ends here: Triton's mode waits for them all
        return report

    def _settle(self, report: CompileReport) -> None:
        for index, pending in enumerate(self.queued):
            if pending.done():
                continue
            code = self._outcome.get(index)
            if code == 0:
                pending.settle_here()
            elif code is None:
                pending.set_exception(NotCompiledInTime("not compiled in the time"))
                report.not_in_time.add(index)
            elif isinstance(code, str):
                pending.set_exception(RuntimeError(code))
            else:
                pending.set_exception(RuntimeError(f"its compile failed in a forked process (exit code {code})"))
                if code == 1:  # the child's compile raised (``_fork``), not a crash or a kill
                    report.failed_at.add(index)
        report.compiled = sum(1 for p in self.queued if p.exception() is None)
        report.failed = report.submitted - report.compiled - len(report.not_in_time)
        self.queued, self._next, self._running, self._outcome, self._frozen = [], 0, {}, {}, False
        self._index_of, self.asked = {}, []

    @staticmethod
    def _fork(fn: Callable[[], Any]) -> int:
        pid = process_ties.fork_process()
        if pid:
            return pid
        code = 1  # the child: compile, and leave without running the parent's exit handlers
        try:
            die_with_parent()  # a job process killed (or a check's dry pass ended) ends its compiles
            fn()
            code = 0
        except BaseException:
            pass
        finally:
            os._exit(code)


class _Cached:
    """A compile whose result is in Triton's cache already (``compile_mode``)."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()


def compile_mode(executor: ForkedCompiles) -> Any:
    """Triton's ``AsyncCompileMode`` over `executor`, compile errors ignored there (a config or variant that fails
    raises at its run), in which a compile already in the job's Triton cache is marked to be read in the job process
    rather than forked for: a fork copies the page tables of a process holding a GPU context, which a timing job would
    pay for each config of an autotuned kernel that its check had compiled. Raises ImportError on a
    Triton without the mode."""
    from triton.runtime._async_compile import AsyncCompileMode

    class CachedInPlace(AsyncCompileMode):
        def submit(self, key: Any, compile_fn: Callable[[], Any], *rest: Any) -> Any:
            if key not in self.future_kernels and in_triton_cache(key):
                compile_fn = _Cached(compile_fn)
            future = super().submit(key, compile_fn, *rest)
            executor.asked_for(key)
            return future

    return CachedInPlace(executor, ignore_errors=True)


def in_triton_cache(key: Any) -> bool:
    """Is the kernel of Triton's cache key `key` compiled in the current Triton cache (its folder, named as
    ``triton.compiler.compile`` names it, holds a group file)? False where that cannot be told."""
    try:
        from triton.runtime.cache import get_cache_manager

        folder = get_cache_manager(hashlib.sha256(str(key).encode("utf-8")).hexdigest()).cache_dir
        return any(name.startswith("__grp__") for name in os.listdir(folder))
    except Exception:
        return False
