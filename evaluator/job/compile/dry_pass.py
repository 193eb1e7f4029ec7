"""A check's kernels compiled ahead of its tests, in parallel, by a dry pass in a process of its own.

A cold check of a file with many test cases compiles each new specialization when its case reaches it, one after
another, and its bench compiles the benchmark's shapes again. ``start`` forks, before
the job process opens its GPU context, a *dry* process that opens its own, imports the file itself and runs the same
tests (then the benchmark cases) with every Triton launch turned into a compile (``launch_modes.compile_only``; an
autotuned launch compiles each of its configs), those compiles running in forked processes at once
(``forked``) into the job's own Triton cache. Its launches run nothing, so it runs ahead of the job, which
runs its tests meanwhile as it would alone and finds in the cache what the dry pass compiled. It starts a second
into the job (``GO_AFTER_S``): a warm check is over by then and pays only the fork.

Nothing of the dry pass reaches a verdict: it has a module object of its own (a file that keeps a kernel's result in
a global computes it afresh in the job), its own folder (pytest's temporary folders, the benchmark harness's files),
no output, no message to the caller but its tally (``said``), no autotuning choice kept (it times nothing), and at
most a quarter of the device's memory; it stays in the job's process group (the pool's pauses and kills reach it)
and is ended when the job's tests and probes end. A test that reads what a kernel wrote stops there in the dry pass
(the kernel ran nothing): what it would have launched next compiles in the job, as before. Only where the caller
gives the job cores to spare (``CheckJob.compile_workers``: none when many jobs share the host) and on a GPU.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ...shared.protocol import CheckJob
from .. import process_ties
from ..process_ties import die_with_parent
from .forked import ForkedCompiles, compile_mode, idle_cores

FOLDER = "ahead"  # in the job's scratch folder: the dry pass's working directory
MIN_WORKERS = 2  # fewer compile processes than this: no dry pass (it would only add its own start-up)
MEMORY_SHARE = 0.25  # of the device's memory, the most the dry pass's tests may allocate
TALLY = "tally.json"  # in its folder: what the dry pass did
GO_AFTER_S = 1.0  # how long the job runs before its dry pass starts (a warm check of one kernel takes less)


@dataclass
class DryPass:
    """The dry pass of a check job, forked and waiting for ``go``."""

    pid: int
    go_write: int  # a byte written here lets it open its GPU context
    timer: threading.Timer | None = None

    def go(self, after_s: float = GO_AFTER_S) -> None:
        """Let the dry pass open its GPU context `after_s` from now, if the job still runs: after the job opened its
        own, so that the job's is never the one a device that allows one context at a time (exclusive-process mode)
        refuses, nor slowed by it; and not in a check that is over by then (a warm save in the editor), which would
        only pay for a second context."""
        timer = threading.Timer(after_s, self._let_go)
        timer.daemon = True
        with contextlib.suppress(RuntimeError):  # no thread to be had: the dry pass never starts, the job goes on
            timer.start()
            self.timer = timer

    def _let_go(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.go_write, b"g")

    def stop(self) -> None:
        """Kill the dry pass (its compile processes die with it; what they compiled stays in the cache). Not waited
        for: a process with a GPU context may take a while to go, and the job's result is ready."""
        if self.timer is not None:
            self.timer.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)


def start(job: CheckJob, info: Any) -> DryPass | None:
    """In the job process, before anything starts the GPU's driver there (a process forked after that cannot use
    the GPU): fork the dry pass where it can help (a GPU, cores to
    spare); it starts at ``DryPass.go`` and dies with the job process."""
    workers = min(job.compile_workers, idle_cores())
    if info.backend == "interpreter" or workers < MIN_WORKERS:
        return None
    try:
        go_read, go_write = os.pipe()
    except OSError:  # no descriptors left: the job runs as it would alone
        return None
    try:
        pid = process_ties.fork_process()
    except OSError:
        os.close(go_read)
        os.close(go_write)
        return None
    if pid:
        os.close(go_read)
        return DryPass(pid, go_write)
    code = 1
    try:
        die_with_parent()
        os.close(go_write)
        if os.read(go_read, 1) == b"g":  # nothing read: the job ended first
            _dry_pass(job, info, workers)
            code = 0
    except BaseException as e:  # said in the job's progress; the job goes on as it would alone
        with contextlib.suppress(Exception):
            _write_tally(Path(job.scratch, FOLDER), {"error": f"{type(e).__name__}: {e}"[:300]})
    finally:
        os._exit(code)


def _dry_pass(job: CheckJob, info: Any, workers: int) -> None:
    import torch

    from .. import device_wait, launch_modes, rocm_bench, sandbox, user_code
    from . import trusted_cache

    folder = Path(job.scratch, FOLDER)
    folder.mkdir(exist_ok=True)
    quiet = os.open(os.devnull, os.O_WRONLY)  # the job's log is the job's
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    os.close(quiet)
    device_wait.sleep_while_waiting(hip=info.backend == "rocm")  # as the job's own: a check times nothing
    sandbox.enter_child(info)
    torch.cuda.set_per_process_memory_fraction(MEMORY_SHARE)
    os.chdir(folder)
    rocm_bench.install(folder, [job.path])
    trusted_cache.reuse_autotuning(False)  # choices made by timing launches that run nothing are never kept
    executor = ForkedCompiles(workers)
    mode = compile_mode(executor)
    started = time.monotonic()
    tally = {"workers": workers, "cases": 0, "compiles": 0}

    def after_case() -> None:
        tally["cases"] += 1
        tally["compiles"] = len(executor.queued)
        executor.pump()
        _write_tally(folder, tally)

    with launch_modes.tuning_deferred(), launch_modes.compile_only(), launch_modes.every_config_compiled(), mode:
        try:
            user_code.seed_everything(job.seed)
            module = user_code.load_module(job.path, job.module_name)
            _run_tests(job, module, folder, after_case, gpu=True)
        finally:
            report = executor.run(math.inf)
            tally.update(compiles=report.submitted, compiled=report.compiled, seconds=time.monotonic() - started)
            _write_tally(folder, tally)


def _write_tally(folder: Path, tally: dict[str, Any]) -> None:
    """What the dry pass has done so far, for the job's progress (``said``): written aside, then renamed."""
    folder.mkdir(exist_ok=True)
    part = folder / f"{TALLY}.part"
    part.write_text(json.dumps(tally))
    os.replace(part, folder / TALLY)


def said(scratch: str) -> str:
    """The dry pass's work in a sentence, from its tally in the job's folder ("" without one)."""
    try:
        tally = json.loads(Path(scratch, FOLDER, TALLY).read_text()[:1000])
        if "error" in tally:
            return f"nothing compiled ahead: the dry pass failed ({str(tally['error'])[:300]})"
        cases, compiles, workers = (int(tally[k]) for k in ("cases", "compiles", "workers"))
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if "compiled" not in tally:
        return f"compiling ahead: {cases} case(s) run dry, {compiles} compile(s) asked for, not all done"
    return (f"compiled ahead: {cases} case(s) run dry, {int(tally['compiled'])} of {compiles} compile(s) in "
            f"{float(tally['seconds']):.1f} s ({workers} processes)")  # fmt: skip


def _run_tests(job: CheckJob, module: Any, folder: Path, pump: Callable[[], None], gpu: bool) -> None:
    """The job's tests, then its benchmark cases (their shapes are the bench's), each seeded as in the job, the
    compiles they ask for started after each."""
    from .. import user_code

    if job.test_style == "pytest":
        from ..pytest_plugin import CasePlugin, SessionPlan, run_session

        plan = SessionPlan(frozenset(job.tests) | frozenset(job.benchmarks), frozenset(), job.output_source)
        plugin = CasePlugin(
            module,
            Path(job.path),
            plan,
            SimpleNamespace(recording=False),  # no call recorded: probes are the job's
            gpu,
            on_case=lambda entry, error: pump(),
            before_test=lambda: user_code.seed_everything(job.seed),
        )
        run_session(plugin, folder)
        return
    for name in job.tests:
        user_code.seed_everything(job.seed)
        with contextlib.suppress(Exception):
            getattr(module, name)()
        pump()
