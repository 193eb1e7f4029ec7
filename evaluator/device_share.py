"""Who has the device: checks share it, a timing has it alone.

A timing job measured while another job of the same pool runs on the GPU measures the other job too (time-slicing
between processes delays its kernels, and the wall-clock guard sees the device busy after the call), so what a
timing job measures waits until the running jobs finish, and no job starts while it measures. A timing job shares
the device while it imports and captures its calls, and asks for it alone when it starts to measure
(``Hold.go_alone``; the worker's ``device_wanted`` event). Waiting timings go first, so a stream of checks cannot
starve them. A job that ran out of GPU memory while sharing the device may only have
lacked what the others held: the pool runs it once more alone (``out_of_device_memory``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

TIMED_KINDS = frozenset({"bench", "screen", "peaks"})  # job kinds (``protocol``) that measure time
OUT_OF_MEMORY = ("CUDA out of memory", "HIP out of memory", "OutOfMemoryError", "hipErrorOutOfMemory")


def out_of_device_memory(result: dict[str, Any] | None) -> bool:
    """Did a test, the import or a probe of the job fail for lack of GPU memory?"""
    if not result:
        return False
    entries = [*(result.get("tests") or []), *(result.get("fresh") or []), result.get("import_error") or {}]
    return any(isinstance(e, dict) and any(m in str(e.get("message", "")) for m in OUT_OF_MEMORY) for e in entries)


class DeviceShare:
    """A readers-writer lock over one device, timings preferred. A holder that shares it can ask to have it alone
    (``Hold.go_alone``): it stops sharing, waits until no one else runs, and keeps it alone until it lets go."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._sharing = 0
        self._alone = False
        self._waiting_alone = 0

    @contextlib.asynccontextmanager
    async def use(self, *, alone: bool) -> AsyncIterator[Hold]:
        hold = Hold(self, alone)
        async with self._changed:
            if alone:
                await self._wait_alone()
            else:
                await self._changed.wait_for(lambda: not self._alone and self._waiting_alone == 0)
                self._sharing += 1
        try:
            yield hold
        finally:
            async with self._changed:
                if hold.alone:
                    self._alone = False
                else:
                    self._sharing -= 1
                self._changed.notify_all()

    async def _wait_alone(self) -> None:
        """(Holding the condition.) Wait until no one else uses the device, then have it alone."""
        self._waiting_alone += 1
        try:
            await self._changed.wait_for(lambda: not self._alone and self._sharing == 0)
        finally:
            self._waiting_alone -= 1
        self._alone = True


class Hold:
    """One job's use of the device: shared, or alone."""

    def __init__(self, share: DeviceShare, alone: bool):
        self._share = share
        self.alone = alone

    async def go_alone(self) -> None:
        """From sharing the device to having it alone (at once if it already does)."""
        if self.alone:
            return
        share = self._share
        async with share._changed:
            share._sharing -= 1
            share._changed.notify_all()
            try:
                await share._wait_alone()
            except BaseException:  # cancelled while waiting: it shares again, as its release expects
                share._sharing += 1
                raise
            self.alone = True
