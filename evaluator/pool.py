"""A pool of pre-warmed, single-use worker processes, driven from asyncio.

Each job runs in a fresh process that already imported torch and Triton (and created its GPU context), so a check
does not pay the start-up, and no state leaks from one candidate into the next. After a job the process is
discarded and a spare is already warming. A job that hangs is killed at its time limit (with its whole process
group); one that crashes or exits without a result message is reported as such. Cancelling the awaiting task kills
the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PROTOCOL_LIMIT = 1 << 28  # result lines can be large (captured call specs)


class WorkerStartError(RuntimeError):
    """A worker process could not start (torch/Triton missing, no GPU when one was required...)."""


@dataclass
class JobOutcome:
    """How a job ended. `status`: ok | timeout | crashed | no_result."""

    status: str
    result: dict[str, Any] | None
    message: str = ""
    last_progress: dict[str, Any] | None = None
    log_tail: str = ""
    duration_s: float = 0.0


@dataclass
class _Worker:
    proc: asyncio.subprocess.Process
    workdir: Path
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def log_path(self) -> Path:
        return self.workdir / "worker.log"

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    async def dispose(self) -> None:
        self.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), 10)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log_tail(self, limit: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")


class WorkerPool:
    """`backend`: "auto" (the GPU if torch sees one, else the interpreter), "gpu" or "interpreter"."""

    def __init__(
        self,
        *,
        backend: str = "auto",
        spares: int = 1,
        max_concurrent: int = 1,
        gpu_id: int | None = None,
        startup_timeout_s: float = 180.0,
        python: str = sys.executable,
    ):
        if backend not in ("auto", "gpu", "interpreter"):
            raise ValueError(f"backend must be auto, gpu or interpreter, not {backend!r}")
        self.backend = backend
        self.spares = max(0, spares)
        self.gpu_id = gpu_id
        self.startup_timeout_s = startup_timeout_s
        self.python = python
        self._semaphore = asyncio.Semaphore(max(1, max_concurrent))
        self._ready: list[_Worker] = []
        self._starting: set[asyncio.Task[_Worker]] = set()
        self._closed = False
        self.info: dict[str, Any] = {}
        self.jobs_run = 0

    # ------------------------------------------------------------------------------------------ lifecycle

    async def runtime_info(self) -> dict[str, Any]:
        """Backend, device name and architecture, as reported by a warm worker."""
        if not self.info:
            worker = await self._acquire()
            self._ready.append(worker)
        return self.info

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(BaseException):
                worker = await task
                await worker.dispose()
        for worker in self._ready:
            await worker.dispose()
        self._ready.clear()

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
        """Run one job in a fresh warm worker; never raises for what the user's code does."""
        async with self._semaphore:
            worker = await self._acquire()
            self._replenish()
            loop = asyncio.get_running_loop()
            start = loop.time()
            last_progress: dict[str, Any] | None = None
            try:
                assert worker.proc.stdin is not None and worker.proc.stdout is not None
                worker.proc.stdin.write(json.dumps(job).encode() + b"\n")
                await worker.proc.stdin.drain()
                while True:
                    remaining = timeout_s - (loop.time() - start)
                    if remaining <= 0:
                        raise TimeoutError
                    line = await asyncio.wait_for(worker.proc.stdout.readline(), remaining)
                    if not line:
                        code = await worker.proc.wait()
                        return JobOutcome(
                            "crashed" if code != 0 else "no_result",
                            None,
                            _exit_description(code),
                            last_progress,
                            worker.log_tail(),
                            loop.time() - start,
                        )
                    message = json.loads(line)
                    if message.get("event") == "progress":
                        last_progress = message
                        if on_event is not None:
                            on_event(message)
                    elif message.get("event") == "result":
                        return JobOutcome("ok", message, "", last_progress, worker.log_tail(), loop.time() - start)
            except (TimeoutError, asyncio.TimeoutError):
                worker.kill()
                return JobOutcome(
                    "timeout",
                    None,
                    f"timed out after {timeout_s:g} s (the worker was killed)",
                    last_progress,
                    worker.log_tail(),
                    loop.time() - start,
                )
            except (BrokenPipeError, ConnectionResetError):
                code = await worker.proc.wait()
                return JobOutcome("crashed", None, _exit_description(code), last_progress, worker.log_tail())
            finally:
                self.jobs_run += 1
                await worker.dispose()

    # ------------------------------------------------------------------------------------------ workers

    def _replenish(self) -> None:
        while not self._closed and len(self._ready) + len(self._starting) < self.spares:
            task = asyncio.ensure_future(self._spawn())
            self._starting.add(task)
            task.add_done_callback(self._spare_done)

    def _spare_done(self, task: asyncio.Task[_Worker]) -> None:
        self._starting.discard(task)
        if task.cancelled():
            return
        if task.exception() is not None:
            log.warning("a spare worker failed to start: %s", task.exception())
            return
        worker = task.result()
        if self._closed:
            worker.kill()
        else:
            self._ready.append(worker)

    async def _acquire(self) -> _Worker:
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        while self._ready:
            worker = self._ready.pop(0)
            if worker.proc.returncode is None:
                return worker
            await worker.dispose()
        if self._starting:
            await asyncio.wait(set(self._starting), return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(0)  # let the done-callbacks file the new worker
            if self._ready:
                return await self._acquire()
        return await self._spawn()

    async def _spawn(self) -> _Worker:
        workdir = Path(tempfile.mkdtemp(prefix="geak-worker-"))
        env = dict(os.environ)
        env.update(GEAK_BACKEND=self.backend, GEAK_WORKER_LOG=str(workdir / "worker.log"), PYTHONUNBUFFERED="1")
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if self.backend != "interpreter":
            env.pop("TRITON_INTERPRET", None)
        if self.gpu_id is not None:
            env["CUDA_VISIBLE_DEVICES"] = env["HIP_VISIBLE_DEVICES"] = str(self.gpu_id)
        with open(workdir / "worker.log", "ab") as log_file:
            proc = await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                "geak.evaluator.worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                env=env,
                cwd=workdir,
                start_new_session=True,
                limit=PROTOCOL_LIMIT,
            )
        worker = _Worker(proc, workdir)
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), self.startup_timeout_s)
        except (TimeoutError, asyncio.TimeoutError):
            tail = worker.log_tail()
            await worker.dispose()
            raise WorkerStartError(f"worker did not start within {self.startup_timeout_s:g} s\n{tail}") from None
        except BaseException:
            await worker.dispose()
            raise
        message = json.loads(line) if line else {"event": "startup_error", "message": worker.log_tail()}
        if message.get("event") != "ready":
            await worker.dispose()
            raise WorkerStartError(f"worker failed to start: {message.get('message', '').strip()}")
        worker.info = {k: v for k, v in message.items() if k not in ("event", "pid")}
        self.info = worker.info
        return worker


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
