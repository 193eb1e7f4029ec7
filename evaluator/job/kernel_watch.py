"""Tells the caller, within seconds, that a check's GPU kernels have stopped making progress.

A kernel that spins for ever (waiting on a lock that no program sets, as a reduction's lock may at sizes its test
never ran; a loop whose condition never changes, as model-written kernels have) cannot be stopped in its
process, and the process says nothing while it spins, as it says nothing while it compiles. So the caller could only
call it hung after a probe's silence limit (``probe_rules.probe_stall_s``, 60 s at least) or the check's time limit,
and all that while the spinning kernel held the device that the timings of other files waited for.

While a check job's tests and probes run, the launch hook (``sandbox``) records an event after each Triton launch
(`KernelWatch.launched`) and a thread of this job queries them. Once some are pending and none has completed for
`stuck_s` (``probe_rules.kernel_stuck_s``), the thread tells the caller, which ends the job as hung in that test or
probe. Only the time this process runs counts: the pool stops checks while a timing measures, and the thread counts
no more than a few polls' worth of any one gap.

The thread queries in relaxed capture mode and no event is recorded while the launching stream captures a graph, so
a wrapper's CUDA graph capture is never disturbed. What the job says here can only end it sooner, never pass it.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from .device_wait import CUDA_DRIVER, loaded_hip_runtime

POLL_S = 0.25  # how often the thread looks at the pending events
MAX_STEP_S = 4 * POLL_S  # the most one gap between polls counts (a longer one: this process was stopped)
RELAXED_CAPTURE = 2  # CU_STREAM_CAPTURE_MODE_RELAXED, hipStreamCaptureModeRelaxed


class KernelWatch:
    """Pending launch events, and the thread that watches them. `say(stuck_s)` is called once, from the thread, when
    events have been pending `stuck_s` seconds of this process's time without one completing."""

    def __init__(self, say: Callable[[float], None], stuck_s: float) -> None:
        self.say, self.stuck_s = say, stuck_s
        self.pending: list[tuple[Any, float]] = []  # (event, when it was recorded, in `awake` seconds)
        self.awake = 0.0  # seconds this process has run since the watch began, as the thread counted them
        self.progress_at = 0.0  # (`awake`) when an event last completed, or the watch began
        self.said = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def launched(self, event: Any) -> None:
        """An event recorded after a launch (from the launching thread)."""
        with self._lock:
            self.pending.append((event, self.awake))

    def poll(self, step_s: float) -> bool:
        """One look, `step_s` seconds after the last: drop the completed events; returns whether the pending ones
        have made no progress for `stuck_s` (and says so, once)."""
        with self._lock:
            self.awake += min(max(step_s, 0.0), MAX_STEP_S)
            left = [(event, at) for event, at in self.pending if not event.query()]  # raises on a GPU fault
            if len(left) < len(self.pending):
                self.progress_at = self.awake
            self.pending = left
            stuck = bool(left) and self.awake - max(self.progress_at, left[0][1]) >= self.stuck_s
        if stuck and not self.said:
            self.said = True
            self.say(self.stuck_s)
        return stuck

    def start(self, hip: bool) -> bool:
        """Start watching; False where this thread cannot query in relaxed capture mode (no watch then)."""
        started = threading.Event()
        relaxed = {"ok": False}

        def watch() -> None:
            try:
                relaxed["ok"] = _relaxed_capture_mode(hip)
            except Exception:  # unforeseen: no watch, and the launching thread goes on
                relaxed["ok"] = False
            finally:
                started.set()
            if not relaxed["ok"]:
                return
            last = time.monotonic()
            while not self._stop.wait(POLL_S) and not self.said:
                now = time.monotonic()
                try:
                    self.poll(now - last)
                except Exception:  # a fault the launching thread meets and reports too: nothing left to watch
                    return
                last = now

        self._thread = threading.Thread(target=watch, name="kernel-watch", daemon=True)
        self._thread.start()
        started.wait()
        return relaxed["ok"]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self.pending.clear()


def _relaxed_capture_mode(hip: bool) -> bool:
    """Put the calling thread in relaxed stream capture mode: its event queries are then allowed while another
    thread captures a graph, and do not end that capture."""
    mode = ctypes.c_int(RELAXED_CAPTURE)
    try:
        if hip:
            runtime = loaded_hip_runtime()
            return runtime is not None and runtime.hipThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0
        return ctypes.CDLL(CUDA_DRIVER).cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0
    except (OSError, AttributeError):  # no such library or function: no watch
        return False
