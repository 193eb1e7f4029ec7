"""The worker pool's fork servers ("zygotes", ``job/worker.py``): starting one (under bubblewrap where it works, with
its configuration and reduced environment), talking to it over its pipes, and ending it with its job process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import isolation as sandboxing
from . import job_package
from .shared.isolation_policy import PROCESS_ONLY, Policy

log = logging.getLogger(__name__)

PROTOCOL_LIMIT = 1 << 28  # result lines can be large (captured call specs)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")  # torch's and BLAS's CPU threads


class WorkerStartError(RuntimeError):
    """A worker process could not start (torch/Triton missing, no GPU when one was required...)."""


@dataclass(eq=False)
class Zygote:
    """One fork server and the job process it runs now."""

    proc: asyncio.subprocess.Process
    workdir: Path
    wrapped: bool = False  # `proc` is bubblewrap's, whose child is the fork server (its exit status tells how)
    pid: int | None = None  # the fork server's own process
    info: dict[str, Any] = field(default_factory=dict)
    child_pid: int | None = None  # the running job process
    owes_exit: bool = False  # a job was sent whose "exited" report is still unread
    failure: str = ""  # why this zygote cannot be used any more
    jobs: int = 0

    @property
    def usable(self) -> bool:
        return self.proc.returncode is None and not self.failure

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.owes_exit = True
        await self.proc.stdin.drain()

    async def grant_device(self) -> None:
        """Tell the running job it has the device alone (passed on by the zygote: ``worker``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"grant": true}\n')
        await self.proc.stdin.drain()

    async def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next protocol message (None once the zygote is gone); TimeoutError at `deadline` (loop time)."""
        assert self.proc.stdout is not None
        while True:
            try:
                async with asyncio.timeout_at(deadline):  # not wait_for: on 3.11 it can swallow a cancellation
                    line = await self.proc.stdout.readline()
            except ValueError:  # a line over PROTOCOL_LIMIT
                self.fail(f"the worker sent a message over {PROTOCOL_LIMIT >> 20} MiB")
                return None
            if not line:
                if not self.failure:
                    await self.wait_briefly()
                    code = self.proc.returncode
                    if self.wrapped and code is not None and code > 128:  # bubblewrap: 128 + the signal
                        code = 128 - code
                    self.failure = f"the worker's fork server died ({status_words(code)})"
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except json.JSONDecodeError:  # what a killed job process left half-written
                log.debug("skipping a malformed protocol line: %.200r", line)
                continue
            event = message.get("event")
            if event == "started":
                self.child_pid = message["pid"]
            elif event == "exited":
                self.child_pid = None
                self.owes_exit = False
            return message

    async def wait_briefly(self, seconds: float = 5.0) -> None:
        """Give a zygote that is going away the time to exit (and be reaped)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.proc.wait()

    def kill_child(self) -> None:
        self.signal_child(signal.SIGKILL)

    def signal_child(self, signum: int) -> None:
        """Send `signum` to the running job process's group (the job and all it started), if one runs."""
        if self.child_pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child_pid, signum)

    def stop_child(self, stopped: bool) -> None:
        """Stop the running job (its whole process group), or let it go on (``device_share``'s pauses)."""
        self.signal_child(signal.SIGSTOP if stopped else signal.SIGCONT)

    def fail(self, reason: str) -> None:
        """Mark this zygote unusable and kill it with its job process."""
        self.failure = self.failure or reason
        self.kill_child()
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    async def dispose(self) -> None:
        self.fail("the worker was shut down")
        await self.wait_briefly(10)
        shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class ZygoteLauncher:
    """Starts the pool's fork servers: what each is told (`backend`, `isolation`, the directories its jobs must not
    see, `hide`), where its trusted compilations go (`trusted_cache`), the device mask it gets (`pinned`) and whether
    it runs under bubblewrap (`bwrap`, once checked to work: `bwrap_checked`)."""

    backend: str
    python: str
    isolation: str
    hide: tuple[str, ...]
    bwrap: bool
    trusted_cache: str
    pinned: dict[str, str]
    startup_timeout_s: float
    bwrap_checked: tuple[bool, str] | None = None
    shown: tuple[str, ...] = ()  # folders inside hidden ones that jobs may read (a repository under check)

    async def start(self, threads: int | None) -> Zygote:
        """A fork server, started and ready (its runtime facts in `info`); `threads`: the CPU threads each of its
        jobs may use (``pool.cpu_threads_per_job``; None: as many as they like)."""
        workdir = Path(tempfile.mkdtemp())
        try:
            launch = job_package.prepare(workdir, self.python)
            command, config, env = self.command(workdir, launch, threads)
            with open(workdir / "zygote.log", "ab") as log_file:
                proc = await asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=log_file,
                    env=env,
                    cwd=workdir,
                    start_new_session=True,
                    limit=PROTOCOL_LIMIT,
                )
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        zygote = Zygote(proc, workdir, wrapped="bwrap" in Path(command[0]).name)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(config).encode() + b"\n")
            async with asyncio.timeout(self.startup_timeout_s):
                await proc.stdin.drain()
                line = await proc.stdout.readline()
        except TimeoutError:
            log_tail = tail(zygote.workdir / "zygote.log")
            await zygote.dispose()
            raise WorkerStartError(f"worker did not start within {self.startup_timeout_s:g} s\n{log_tail}") from None
        except BaseException:
            await zygote.dispose()
            raise
        message = json.loads(line) if line else {"event": "startup_error"}
        if message.get("event") != "ready":
            await zygote.wait_briefly()
            detail = "\n".join(s.strip() for s in (message.get("message", ""), tail(zygote.workdir / "zygote.log")))
            await zygote.dispose()
            raise WorkerStartError(f"worker failed to start: {detail.strip()}")
        zygote.info = {k: v for k, v in message.items() if k not in ("event", "pid", "startup_s")}
        zygote.pid = message.get("pid")
        log.info("a worker is ready (%s, %s): start-up %s", zygote.info.get("device"), zygote.info.get("isolation"),
                 ", ".join(f"{k} {v:.2f} s" for k, v in (message.get("startup_s") or {}).items()))  # fmt: skip
        if zygote.info.get("isolation") == PROCESS_ONLY and zygote.wrapped:
            # Namespaces inside bubblewrap can fail where they work without it (a /proc it cannot remount).
            self.bwrap_checked = (False, f"jobs cannot be isolated inside it: {zygote.info.get('isolation_reason')}")
            log.info("starting the worker without bubblewrap: %s", self.bwrap_checked[1])
            await zygote.dispose()
            return await self.start(threads)
        return zygote

    def command(
        self, workdir: Path, launch: job_package.Launch, threads: int | None
    ) -> tuple[list[str], dict[str, Any], dict[str, str]]:
        """The zygote's command line (under bubblewrap where it works), its configuration (the first line of its
        input: nothing of it shows in its command line or environment) and its reduced environment."""
        env = sandboxing.job_environment(dict(os.environ), launch.python_home)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if threads is not None and not any(name in env for name in THREAD_VARIABLES):  # unless the user chose
            env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))  # torch with MKL follows MKL_NUM_THREADS
        if self.backend != "interpreter":
            env.pop("TRITON_INTERPRET", None)
        env.update(self.pinned)
        policy = (
            None
            if self.isolation == "process"
            else sandboxing.default_policy(self.hide, launch.python_home, self.shown)
        )
        prefix: list[str] = []
        if policy is not None and self.bwrap:
            if self.bwrap_checked is None:
                self.bwrap_checked = sandboxing.bwrap_works()
                if not self.bwrap_checked[0]:
                    log.info("job isolation without bubblewrap: %s", self.bwrap_checked[1])
            if self.bwrap_checked[0]:
                writable = {str(workdir), os.path.realpath(tempfile.gettempdir()), os.path.realpath(self.trusted_cache)}
                hidden = tuple(h for h in policy.hidden if h not in writable)
                # the link lies in the zygote's (writable) directory; what it leads to is shown at its own path
                shown = (*(p for p in policy.exposed if p != launch.python_home), *sandboxing.exposed_python(hidden))
                outer = Policy(hidden, shown)
                prefix = sandboxing.bwrap_command(outer, sorted(writable), env) or []
        config = {
            "backend": self.backend,
            "log": str(workdir / "zygote.log"),
            "isolation": self.isolation,
            "policy": policy.to_json() if policy is not None else None,
            "bwrap": bool(prefix),
            "trusted_cache": self.trusted_cache if policy is not None else None,
            "forget": list(launch.forget),
        }
        return [*prefix, launch.python, "-m", job_package.WORKER_MODULE], config, env


def tail(path: Path, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def status_words(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
