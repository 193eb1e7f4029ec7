"""Running coroutines together without leaving any behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def all_or_none(coroutines: Iterable[Awaitable[T]]) -> list[T]:
    """Run concurrently; if one raises, cancel the others (and wait for their clean-up) before raising."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except asyncio.CancelledError:
        raise  # gather has cancelled them; a second cancel would interrupt their clean-up (killing jobs)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
