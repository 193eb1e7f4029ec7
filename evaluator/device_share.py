"""Who has the device: checks share it, a timing has it alone.

A timing job measured while another job of the same pool runs on the GPU measures the other job too (time-slicing
between processes delays its kernels, and the wall-clock guard sees the device busy after the call), so bench and
peaks jobs wait until the running jobs finish, and no job starts while one of them runs. Waiting timings go first,
so a stream of checks cannot starve them. A job that ran out of GPU memory while sharing the device may only have
lacked what the others held: the pool runs it once more alone (``out_of_device_memory``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

TIMED_KINDS = frozenset({"bench", "peaks"})  # job kinds (``protocol``) that measure time
OUT_OF_MEMORY = ("CUDA out of memory", "HIP out of memory", "OutOfMemoryError", "hipErrorOutOfMemory")


def out_of_device_memory(result: dict[str, Any] | None) -> bool:
    """Did a test, the import or a probe of the job fail for lack of GPU memory?"""
    if not result:
        return False
    entries = [*(result.get("tests") or []), *(result.get("fresh") or []), result.get("import_error") or {}]
    return any(isinstance(e, dict) and any(m in str(e.get("message", "")) for m in OUT_OF_MEMORY) for e in entries)


class DeviceShare:
    """A readers-writer lock over one device, timings preferred."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._sharing = 0
        self._alone = False
        self._waiting_alone = 0

    @contextlib.asynccontextmanager
    async def use(self, *, alone: bool) -> AsyncIterator[None]:
        async with self._changed:
            if alone:
                self._waiting_alone += 1
                try:
                    await self._changed.wait_for(lambda: not self._alone and self._sharing == 0)
                finally:
                    self._waiting_alone -= 1
                self._alone = True
            else:
                await self._changed.wait_for(lambda: not self._alone and self._waiting_alone == 0)
                self._sharing += 1
        try:
            yield
        finally:
            async with self._changed:
                if alone:
                    self._alone = False
                else:
                    self._sharing -= 1
                self._changed.notify_all()
