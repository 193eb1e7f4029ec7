"""Triton compiles in forked processes, for the screening job's many variants.

Triton's front end (the AST walk that writes the first IR) holds the GIL, so the thread pool Triton's
``AsyncCompileMode`` is meant for compiles little faster than one by one: on an H200, 36 variants of an attention
kernel took 166 s on 16 threads. ``ForkedCompiles`` is an executor for that mode that runs nothing when a compile is
submitted; ``run`` then compiles each submitted closure in a forked child of the job process, several at once, most
promising (first submitted) first, until a deadline. A child writes what it compiled to the job's Triton cache on disk
and exits; the job process then runs the closure itself, which finds the binary in that cache and only reads it.

A child never touches the GPU: Triton's compile is given its target and needs no device (the job process opened its
GPU context before the fork, and no GPU context survives one). A child that fails, crashes or is killed at the
deadline only loses its own compile: the variant then compiles at its first run, or is not run (``not_in_time``).
"""

from __future__ import annotations

import gc
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

from . import sandbox

POLL_S = 0.01  # between two looks at the children


class NotCompiledInTime(RuntimeError):
    """A compile the deadline stopped (or never started)."""


class _Pending(Future):
    """A submitted compile. Asked for its result before ``run`` (a wrapper that reads its launch's kernel), it
    compiles in this process at once rather than wait for a run that this very thread would have to start."""

    def __init__(self, fn: Callable[[], Any]):
        super().__init__()
        self.fn = fn

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


class ForkedCompiles(Executor):
    """An executor for Triton's ``AsyncCompileMode``: compiles are queued by ``submit`` and run by ``run``."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.queued: list[_Pending] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        pending = _Pending(lambda: fn(*args, **kwargs))
        self.queued.append(pending)
        return pending

    def run(self, deadline: float) -> CompileReport:
        """Compile every queued closure in forked children (at most `workers` at once) until `deadline`, then
        settle each one here: from the cache where its child compiled it, as failed where its child failed (the
        variant compiles at its first run and says why there), as not compiled in the time otherwise."""
        report = CompileReport(submitted=len(self.queued))
        todo = [i for i, p in enumerate(self.queued) if not p.done()]
        outcome: dict[int, int | str] = {}  # index -> the child's exit code (0: compiled), or why it did not start
        running: dict[int, int] = {}  # pid -> index
        gc.freeze()  # the children's collections leave the parent's objects (and their pages) alone
        try:
            while (todo or running) and time.monotonic() < deadline:
                while todo and len(running) < self.workers:
                    index = todo.pop(0)
                    try:
                        running[self._fork(self.queued[index].fn)] = index
                    except OSError as e:  # no process to be had (a process limit): the variant compiles at its run
                        outcome[index] = f"no process to compile in ({e})"
                for pid in list(running):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        outcome[running.pop(pid)] = os.waitstatus_to_exitcode(status)
                if running:
                    time.sleep(POLL_S)
        finally:
            for pid in running:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            gc.unfreeze()
            self._settle(outcome, report)  # every future ends here: Triton's mode waits for them all
        return report

    def _settle(self, outcome: dict[int, int | str], report: CompileReport) -> None:
        for index, pending in enumerate(self.queued):
            if pending.done():
                continue
            code = outcome.get(index)
            if code == 0:
                pending.settle_here()
            elif code is None:
                pending.set_exception(NotCompiledInTime("not compiled in the time"))
                report.not_in_time.add(index)
            elif isinstance(code, str):
                pending.set_exception(RuntimeError(code))
            else:
                pending.set_exception(RuntimeError(f"its compile failed in a forked process (exit code {code})"))
        report.compiled = sum(1 for p in self.queued if p.exception() is None)
        report.failed = report.submitted - report.compiled - len(report.not_in_time)
        self.queued = []

    @staticmethod
    def _fork(fn: Callable[[], Any]) -> int:
        pid = sandbox.fork_process()
        if pid:
            return pid
        code = 1  # the child: compile, and leave without running the parent's exit handlers
        try:
            fn()
            code = 0
        except BaseException:
            pass
        finally:
            os._exit(code)
