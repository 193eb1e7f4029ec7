"""One run per key at a time, shared by the callers that ask meanwhile (``evaluator/single_flight.py``)."""

from __future__ import annotations

import asyncio

import pytest

from geak.evaluator.single_flight import SingleFlight


def _counted(started: list[str], result: str = "done", fail: bool = False, seconds: float = 0.05):
    async def start() -> str:
        started.append(result)
        await asyncio.sleep(seconds)
        if fail:
            raise ValueError("the reference fails its own test")
        return result

    return start


def test_callers_at_once_share_one_run_and_a_later_call_runs_again():
    async def go():
        flights: SingleFlight[str] = SingleFlight()
        started: list[str] = []
        together = await asyncio.gather(*(flights.run("ref", _counted(started)) for _ in range(3)))
        assert together == ["done"] * 3 and started == ["done"], (together, started)
        assert not flights.running("ref")
        assert await flights.run("ref", _counted(started, "again")) == "again"
        assert await flights.run("other", _counted(started, "other")) == "other"
        assert started == ["done", "again", "other"], started

    asyncio.run(go())


def test_an_error_reaches_every_caller_waiting_then():
    async def go():
        flights: SingleFlight[str] = SingleFlight()
        started: list[str] = []
        found = await asyncio.gather(
            *(flights.run("ref", _counted(started, fail=True)) for _ in range(2)), return_exceptions=True
        )
        assert [type(e) for e in found] == [ValueError, ValueError] and len(started) == 1, (found, started)
        assert await flights.run("ref", _counted(started, "mended")) == "mended"  # not kept: runs again

    asyncio.run(go())


def test_a_cancelled_caller_leaves_the_run_to_the_others_and_the_last_one_stops_it():
    async def go():
        flights: SingleFlight[str] = SingleFlight()
        started: list[str] = []
        first = asyncio.ensure_future(flights.run("ref", _counted(started, seconds=0.3)))
        second = asyncio.ensure_future(flights.run("ref", _counted(started, "never started")))
        await asyncio.sleep(0.05)
        first.cancel()  # the caller that started the run leaves: the other still gets it
        assert await second == "done" and started == ["done"], started
        with pytest.raises(asyncio.CancelledError):
            await first

        ran_on: list[str] = []

        async def long_run() -> str:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                ran_on.append("cancelled")  # as the pool kills the job of a cancelled run
                raise
            return "too late"

        only = asyncio.ensure_future(flights.run("ref", long_run))
        await asyncio.sleep(0.05)
        only.cancel()  # no one else waits: the run itself is cancelled
        with pytest.raises(asyncio.CancelledError):
            await only
        # a caller coming while that run is still being cancelled starts its own, not the cancelled one's end
        assert await flights.run("ref", _counted(started, "anew")) == "anew"
        assert ran_on == ["cancelled"] and not flights.running("ref"), ran_on

    asyncio.run(go())
