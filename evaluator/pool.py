"""A pool of warm fork servers ("zygotes") that run each job in a fresh process, driven from asyncio.

A zygote (``job/worker.py``: the job side of the trust boundary) imports torch and Triton once and never runs user code;
for each job it forks a job process, which opens its GPU context and runs the job. So a check pays a fork and a GPU
context, not the start-up of torch and Triton, and no state leaks from one candidate into the next. A job that hangs is
killed at its time limit (with its whole process group) and the zygote serves the next job; one that crashes or exits
without a result message is reported as such. A zygote that dies is replaced. Cancelling the awaiting task kills the job
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import compile_store
from .device_share import TIMED_KINDS, DeviceShare, Hold, why_it_runs_again
from .redaction import known_secrets, redact, redact_data
from .runtime_facts import RuntimeFacts
from .shared.isolation_policy import MODES
from .shared.protocol import HEARTBEAT_KEYS
from .zygote import WorkerStartError, Zygote, ZygoteLauncher, tail

log = logging.getLogger(__name__)

EXIT_GRACE_S = 15.0  # how long a job process may take to go away (after its result, or after a kill)


@dataclass
class JobOutcome:
    """How a job ended. `status`: ok | timeout | crashed | no_result."""

    status: str
    result: dict[str, Any] | None
    message: str = ""
    last_progress: dict[str, Any] | None = None
    log_tail: str = ""
    duration_s: float = 0.0
    alone_s: float = 0.0  # how long the job had the device alone (a timing: its measurement, the other jobs paused)
    ran_again: str = ""  # why it ran once more, alone, once the jobs sharing the device had ended ("": it did not)


DEVICE_MASKS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
# ROCm's own device mask, applied by its HSA runtime beneath HIP's: what ROCm advises for isolating a process's GPUs,
# since HIP_VISIBLE_DEVICES leaves the others reachable through the runtime. HIP's masks then count within it.
ROCR_MASK = "ROCR_VISIBLE_DEVICES"


def cpu_threads_per_job(concurrent: int, cores: int | None = None) -> int | None:
    """The CPU threads each of `concurrent` jobs at once gets (torch's and BLAS's pools): its share of the cores this
    process may use. Each pool otherwise starts a thread per core: 12 jobs on 16 cores could run 192 of them beside
    the compiles that take most of a check's time, keeping the host busy throughout. None where one job runs at a
    time."""
    if concurrent <= 1:
        return None
    return max(1, (cores or usable_cores()) // concurrent)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def device_masks(environ: Mapping[str, str], hip: bool | None = None) -> dict[str, list[str]]:
    """The device masks set in `environ` that this build's runtime reads (CUDA: CUDA_VISIBLE_DEVICES; ROCm: both),
    each as its list of GPU entries. A mask that is set but empty shows no GPU, so it is kept, with no entries.
    `hip`: a ROCm build (default: as torch was built)."""
    read = DEVICE_MASKS if (_hip_build() if hip is None else hip) else DEVICE_MASKS[:1]
    return {name: _entries(environ[name]) for name in read if name in environ}


def _hip_build() -> bool:
    import torch

    return torch.version.hip is not None


def pin_device(environ: Mapping[str, str], gpu_id: int, hip: bool | None = None) -> dict[str, str]:
    """The device masks that show a worker only GPU `gpu_id`, counted as the caller sees its GPUs: where the caller
    already has a mask (CUDA_VISIBLE_DEVICES=2,3), id 0 is its first entry (2), not the machine's GPU 0. A ROCm build
    is pinned through ``ROCR_MASK`` (``rocm_pin``)."""
    hip = _hip_build() if hip is None else hip
    if hip:
        return rocm_pin(environ, gpu_id)
    masks = device_masks(environ, hip)
    if not masks:
        return dict.fromkeys(DEVICE_MASKS, str(gpu_id))
    return {name: _entry(name, entries, gpu_id, environ) for name, entries in masks.items()}


def rocm_pin(environ: Mapping[str, str], gpu_id: int) -> dict[str, str]:
    """ROCm's masks for GPU `gpu_id` of those the caller sees: ROCR_VISIBLE_DEVICES names it (an index among the
    machine's GPUs, or a UUID, as the caller's own ROCR mask has it), and HIP's masks show the one GPU left, 0. The
    caller's HIP mask (HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES) counts within its ROCR mask; a HIP mask of
    UUIDs under a ROCR mask cannot be resolved here, so it is pinned as it is, within that ROCR mask."""
    rocr = device_masks(environ, True) | ({ROCR_MASK: _entries(environ[ROCR_MASK])} if ROCR_MASK in environ else {})
    hip_name = next((name for name in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") if name in rocr), None)
    index = str(gpu_id)
    if hip_name is not None:
        index = _entry(hip_name, rocr[hip_name], gpu_id, environ)
        if not index.isdigit() and ROCR_MASK in rocr:
            return {hip_name: index}
    if ROCR_MASK in rocr:
        index = _entry(ROCR_MASK, rocr[ROCR_MASK], int(index), environ)
    return {ROCR_MASK: index} | dict.fromkeys(DEVICE_MASKS, "0")


def _entries(mask: str) -> list[str]:
    return [entry.strip() for entry in mask.split(",") if entry.strip()]


def _entry(name: str, entries: list[str], gpu_id: int, environ: Mapping[str, str]) -> str:
    if not 0 <= gpu_id < len(entries):
        raise WorkerStartError(f"GPU {gpu_id} is not visible: {name}={environ[name]} shows {len(entries)} GPU(s)")
    return entries[gpu_id]


class WorkerPool:
    """Runs jobs in fresh processes forked from warm zygotes.

    `backend`: "auto" (the GPU if torch sees one, else the interpreter), "gpu" or "interpreter".
    `max_concurrent`: jobs run at once, and so the most zygotes kept (one per concurrent job; each zygote runs one
    job at a time). Zygotes start when a job first needs one and then stay until `aclose`. `host_jobs`: the jobs at
    once on this host of every pool together (one per GPU, say), whose CPU thread pools share its cores
    (``cpu_threads_per_job``); None: this pool's `max_concurrent`.
    `spares`: zygotes kept warm ahead of demand (at most `max_concurrent`): they are started in the background when
    the pool is first used, and a zygote that dies is replaced in the background right away. With 0, zygotes start
    (and are replaced) only when a job needs one.
    `isolation`: "auto" (each job in namespaces of its own where the system allows it, else "process only", which
    every verdict then says), "namespaces" (required: a zygote that cannot isolate its jobs fails to start) or
    "process" (off). Jobs always get the reduced environment (``isolation.ENV_ALLOW``). `hide`: directories jobs
    must not see, besides the home directories, the temporary directory and the caller's working directory.
    `bwrap`: start the zygotes under bubblewrap when it is installed and works; None: only when not running as root
    (root's jobs get the same view from their own namespaces, with one fork less per job). `compile_cache`: where
    isolated jobs' trusted compilations are kept between runs (``compile_store``); None: a folder of the pool's own.
    `show`: folders jobs may read although hidden (a repository whose tests judge a module of it), never write.
    """

    def __init__(
        self,
        *,
        backend: str = "auto",
        spares: int = 1,
        max_concurrent: int = 1,
        host_jobs: int | None = None,
        gpu_id: int | None = None,
        startup_timeout_s: float = 180.0,
        python: str = sys.executable,
        isolation: str = "auto",
        hide: tuple[str, ...] = (),
        bwrap: bool | None = None,
        compile_cache: str | None = None,
        show: tuple[str, ...] = (),
    ):
        if backend not in ("auto", "gpu", "interpreter"):
            raise ValueError(f"backend must be auto, gpu or interpreter, not {backend!r}")
        if isolation not in MODES:
            raise ValueError(f"isolation must be one of {', '.join(MODES)}, not {isolation!r}")
        self.backend = backend
        self.max_concurrent = max(1, max_concurrent)
        self.host_jobs = max(self.max_concurrent, host_jobs or 0)
        self.spares = min(max(0, spares), self.max_concurrent)
        self.gpu_id = gpu_id
        # the workers' device mask, made now: a GPU that is not visible is refused here, not at the first job
        self._pinned = pin_device(os.environ, gpu_id) if gpu_id is not None else {}
        self.startup_timeout_s = startup_timeout_s
        self.python = python
        self.isolation = isolation
        # the zygotes' trusted compile cache: kept between runs in `compile_cache` (``compile_store``), else the pool's
        # own; hidden from jobs like the temporary directory (it holds the references' compiled code)
        self._kept_cache = compile_cache is not None
        if compile_cache is not None:
            try:
                compile_store.prepare(compile_cache)
            except (OSError, compile_store.UnsafeCache) as e:
                log.warning("compilations are not kept between runs: %s", e)
                self._kept_cache = False
        self._triton_cache = compile_cache if self._kept_cache else tempfile.mkdtemp()
        self.hide = (*hide, self._triton_cache) if self._kept_cache else tuple(hide)
        self.bwrap = os.geteuid() != 0 if bwrap is None else bwrap
        self._launcher = ZygoteLauncher(
            backend,
            python,
            isolation,
            self.hide,
            self.bwrap,
            self._triton_cache,
            self._pinned,
            startup_timeout_s,
            shown=tuple(show),
        )
        self._semaphore = asyncio.Semaphore(self.max_concurrent)
        self._device = DeviceShare(f"GPU {gpu_id}") if gpu_id is not None else DeviceShare()
        self._idle: list[Zygote] = []
        self._busy: set[Zygote] = set()
        self._starting: set[asyncio.Task[Zygote]] = set()
        self._closed = False
        self.info: dict[str, Any] = {}
        self.jobs_run = 0

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def facts(self) -> RuntimeFacts:
        """`info`, typed (every fact None before a zygote has started)."""
        return RuntimeFacts.from_dict(self.info, strict=False)

    async def runtime_info(self) -> dict[str, Any]:
        """Backend, device name and architecture, as reported by a warm zygote (the spares start meanwhile)."""
        if not self.info:
            self._keep_warm()
            async with self._semaphore:
                zygote = await self._acquire()
                await self._release(zygote)
        return self.info

    async def aclose(self) -> None:
        self._closed = True
        starting = list(self._starting)
        for task in starting:
            task.cancel()
        await asyncio.gather(*starting, return_exceptions=True)  # a zygote that did start is filed as idle
        zygotes = [*self._idle, *self._busy]
        self._idle.clear()
        # all at once: each may take up to 10 s to go (``wait_briefly``), and a GPU's pool holds one per job at once
        await asyncio.gather(*(zygote.dispose() for zygote in zygotes))
        if not self._kept_cache:
            shutil.rmtree(self._triton_cache, ignore_errors=True)

    async def __aenter__(self) -> WorkerPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------------------------------ jobs

    async def run(
        self,
        job: dict[str, Any],
        *,
        timeout_s: float,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> JobOutcome:
        """Run one job in a fresh process; never raises for what the user's code does. `on_event` receives the
        "started" event ({"pid": job process}) and the job's "progress" events. A timing job measures with the device
        alone, the jobs sharing it paused meanwhile; where what they held was in its way (their queued work, their
        memory), it runs once more, once they have ended (meanwhile no one has the device alone, and checks still
        start). So does a job that ran out of GPU memory while others shared the device (``device_share``)."""
        timed = job.get("kind") in TIMED_KINDS
        if timed and not self.info:
            await self.runtime_info()
        # A timing job shares the device until it asks for it alone, where its zygote can pass the grant on.
        alone = timed and not self.info.get("grants")
        outcome, paused = await self._run_sharing(job, timeout_s, on_event, alone, pause=True)
        why = why_it_runs_again(outcome.result, timed) if self.max_concurrent > 1 else None
        if why:
            log.info("a %s job runs once more, once the jobs sharing the device have ended: %s", job.get("kind"), why)
            self._device.in_the_way(paused)
            first = outcome
            outcome, _ = await self._run_sharing(job, timeout_s, on_event, True, pause=False)
            outcome = replace(outcome, alone_s=first.alone_s + outcome.alone_s, ran_again=why)
        return outcome

    async def _run_sharing(
        self,
        job: dict[str, Any],
        timeout_s: float,
        on_event: Callable[[dict[str, Any]], None] | None,
        alone: bool,
        pause: bool,
    ) -> tuple[JobOutcome, set[Hold]]:
        """The job's outcome, and the jobs paused for it."""
        async with self._device.use(alone=alone, pause=pause) as hold, self._semaphore:
            zygote = await self._acquire()
            self._keep_warm()
            try:
                return await self._run_job(zygote, job, timeout_s, on_event, hold), hold.paused_others
            finally:
                self.jobs_run += 1
                await self._release(zygote)

    async def _run_job(
        self,
        zygote: Zygote,
        job: dict[str, Any],
        timeout_s: float,
        on_event: Callable[[dict[str, Any]], None] | None,
        hold: Hold,
    ) -> JobOutcome:
        loop = asyncio.get_running_loop()
        start = loop.time()
        # moved on by the time a timing job waits for the device, and (``due``) by the time the job is paused
        deadline = start + timeout_s
        log_path = zygote.workdir / f"job{zygote.jobs}.log"
        zygote.jobs += 1
        last_progress: dict[str, Any] | None = None
        stall_s: float | None = None  # how long the step now running may stay silent (a probe: ``probe_stall_s``)
        stall_at: float | None = None  # (before the pauses from now on)

        def due() -> float:
            return (min(deadline, stall_at) if stall_at is not None else deadline) + hold.paused_s()

        async def killed(how: str) -> None:
            """The job's process killed and reaped, and its end logged (`how` it ended)."""
            zygote.kill_child()
            await self._await_exit(zygote)
            _log_end(job, loop.time() - start, hold, how)

        def outcome(status: str, message: str = "", result: dict[str, Any] | None = None) -> JobOutcome:
            secrets = known_secrets()  # nothing a job says leaves here with a secret in it
            return JobOutcome(
                status,
                redact_data(result, secrets),
                redact(message, secrets),
                redact_data(last_progress, secrets),
                redact(tail(log_path), secrets),
                loop.time() - start,
                hold.alone_s + (loop.time() - hold.alone_from if hold.alone else 0.0),
            )

        try:
            await zygote.send({"job": job, "log": str(log_path)})
            while True:
                message = await _receive_unpaused(zygote, hold, due)
                if message is None:
                    return outcome("crashed", f"{zygote.failure} while running the job; it will be replaced")
                event = message.get("event")
                if event == "device_wanted" and job.get("kind") in TIMED_KINDS:
                    waited_from = loop.time()
                    await hold.go_alone()
                    deadline += loop.time() - waited_from
                    await zygote.grant_device()
                elif event == "device_released" and job.get("kind") in TIMED_KINDS:
                    await hold.share_again()
                elif event in ("started", "progress"):
                    if event == "started":
                        hold.attach(zygote.stop_child)
                    else:
                        last_progress = message
                        if not HEARTBEAT_KEYS & message.keys():  # a step starts (a heartbeat only says that it lives)
                            stall_s = _stall_of(message)
                        compiling = "compiling" in message  # a compile runs: its silence is no sign of a hang
                        stall_at = None if stall_s is None or compiling else loop.time() + stall_s - hold.paused_s()
                    if (stuck_s := _stuck_of(message)) is not None:  # the step it names spins: ended at once
                        await killed("was ended as hung after")
                        where = message.get("test") or "the job"
                        return outcome("timeout", f"hung: {where}: none of its GPU kernels finished for "
                                                  f"{stuck_s:g} s (the worker was killed)")  # fmt: skip
                    if on_event is not None:
                        on_event(redact_data(message))
                elif event == "result":
                    hold.detach()  # a job paused after its result would not exit
                    await self._await_exit(zygote)
                    _log_end(job, loop.time() - start, hold)
                    return outcome("ok", result=message)
                elif event == "exited":
                    code = message.get("code")
                    return outcome("no_result" if code == 0 else "crashed", _exit_description(code))
        except TimeoutError:
            stalled = stall_at is not None and stall_at < deadline
            await killed("was killed at its time limit after")
            if stalled:
                where = (last_progress or {}).get("test")
                return outcome("timeout", f"hung: {where} said nothing for {stall_s:g} s (the worker was killed)")
            return outcome("timeout", f"timed out after {timeout_s:g} s (the worker was killed)")
        except (BrokenPipeError, ConnectionResetError):
            zygote.fail("the worker's fork server stopped reading jobs")
            return outcome("crashed", f"{zygote.failure}; it will be replaced")
        except BaseException:  # cancelled, or `on_event` raised
            zygote.kill_child()  # the zygote reaps it; its "exited" report is read before the zygote's next job
            raise
        finally:
            hold.detach()
            with contextlib.suppress(OSError):
                log_path.unlink()

    async def _await_exit(self, zygote: Zygote) -> None:
        """Read up to the zygote's "exited" report for its current job, killing a job process that does not end;
        a zygote that cannot report it in time is discarded."""
        loop = asyncio.get_running_loop()
        for _attempt in range(2):
            try:
                while zygote.owes_exit:
                    message = await zygote.receive(loop.time() + EXIT_GRACE_S)
                    if message is None:
                        return
                    if message.get("event") == "started":  # a job abandoned by a cancelled task
                        zygote.kill_child()
                return
            except TimeoutError:
                zygote.kill_child()
        zygote.fail("a job process would not end, even killed")

    # ------------------------------------------------------------------------------------------ zygotes

    async def _acquire(self) -> Zygote:
        while True:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            if self._idle:
                zygote = self._idle.pop()
                self._busy.add(zygote)
                try:
                    await self._await_exit(zygote)  # after a cancelled job
                except BaseException:
                    await self._release(zygote)
                    raise
                if zygote.usable:
                    return zygote
                await self._release(zygote)
            elif self._starting and len(self._busy) + len(self._starting) >= self.max_concurrent:
                # The done-callbacks (which file a started zygote as idle) run before this wait returns.
                await asyncio.wait(set(self._starting), return_when=asyncio.FIRST_COMPLETED)
            else:
                task = self._start_zygote(background=False)
                await asyncio.wait({task})  # not cancelled with the caller: a started zygote is kept
                error = None if task.cancelled() else task.exception()
                if error is not None:
                    raise error

    async def _release(self, zygote: Zygote) -> None:
        self._busy.discard(zygote)
        if self._closed or not zygote.usable:
            if zygote.failure and not self._closed:
                log.warning("discarding a worker: %s", zygote.failure)
            await zygote.dispose()
            self._keep_warm()
        else:
            self._idle.append(zygote)

    def _keep_warm(self) -> None:
        while not self._closed and len(self._idle) + len(self._busy) + len(self._starting) < self.spares:
            self._start_zygote(background=True)

    async def _spawn(self) -> Zygote:
        zygote = await self._launcher.start(cpu_threads_per_job(self.host_jobs))
        self.info = zygote.info
        return zygote

    def _start_zygote(self, *, background: bool) -> asyncio.Task[Zygote]:
        task = asyncio.ensure_future(self._spawn())
        self._starting.add(task)

        def started(task: asyncio.Task[Zygote]) -> None:
            self._starting.discard(task)
            if task.cancelled():
                return
            if task.exception() is not None:
                if background:
                    log.warning("a spare worker failed to start: %s", task.exception())
                return
            self._idle.append(task.result())

        task.add_done_callback(started)
        return task


PAUSED_POLL_S = 0.5  # while a job is paused, how often its wait for a message looks whether it goes on


async def _receive_unpaused(zygote: Zygote, hold: Hold, due: Callable[[], float]) -> dict[str, Any] | None:
    """The job's next protocol message; TimeoutError once `due()` (loop time, moved on by every pause of the job)
    has passed while the job was not paused."""
    loop = asyncio.get_running_loop()
    while True:
        at = max(due(), loop.time() + PAUSED_POLL_S) if hold.paused else due()
        try:
            return await zygote.receive(at)
        except TimeoutError:
            if not hold.paused and loop.time() >= due():
                raise


def _log_end(job: dict[str, Any], seconds: float, hold: Hold, how: str = "ended in") -> None:
    """One line at a job's end (``benchmarks/spell_timeline.py`` reads them back): its kind, the file it ran where it
    names one (a check's), how long it took, and how much of that it was paused for timings (a check paused through
    every spell can end the whole batch)."""
    paused = hold.paused_s()
    said = f" ({paused:.2f} s of it paused)" if paused else ""
    of = f" of {Path(str(job['path'])).name}" if job.get("path") else ""
    log.info("a %s job%s %s %.2f s%s", job.get("kind"), of, how, seconds, said)


def _stall_of(message: dict[str, Any]) -> float | None:
    """How long the step a progress message starts may stay silent before its job is ended as hung (None: until
    the job's own time limit). A job can only shorten its own life this way."""
    return _seconds_in(message, "stall_s")


def _stuck_of(message: dict[str, Any]) -> float | None:
    """How long the kernels of the step now running went without one finishing, where the job says they spin
    (``job.kernel_watch``); None where it does not say so. Like `_stall_of`, it can only end the job sooner."""
    return _seconds_in(message, "stuck_s")


def _seconds_in(message: dict[str, Any], key: str) -> float | None:
    """A job's message's number of seconds under `key`: positive and finite, else None."""
    value = message.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
        return float(value)
    return None


def _exit_description(code: int | None) -> str:
    if code is None:
        return "the worker ended without a result"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process crashed ({name})"
    return f"the worker exited with status {code} without reporting a result"
