"""The warm evaluator service behind `geak check FILE` and `geak bench FILE`: a background process of the user's that
keeps a sandboxed worker warm, the device's peaks, the references' runs and compiled kernels, so that a command
pays none of their start-up (most of a cold command's time: importing torch and Triton, probing the GPU and the
sandbox, a reference's runs).

The first command starts it (``client``); it ends after ``IDLE_S`` without a request, on `geak service
stop`, or when its user's session ends. It runs no user code itself (the worker's jobs do, isolated as always) and
holds no GPU context while idle (the worker's fork server never opens one). Only its own user may connect: the
socket sits in a private directory and the peer's credentials are checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from geak.evaluator import BadInput, EvalOptions, Evaluator, WorkerPool, WorkerStartError

from .client import request
from .protocol import LINE_LIMIT, encode, evaluate

log = logging.getLogger(__name__)
METHODS = ("check", "bench", "profile")


class EvaluatorService:
    """One service: its evaluators (one per set of options, sharing a pool per device setting), what it has done."""

    def __init__(self, identity: str, idle_s: float):
        self.identity = identity
        self.idle_s = idle_s
        self.started = time.time()
        self.requests = 0
        self._active = 0
        self._last_done = time.monotonic()
        self._pools: dict[tuple[Any, ...], WorkerPool] = {}
        self._evaluators: dict[str, Evaluator] = {}
        self._stop = asyncio.Event()

    async def serve(self, path: Path) -> None:
        """Listen on `path` until idle for `idle_s` or asked to stop; then close every evaluator. Where a service
        already answers at `path`, none is started: taking its socket would leave it serving no one."""
        if await request(path, {"method": "status"}) is not None:
            log.warning("a service already answers at %s: not starting another", path)
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a service that died left it
        server = await asyncio.start_unix_server(self._connection, path=str(path), limit=LINE_LIMIT)
        os.chmod(path, 0o600)
        log.info("serving on %s", path)
        try:
            async with server:
                while not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1.0):
                            await self._stop.wait()
                    if not self._active and time.monotonic() - self._last_done > self.idle_s:
                        log.info("idle for %.0f s: ending", self.idle_s)
                        break
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            for evaluator in self._evaluators.values():
                await evaluator.aclose()  # closes the shared pools too (closing one twice is a no-op)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if _peer_uid(writer) != os.getuid():
                writer.write(encode({"error": "internal", "message": "connections are taken from this user only"}))
                return
            line = await reader.readline()
            request = json.loads(line) if line.strip() else {}
            method = request.get("method")
            if method == "stop":
                self._stop.set()
                writer.write(encode({"stopping": True}))
            elif method == "status":
                writer.write(encode({"status": self.status()}))
            elif method in METHODS:
                await self._evaluate(request, reader, writer)
            else:
                writer.write(encode({"error": "internal", "message": f"unknown request {method!r}"}))
        except (ValueError, ConnectionError) as e:
            log.warning("a request could not be read: %s", e)
        finally:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await writer.drain()
                writer.close()

    async def _evaluate(self, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        """Run one check or bench; a command that goes away (Ctrl-C) cancels it, and with it the job in flight."""
        self._active += 1
        self.requests += 1
        work = asyncio.ensure_future(self._run(request, lambda text: writer.write(encode({"progress": text}))))
        gone = asyncio.ensure_future(reader.read())  # the command sends nothing more: EOF means it went away
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                return
            writer.write(encode(work.result()))
        finally:
            gone.cancel()
            self._active -= 1
            self._last_done = time.monotonic()

    async def _run(self, request: dict[str, Any], progress) -> dict[str, Any]:
        try:
            options = EvalOptions.from_dict(request["options"])
            evaluator = self._evaluator_for(options)
            method, file, against = request["method"], request["file"], request.get("against")
            result = await evaluate(evaluator, method, file, against, progress)
            return {"result": result.to_dict()}
        except BadInput as e:
            return {"error": "bad_input", "message": str(e)}
        except WorkerStartError as e:
            return {"error": "worker_start", "message": str(e)}
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            return {"error": "internal", "message": f"a malformed request ({e!r})"}

    def _evaluator_for(self, options: EvalOptions) -> Evaluator:
        key = json.dumps(asdict(options), sort_keys=True, default=str)
        if key not in self._evaluators:
            device = (options.backend, options.gpu_id, options.isolation, options.compile_cache)
            if device not in self._pools:
                self._pools[device] = WorkerPool(
                    backend=options.backend, spares=1, gpu_id=options.gpu_id, isolation=options.isolation,
                    compile_cache=options.compile_cache,
                )
            self._evaluators[key] = Evaluator(options, pool=self._pools[device])
        return self._evaluators[key]

    def status(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "since": self.started,
            "requests": self.requests,
            "active": self._active,
            "workers": [
                {**dict(zip(("backend", "gpu", "isolation", "compile_cache"), key, strict=True)), **pool.info}
                for key, pool in self._pools.items()
            ],
            "idle_s": self.idle_s,
        }


def _peer_uid(writer: asyncio.StreamWriter) -> int:
    sock = writer.get_extra_info("socket")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def run(identity: str, path: Path, idle_s: float) -> int:
    """The service's process (`geak service run`): serve until idle or stopped."""
    asyncio.run(EvaluatorService(identity, idle_s).serve(path))
    return 0
