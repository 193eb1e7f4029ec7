"""Who has the device: checks share it, a timing has it alone.

A timing job measured while another job of the same pool runs on the GPU measures the other job too (time-slicing
between processes delays its kernels, and the wall-clock guard sees the device busy after the call). A timing job
shares the device while it imports and captures its calls, asks for it alone when it starts to measure
(``Hold.go_alone``; the worker's ``device_wanted`` event), and shares it again once it has measured, before it checks
the timed calls' outputs and exits (``Hold.share_again``; ``device_released``). Meanwhile the jobs sharing the device
are paused, not waited for: their processes are stopped (``Hold.pause``: SIGSTOP to the job's process group, which
frees the host too), and go on when the timing lets go, their time limits moved on by the pause. A check that runs a
minute (or hangs until its limit) so no longer holds every timing behind it. No job starts while a timing measures,
and waiting timings go first, so a stream of checks cannot starve them. In the job, a timing granted the device waits
until what the paused jobs had queued on it has drained (``job.timing.wait_until_quiet``); where it does not drain,
or the paused jobs' memory is what the timing lacked, the timing runs once more the old way, once the sharing jobs
have ended. The jobs it paused are then in the way (``DeviceShare.in_the_way``: one of them may run a kernel that
goes on while its process is stopped, until its time limit): until they have ended, no one has the device alone,
this rerun and the next timings included, while checks still start and run. Only then does the rerun hold newcomers
back to wait for the few jobs sharing the device at that moment. A job that ran out of GPU memory while sharing the
device may only have lacked what the others held: the pool runs it once more alone, the same way
(``out_of_device_memory``). Either way the job's outcome says why (``why_it_runs_again``, the one rule for both).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

log = logging.getLogger(__name__)

TIMED_KINDS = frozenset({"bench", "screen", "peaks", "profile"})  # job kinds (``protocol``) that want the device alone
OUT_OF_MEMORY = ("CUDA out of memory", "HIP out of memory", "OutOfMemoryError", "hipErrorOutOfMemory")


def out_of_device_memory(result: dict[str, Any] | None) -> bool:
    """Did a test, the import or a probe of the job fail for lack of GPU memory?"""
    if not result:
        return False
    entries = [*(result.get("tests") or []), *(result.get("fresh") or []), result.get("import_error") or {}]
    return any(isinstance(e, dict) and any(m in str(e.get("message", "")) for m in OUT_OF_MEMORY) for e in entries)


def why_it_runs_again(result: dict[str, Any] | None, timed: bool) -> str | None:
    """Why a job that shared the device runs once more, alone, once the jobs sharing it have ended (said in its
    result); None where it need not. A timing (`timed`), which paused the sharing jobs, for what they held: the device
    still busy with their queued work, or too little GPU memory left beside theirs; any other job for lack of
    memory."""
    if not result:
        return None
    if timed and result.get("device_busy"):
        return "the GPU stayed busy with the paused jobs' queued work"
    if timed:
        said = f"{result.get('error', '')} {(result.get('error_detail') or {}).get('message', '')}"
        short_of_memory = any(m in said for m in OUT_OF_MEMORY)
    else:
        short_of_memory = out_of_device_memory(result)
    return "it ran out of GPU memory beside the jobs sharing the device" if short_of_memory else None


class DeviceShare:
    """A readers-writer lock over one device, timings preferred. A holder that shares it can ask to have it alone
    (``Hold.go_alone``). With `pause` (a timing), the others sharing it are paused until it lets go; without (a job
    rerun for lack of memory), it waits until they have ended. Either way it keeps the device alone until it lets go,
    and no one new starts meanwhile."""

    def __init__(self, name: str = "the device") -> None:
        self.name = name  # in its debug lines (``benchmarks/spell_timeline.py`` reads them)
        self._changed = asyncio.Condition()
        self._sharers: set[Hold] = set()
        self._paused: list[Hold] = []  # the sharers paused for the holder that has the device alone
        self._alone = False
        self._waiting_alone = 0
        self._in_the_way: set[Hold] = set()  # until these have ended, no one has the device alone (``in_the_way``)

    @contextlib.asynccontextmanager
    async def use(self, *, alone: bool, pause: bool = True) -> AsyncIterator[Hold]:
        """Share the device, or have it alone (`pause`: by pausing those sharing it, else once they have ended)."""
        hold = Hold(self, alone, pause)
        async with self._changed:
            if alone:
                await self._wait_alone(hold)
                hold.alone_from = time.monotonic()
            else:
                await self._changed.wait_for(lambda: not self._alone and self._waiting_alone == 0)
                self._sharers.add(hold)
        try:
            yield hold
        finally:
            async with self._changed:
                if hold.alone:
                    self._let_go(hold)
                else:
                    self._sharers.discard(hold)
                self._in_the_way.discard(hold)
                self._changed.notify_all()

    def in_the_way(self, holds: set[Hold]) -> None:
        """What `holds` (the jobs a timing paused) left on the device, queued work or memory, was in that timing's way:
        until those still sharing it have ended, no one has the device alone. Newcomers still start meanwhile, so the
        device is not left to one of them whose kernel runs on until its time limit."""
        self._in_the_way |= holds & self._sharers
        log.debug("%s: %d job(s) in the way of a timing, none alone until they end", self.name, len(self._in_the_way))

    def _let_go(self, hold: Hold) -> None:
        """(Holding the condition.) `hold` no longer has the device alone: the paused go on."""
        self._alone = False
        hold.alone = False
        spell = time.monotonic() - hold.alone_from
        hold.alone_s += spell
        log.debug("%s: shared again after %.3f s alone (%d waiting for it)", self.name, spell, self._waiting_alone)
        for other in self._paused:
            other.resume()
        self._paused = []

    async def _wait_alone(self, hold: Hold) -> None:
        """(Holding the condition.) Wait until the jobs in the way have ended, holding no one back, then until no one
        else has the device alone (and, without `hold.pause_others`, until no one shares it), holding newcomers back;
        then have it alone, the sharers paused."""
        await self._changed.wait_for(lambda: not self._in_the_way & self._sharers)
        self._waiting_alone += 1
        try:
            await self._changed.wait_for(lambda: not self._alone and (hold.pause_others or not self._sharers))
        finally:
            self._waiting_alone -= 1
        self._alone = True
        self._paused = list(self._sharers)
        hold.paused_others |= self._sharers
        for other in self._paused:
            other.pause()
        log.debug("%s: alone for a job (%d paused, %d more waiting)", self.name, len(self._paused), self._waiting_alone)


class Hold:
    """One job's use of the device: shared, or alone. A sharer can be paused: its job process, once attached
    (``attach``), is stopped until it is resumed, and ``paused_s`` says how long it has been paused in all."""

    def __init__(self, share: DeviceShare, alone: bool, pause: bool = True):
        self._share = share
        self.alone = alone
        self.pause_others = pause
        self.alone_from = 0.0
        self.alone_s = 0.0  # how long it has had the device alone, the spells that ended
        self.paused_others: set[Hold] = set()  # the sharers paused for it, in all its spells
        self._signal: Callable[[bool], None] | None = None  # stops (True) or continues (False) the job process
        self._paused_at: float | None = None
        self._paused_before = 0.0

    def attach(self, signal: Callable[[bool], None]) -> None:
        """The job process is known: `signal(True)` stops it, `signal(False)` lets it go on (at once if paused)."""
        self._signal = signal
        if self._paused_at is not None:
            signal(True)

    def detach(self) -> None:
        """The job has said all it will (its result) or is gone: if stopped, it goes on, to exit; it is not stopped
        again."""
        if self._paused_at is not None and self._signal is not None:
            self._signal(False)
        self._signal = None

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def paused_s(self) -> float:
        """How long this holder has been paused, the pause now under way included."""
        now = time.monotonic()
        return self._paused_before + (now - self._paused_at if self._paused_at is not None else 0.0)

    def pause(self) -> None:
        if self._paused_at is None:
            self._paused_at = time.monotonic()
            if self._signal is not None:
                self._signal(True)

    def resume(self) -> None:
        if self._paused_at is not None:
            if self._signal is not None:
                self._signal(False)
            self._paused_before += time.monotonic() - self._paused_at
            self._paused_at = None

    async def go_alone(self) -> None:
        """From sharing the device to having it alone (at once if it already does)."""
        if self.alone:
            return
        share = self._share
        async with share._changed:
            share._sharers.discard(self)
            share._changed.notify_all()
            try:
                await share._wait_alone(self)
            except BaseException:  # cancelled while waiting: it shares again, as its release expects
                share._sharers.add(self)
                raise
            self.alone = True
            self.alone_from = time.monotonic()

    async def share_again(self) -> None:
        """From having the device alone back to sharing it (its measurement is done): the paused go on, and it may be
        paused in turn."""
        if not self.alone:
            return
        share = self._share
        async with share._changed:
            share._let_go(self)
            share._sharers.add(self)
            share._changed.notify_all()
