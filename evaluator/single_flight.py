"""One run per key at a time, shared by the callers that ask for it meanwhile (Go's "singleflight").

A reference's first run is the costly part of a check (its cold compiles and tuning). Checks of several predictions
of one golden file start together in `geak eval`; without this, each ran the reference itself (three checks at once
of one file on the interpreter: three runs of its reference, one kept). Each caller awaits the one run; a caller that
is cancelled leaves it to the others, and the run is cancelled (its job killed by the pool) once no caller waits for
it. An error reaches every caller waiting then; a later call runs again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    task: asyncio.Future[T]
    waiting: int = 0
    stopped: bool = False  # cancelled, as no one waited: a caller coming now starts a run of its own


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._flights: dict[str, _Flight[T]] = {}

    def running(self, key: str) -> bool:
        """Whether a caller asking for `key` now would wait for a run already going."""
        flight = self._flights.get(key)
        return flight is not None and not flight.stopped

    async def run(self, key: str, start: Callable[[], Awaitable[T]]) -> T:
        """The result of `start()`, run once for every caller asking for `key` while it runs."""
        flight = self._flights.get(key)
        if flight is None or flight.stopped:
            flight = _Flight(asyncio.ensure_future(start()))
            self._flights[key] = flight
            flight.task.add_done_callback(lambda _: self._landed(key, flight))
        flight.waiting += 1
        try:
            return await asyncio.shield(flight.task)
        finally:
            flight.waiting -= 1
            if not flight.waiting and not flight.task.done():
                flight.stopped = True
                flight.task.cancel()  # the last caller left (cancelled): no one needs the run

    def _landed(self, key: str, flight: _Flight[T]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.task.cancelled():
            flight.task.exception()  # retrieved: every caller waiting has it already (none, if all had left)
