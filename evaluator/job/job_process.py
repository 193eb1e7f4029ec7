"""A job process, forked from the zygote for one request: it ties itself to the zygote, confines itself, opens its
GPU runtime and runs its job (a check, a timing, a screening, the device's peaks or a profile), ending with its
``result`` message."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..shared.protocol import BenchJob, CheckJob, Job, PeaksJob, ScreenJob, job_from_dict
from . import kernel_profile
from .bench_capture import Send
from .process_ties import die_with_parent

if TYPE_CHECKING:
    from .confinement import Confinement


def run_job(
    request: dict[str, Any],
    info: Any,
    confinement: Confinement,
    send: Send,
    go_read: int,
    zygote_pid: int,
    grant_read: int | None,
) -> None:
    """In the forked job process: wait until the zygote has announced it (`go_read`), confine it, open its runtime
    and run `request`'s job, sending its result; `grant_read` passes the pool's device grants (None: none come)."""
    from . import device_grant, device_wait, sandbox
    from .compile import dry_pass

    os.setpgid(0, 0)  # its own process group: the pool kills the job with all it started
    die_with_parent()
    if os.getppid() not in (zygote_pid, 0):  # the zygote died before the line above took effect (0: a PID 1)
        return
    redirect_output(request["log"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if os.read(go_read, 1) != b"g":  # wait until the zygote has announced this process
        return
    os.close(go_read)
    try:
        job = job_from_dict(request["job"])
    except (TypeError, ValueError) as e:
        send({"event": "result", "worker_error": f"a malformed job: {e}"})
        return
    try:
        # From here on (in the sandbox's PID 1, if any) user code may run.
        confinement.enter(getattr(job, "scratch", None))
    except BaseException as e:
        detail = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        send({"event": "result", "worker_error": f"isolating the job failed:\n{detail}"})
        return
    ahead = None  # a check's dry pass, compiling its kernels ahead of its tests
    try:
        timed_files = [m["path"] for m in job.modules] if isinstance(job, BenchJob | ScreenJob) else []
        if info.backend == "cuda" and device_wait.one_work_queue_serves(timed_files):
            device_wait.one_work_queue()
        if isinstance(job, CheckJob) and info.backend != "interpreter":  # a check times nothing
            ahead = dry_pass.start(job, info)  # before anything starts the GPU's driver here
            device_wait.sleep_while_waiting(hip=info.backend == "rocm")
        sandbox.enter_child(info)
        if ahead is not None:
            ahead.go()
    except BaseException as e:
        detail = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        send({"event": "result", "worker_error": f"opening the {info.backend} runtime failed:\n{detail}"})
        if ahead is not None:
            ahead.stop()
        return
    if isinstance(job, CheckJob) and job.cwd and confinement.policy is None:  # sandboxed: in its own directory
        os.chdir(job.cwd)
    try:
        device_grant.DEVICE_GRANTS.open(send, grant_read, _quiet_device(info))
        _provide_rocm_bench(job)
        from .bench_job import run_bench
        from .check_job import run_check

        handler = {
            "check": run_check,
            "bench": run_bench,
            "screen": run_screen,
            "peaks": run_peaks,
            "profile": kernel_profile.run_profile,
        }[job.kind]
        result = handler(job, info, send)
    except device_grant.DeviceStillBusy as e:
        result = {"error": str(e), "device_busy": True}
    except BaseException as e:  # the worker's own failure, reported rather than lost
        result = {"worker_error": "".join(traceback.format_exception(type(e), e, e.__traceback__))}
    if ahead is not None:
        ahead.stop()
        if said := dry_pass.said(job.scratch):
            send({"event": "progress", "stage": said})
    send({"event": "result", **result})


def _quiet_device(info: Any) -> Callable[[], None] | None:
    """On a GPU, what a timing granted the device waits for: the paused jobs' queued work drained
    (``timing.wait_until_quiet``, bound before any user code is imported)."""
    if info.backend == "interpreter":
        return None
    from . import timing

    return timing.wait_until_quiet


def _provide_rocm_bench(job: Job) -> None:
    """The ROCm suite's benchmark module, for every job that imports user files in its own process (a profile job's
    profiler process imports them and installs its own: ``profile_target``)."""
    from . import rocm_bench

    if isinstance(job, CheckJob):
        rocm_bench.install(Path(job.scratch), [job.path])
    elif isinstance(job, BenchJob | ScreenJob):
        rocm_bench.install(Path(job.scratch), [m["path"] for m in job.modules])


def redirect_output(log_path: str) -> None:
    """Point fds 1 and 2 (and so sys.stdout / sys.stderr) at `log_path`."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


def run_screen(job: ScreenJob, info: Any, send) -> dict[str, Any]:
    """Many variants of the file's launch configuration on the test's own inputs (``screening``)."""
    from .screening import run_screen as screen

    return screen(job, info, send)


def run_peaks(job: PeaksJob, info: Any, send) -> dict[str, Any]:
    """Measure the device's ceilings and A/A rounds (no user code runs in this job)."""
    from .device_ceilings import measure, warm_up

    if info.backend == "interpreter":
        return {"error": "no GPU: nothing to measure"}
    from . import device_grant

    if job.measure:
        send({"event": "progress", "bench": "loading what the device's measurement runs"})
        warm_up()
    device_grant.DEVICE_GRANTS.wait_alone()
    send({"event": "progress", "bench": "measuring the device's peaks and noise floor"})
    peaks = measure(job.measure)
    device_grant.DEVICE_GRANTS.release()
    return {"peaks": peaks}
