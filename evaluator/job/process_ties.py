"""How a job-side process is forked and tied to the one that started it (Linux ``prctl(2)``), importable before torch
(the zygote sets its own tie first)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import warnings

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, value: int) -> None:
    """Linux prctl(2); without it (another OS, or a seccomp filter that forbids it) nothing, the process still works,
    less tidily."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def die_with_parent() -> None:
    """In a forked process: be killed when the thread that forked it ends."""
    prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def fork_process() -> int:
    """`os.fork()`, without Python 3.12's warning about forking a multi-threaded process: the zygote runs no Python
    threads, and the native pools that torch and numpy start (OpenMP, OpenBLAS) re-create themselves after a fork."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork", category=DeprecationWarning)
        return os.fork()
