"""The device's ceilings and noise margin as an evaluator knows them: a validated cache, else one measurement in a
job that runs no user code, else the datasheet's."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from . import peaks as peaks_cache
from .options import EvalOptions
from .pool import WorkerPool
from .progress import Progress, relay, say
from .results import Peaks
from .runtime_facts import RuntimeFacts
from .shared.protocol import PeaksJob


class DevicePeaks:
    """One evaluator's peaks, measured at most once: timings started together wait for the one measurement, rather
    than each measuring the device alone, one after another, before any timing starts."""

    def __init__(self, pool: WorkerPool, options: EvalOptions):
        self._pool = pool
        self._options = options
        self._peaks: Peaks | None = None
        self._measuring = asyncio.Lock()

    async def get(self, progress: Progress | None = None) -> Peaks:
        """The device's ceilings and noise margin: validated cache, else measured once in a job that runs no user
        code (and cached by this process only), else the datasheet's. Callers at once wait for the one measurement,
        rather than each measuring the device alone, one after another, before any timing starts."""
        if self._peaks is not None:
            return self._peaks
        async with self._measuring:
            if self._peaks is None:
                self._peaks = await self._measure(progress)
        return self._peaks

    async def _measure(self, progress: Progress | None) -> Peaks:
        info = RuntimeFacts.from_dict(await self._pool.runtime_info())
        cached = peaks_cache.read_cached(info) if self._options.measure_peaks else None
        if cached is not None:
            return cached
        say(progress, "measuring the device's peaks and noise floor (once per device)")
        job = asdict(PeaksJob(kind="peaks", measure=self._options.measure_peaks))
        outcome = await self._pool.run(job, timeout_s=self._options.timeout_s, on_event=relay(progress))
        found = (outcome.result or {}).get("peaks") if outcome.status == "ok" else None
        peaks = peaks_cache.measured_peaks(found, str(info.device))
        if peaks is not None:
            peaks_cache.store(info, peaks)
        else:
            found = found or {}
            peaks = peaks_cache.datasheet_peaks(
                str(info.device), int(found.get("l2_bytes") or 0), int(found.get("units") or info.units or 0)
            )
        return peaks
