"""Who has the device: checks share it, a timing has it alone.

A timing job measured while another job of the same pool runs on the GPU measures the other job too (time-slicing
between processes delays its kernels, and the wall-clock guard sees the device busy after the call), so bench and
peaks jobs wait until the running jobs finish, and no job starts while one of them runs. Waiting timings go first,
so a stream of checks cannot starve them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

TIMED_KINDS = frozenset({"bench", "peaks"})  # job kinds (``protocol``) that measure time


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
