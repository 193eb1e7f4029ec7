"""How a check job's host thread waits for the GPU: asleep, not spinning.

By default CUDA (and HIP) spin a core while a process with one context waits for its device. A check measures no
time, and a dozen checks at once share one GPU: while one of them runs a long kernel (autotuning, a kernel that
spins until its time limit), the others' waits stretch with the device's time-slicing, each burning a core that
the others' compiles need, until the host is busy throughout. So a check job's context is made with blocking
synchronization before it opens; timing jobs keep the default, where waking up costs nothing measured.

A job's CUDA context also opens with one hardware work queue (``CUDA_DEVICE_MAX_CONNECTIONS=1``, instead of 8): making a
context is kernel work that the driver serializes between processes, and every job makes one: with one queue a context
is cheaper to make, so that many processes making theirs at once wait several times less. Streams keep their order and
their results with one queue; what may change is how the work of several streams overlaps. A check measures no time, so
it always has one queue; a timing job has one unless a file it times names a stream (``one_work_queue_serves``), where a
candidate's streams run as they would for its user. A timing's preparation goes on only between others' measurements, so
a cheaper context also shortens those gaps, in which the device times nothing.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Iterable
from pathlib import Path

CUDA_DRIVER = "libcuda.so.1"  # the name the CUDA runtime loads the driver by
CU_CTX_SCHED_BLOCKING_SYNC = 0x04  # cuda.h
HIP_DEVICE_SCHEDULE_BLOCKING_SYNC = 0x04  # hip_runtime_api.h
HIP_RUNTIMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5")  # as torch loads it


ONE_QUEUE = "1"  # CUDA_DEVICE_MAX_CONNECTIONS of a context with one hardware work queue
NAMES_A_STREAM = re.compile(rb"stream", re.IGNORECASE)  # `torch.cuda.Stream`, `stream=`, `get_current_stream`, ...


def one_work_queue_serves(timed_files: Iterable[str]) -> bool:
    """Whether a job's context may open with one hardware work queue: none of the files it times names a stream (a
    check times none). A file that cannot be read counts as naming one. With one queue, work on several streams
    still overlaps, but a wait on one stream holds back the work queued behind it on the others: code that reaches
    streams without naming them (a library's own) may overlap less than for its user. Work escaping the timed
    stream is waited for or rejected either way (``timing``)."""
    for path in timed_files:
        try:
            if NAMES_A_STREAM.search(Path(path).read_bytes()):
                return False
        except OSError:
            return False
    return True


def one_work_queue() -> None:
    """Make this process's CUDA contexts open with one hardware work queue; call it before the driver starts (ROCm
    has no such setting here)."""
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = ONE_QUEUE


def sleep_while_waiting(hip: bool) -> bool:
    """Make this process's GPU contexts block on synchronization; call it before the first context opens. Returns
    whether the runtime took the setting (a runtime that refuses it leaves the default: only time is at stake)."""
    try:
        return _hip_blocking() if hip else _cuda_blocking()
    except (OSError, AttributeError):  # no such library or function: the default stays
        return False


def _cuda_blocking() -> bool:
    """Every visible device's primary context (the one the CUDA runtime, and so torch and Triton, use)."""
    driver = ctypes.CDLL(CUDA_DRIVER)
    if driver.cuInit(0) != 0:
        return False
    count = ctypes.c_int()
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return False
    set_flags = getattr(driver, "cuDevicePrimaryCtxSetFlags_v2", None) or driver.cuDevicePrimaryCtxSetFlags
    done = count.value > 0
    for ordinal in range(count.value):
        device = ctypes.c_int()
        ok = driver.cuDeviceGet(ctypes.byref(device), ordinal) == 0
        done = done and ok and set_flags(device, ctypes.c_uint(CU_CTX_SCHED_BLOCKING_SYNC)) == 0
    return done


def _hip_blocking() -> bool:
    """The current device (device 0 in a fresh job process), as HIP sets it before its context opens."""
    runtime = loaded_hip_runtime()
    return runtime is not None and runtime.hipSetDeviceFlags(ctypes.c_uint(HIP_DEVICE_SCHEDULE_BLOCKING_SYNC)) == 0


def loaded_hip_runtime() -> ctypes.CDLL | None:
    """The HIP runtime torch loaded (another copy of it would keep a state of its own); None if none is loaded."""
    for name in HIP_RUNTIMES:
        try:
            return ctypes.CDLL(name, mode=os.RTLD_NOLOAD)
        except OSError:  # not the name of a loaded library
            continue
    return None
