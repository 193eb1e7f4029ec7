"""The command line's side of the warm evaluator service (``service``): find the service of this build, environment
and working directory, start it when there is none, send one check or bench, relay its progress, take its result.

A service that cannot be reached or started is no error: the command runs its evaluation in its own process
(``ServiceUnavailable``), as it does with `--no-service` or `GEAK_SERVICE=0`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

if TYPE_CHECKING:
    from geak.evaluator import EvalOptions

from .protocol import IDLE_S, ServiceDirError, connect, encode, identity, service_dir, socket_path

log = logging.getLogger(__name__)
START_TIMEOUT_S = 30.0
MAX_SOCKET_PATH = 104  # bytes: sockaddr_un's path is 108 on Linux, 104 on macOS


class ServiceUnavailable(RuntimeError):
    """No service could be reached or started: evaluate in this process instead. `unexpected`: what the user should
    hear of (a service that ended without a result or did not start, a service folder refused as not private), as
    against no room for one."""

    def __init__(self, message: str, unexpected: bool = False):
        super().__init__(message)
        self.unexpected = unexpected


class ServiceError(RuntimeError):
    """The service answered with an error: `kind` is bad_input, worker_start or internal."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def enabled(no_service: bool = False) -> bool:
    return not no_service and os.environ.get("GEAK_SERVICE", "1").strip().lower() not in ("0", "off", "no", "false")


def this_service() -> Path:
    """The socket of the service for this build, environment and working directory."""
    try:
        path = socket_path(identity() + "-" + _cwd_key())
    except ServiceDirError as e:  # the user's setting, to be heard of: every command then runs slower
        raise ServiceUnavailable(f"{e} (make it 0700, or set GEAK_SERVICE_DIR)", unexpected=True) from e
    except OSError as e:
        raise ServiceUnavailable(str(e)) from e
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ServiceUnavailable(f"the socket path {path} is too long for a Unix socket (set GEAK_SERVICE_DIR)")
    return path


def _cwd_key() -> str:
    return hashlib.sha256(os.getcwd().encode()).hexdigest()[:6]  # the working directory its jobs never see


async def evaluate(
    method: str, file: str, against: str | None, options: EvalOptions, progress: Callable[[str], None] | None
) -> dict[str, Any]:
    """The result (as `to_dict` gives it) of `method` ("check", "bench" or "profile") on `file`, from the service."""
    path = this_service()
    reader, writer = await _connect_or_start(path)
    log.info("connected to the evaluator service (%s)", path.name)  # with `-v`, each line's time: where a command waits
    request = {
        "method": method,
        "file": str(Path(file).absolute()),
        "against": str(Path(against).absolute()) if against else None,
        "options": options.to_dict(),
    }
    try:
        writer.write(encode(request))
        await writer.drain()
        while True:
            line = await reader.readline()
            if not line:
                raise ServiceUnavailable("the service ended the connection without a result", unexpected=True)
            message = json.loads(line)
            if "progress" in message:
                log.info("the service: %s", message["progress"])
                if progress is not None:
                    progress(str(message["progress"]))
            elif "result" in message:
                log.info("the service's result came")
                return message["result"]
            else:
                raise ServiceError(str(message.get("error")), str(message.get("message")))
    finally:
        writer.close()


async def request(path: Path, message: dict[str, Any]) -> dict[str, Any] | None:
    """One request to a running service (status, stop); None when none answers at `path`."""
    try:
        reader, writer = await connect(path)
    except OSError:
        return None
    try:
        writer.write(encode(message))
        await writer.drain()
        line = await reader.readline()
        return json.loads(line) if line else None
    finally:
        writer.close()


async def _connect_or_start(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    with contextlib.suppress(OSError):
        return await connect(path)
    lock = FileLock(str(path.with_suffix(".lock")))
    try:
        await asyncio.to_thread(lock.acquire, timeout=START_TIMEOUT_S)
    except Timeout as e:
        raise ServiceUnavailable(f"another command is starting the service ({path})") from e
    try:
        with contextlib.suppress(OSError):  # it started while this command waited for the lock
            return await connect(path)
        service = _start(path)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ended = service.poll() is not None  # (one that found another service answering there ends at once)
            with contextlib.suppress(OSError):
                return await connect(path)
            if ended:
                break
            await asyncio.sleep(0.05)
        why = "ended" if service.poll() is not None else f"did not start within {START_TIMEOUT_S:g} s"
        raise ServiceUnavailable(f"the service {why} (see {_log_of(path)})", unexpected=True)
    finally:
        lock.release()


def _start(path: Path) -> subprocess.Popen:
    """Start the service in a session of its own, its output in a log beside its socket (a socket a dead service
    left there, the service replaces; one that answers, it leaves alone and ends)."""
    idle = os.environ.get("GEAK_SERVICE_IDLE_S", str(IDLE_S))
    with open(_log_of(path), "ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "geak.server.cli", "service", "run", "--socket", str(path), "--idle", idle],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
            close_fds=True,
        )


def _log_of(path: Path) -> Path:
    return path.with_suffix(".log")


def running_services() -> list[Path]:
    """The sockets of this user's services (some may be stale: no one answers there)."""
    try:
        return sorted(service_dir().glob("evaluator-*.sock"))
    except (ServiceDirError, OSError):
        return []
