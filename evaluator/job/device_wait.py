"""How a check job's host thread waits for the GPU: asleep, not spinning.

By default CUDA (and HIP) spin a core while a process with one context waits for its device. A check measures no
time, and a dozen checks at once share one GPU: while one of them runs a long kernel (autotuning, a kernel that
spins until its time limit), the others' waits stretch with the device's time-slicing, each burning a core that
the others' compiles need (TritonBench-revised against itself, 12 checks on an H100 with 16 cores: the host was
busy throughout). So a check job's context is made with blocking synchronization before it opens; timing jobs keep
the default, where waking up costs nothing measured.

A check job's CUDA context also opens with one hardware work queue (``CUDA_DEVICE_MAX_CONNECTIONS=1``, instead of
8): making a context is kernel work that the driver serializes between processes, and every check job makes one. On
an H200, 14 processes making their contexts at once took 2.4 s each (0.52 s of system time) with 8 queues, and
0.76 s (0.19 s) with one; one alone, 0.35 s and 0.28 s. Streams keep their order and their results with one queue;
only their concurrency goes, which a check does not measure. Timing jobs keep the default: a candidate's streams run
there as they would for its user.
"""

from __future__ import annotations

import ctypes
import os

CUDA_DRIVER = "libcuda.so.1"  # the name the CUDA runtime loads the driver by
CU_CTX_SCHED_BLOCKING_SYNC = 0x04  # cuda.h
HIP_DEVICE_SCHEDULE_BLOCKING_SYNC = 0x04  # hip_runtime_api.h
HIP_RUNTIMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5")  # as torch loads it


CHECK_CONNECTIONS = "1"  # CUDA_DEVICE_MAX_CONNECTIONS of a check job's context


def one_work_queue() -> None:
    """Make this process's CUDA contexts open with one hardware work queue; call it before the driver starts (ROCm
    has no such setting here)."""
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = CHECK_CONNECTIONS


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
    """The current device (device 0 in a fresh job process), as HIP sets it before its context opens; in the HIP
    runtime torch loaded (another copy of it would keep a state of its own), else not at all."""
    for name in HIP_RUNTIMES:
        try:
            runtime = ctypes.CDLL(name, mode=os.RTLD_NOLOAD)
        except OSError:  # not the name of a loaded library
            continue
        return runtime.hipSetDeviceFlags(ctypes.c_uint(HIP_DEVICE_SCHEDULE_BLOCKING_SYNC)) == 0
    return False
