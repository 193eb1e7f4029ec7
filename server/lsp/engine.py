"""The engine thread: its own asyncio loop where the evaluator and optimize sessions run.

The language server's loop only awaits results, so output comparison, bootstrap intervals, checkpoint writes and
prompt building never delay a hover. Cancelling an awaited `Engine.run` cancels the engine-side task and waits
until it has unwound (its job processes killed) before the cancellation reaches the caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)
SETTLE_S = 15.0  # how long a cancelled run may take to unwind (kill its job process) before we stop waiting


class EngineClosed(RuntimeError):
    """The engine has shut down (the server is exiting)."""


class Engine:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="geak-engine", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the engine loop and return its result here (exceptions propagate)."""
        caller = asyncio.get_running_loop()
        result: asyncio.Future[T] = caller.create_future()
        task_ready: concurrent.futures.Future[asyncio.Task[T]] = concurrent.futures.Future()

        def transfer(task: asyncio.Task[T]) -> None:
            if result.done():
                return
            if task.cancelled():
                result.cancel()
            elif task.exception() is not None:
                result.set_exception(task.exception())  # type: ignore[arg-type]
            else:
                result.set_result(task.result())

        def start() -> None:
            task = self.loop.create_task(coro)
            task.add_done_callback(lambda t: _call_soon(caller, transfer, t))
            task_ready.set_result(task)

        try:
            self.loop.call_soon_threadsafe(start)
        except RuntimeError as e:  # the engine loop is closed
            coro.close()
            raise EngineClosed("the GEAK engine has stopped") from e
        try:
            return await asyncio.shield(result)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                task = await asyncio.wait_for(asyncio.wrap_future(task_ready), SETTLE_S)
                self.loop.call_soon_threadsafe(task.cancel)
                await asyncio.wait_for(asyncio.shield(result), SETTLE_S)
            raise

    def close(self, cleanup: Coroutine[Any, Any, Any] | None = None, timeout_s: float = 20.0) -> None:
        """Run `cleanup` (e.g. closing the evaluator) on the engine loop, then stop the thread."""
        if not self.loop.is_running():
            return
        if cleanup is not None:
            future = asyncio.run_coroutine_threadsafe(cleanup, self.loop)
            try:
                future.result(timeout_s)
            except Exception as e:  # shutting down: report, never raise
                log.warning("engine cleanup failed: %s", e)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)


def _call_soon(loop: asyncio.AbstractEventLoop, fn, *args) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop has closed
        loop.call_soon_threadsafe(fn, *args)
