"""The worker: a fork server ("zygote") that runs each job of user code in a fresh forked process. Started by
``pool.WorkerPool``.

The zygote imports torch and Triton and does all the warm-up that leaves the GPU driver alone (``sandbox.
prepare_zygote``); it never runs user code. For each job it forks a job process, which opens its own GPU context
(``sandbox.enter_child``), runs the job and exits, so nothing a candidate does (monkeypatching torch, globals, a
corrupted GPU context) reaches the next one.

Protocol (newline-delimited JSON). The zygote reads requests ``{"job": {...}, "log": path}`` from stdin, one at a
time. On a private copy of the original stdout it writes ``{"event": "ready", backend, device, arch, ...}`` once
(or ``{"event": "startup_error"}``), then per request ``{"event": "started", "pid": ...}``; the job process adds
``{"event": "progress"}`` lines and ends with ``{"event": "result"}``; the zygote closes the request with
``{"event": "exited", "code": ...}`` (an exit status, or minus the signal number) once the job process is gone. A
job process that exits without a result message has failed, whatever its exit code. Anything user code prints
goes to the request's log file, never to the protocol pipe.

A timing job shares the device while it imports and captures its calls, and asks for it alone only for what it
measures: it sends ``{"event": "device_wanted"}`` and waits; once the pool has the device to itself, it writes
``{"grant": true}`` to the zygote, which passes it on through a pipe only that job process holds
(``device_grant.DEVICE_GRANTS``). A zygote that cannot watch its job and its input at once (no pidfd) says so
(``"grants": false``), and the pool then gives its timing jobs the device for their whole run.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from .bench_capture import Send
from .confinement import Confinement, confine_jobs
from .job_process import redirect_output, run_job
from .process_ties import PR_SET_CHILD_SUBREAPER, die_with_parent, prctl

# Imported once in the zygote so that job processes inherit them instead of importing them per job (relative names:
# modules of this package). Every job-side module is among them: a job process needs none of their files, which its
# namespaces do not show.
PRELOAD = (
    "triton.testing",
    ".capture",
    ".timing",
    ".device_ceilings",
    ".pytest_plugin",
    ".case_limits",
    ".repository",
    ".rocm_bench",
    ".screening",
    ".check_job",
    ".bench_job",
    ".bench_preparation",
    ".compile.forked",
    ".compile.dry_pass",
    ".compile.watch",
    ".compile.trusted_cache",
    ".process_ties",
    ".probes",
    ".probe_variants",
    ".namespaces",
    ".device_wait",
    ".kernel_profile",
    ".profile_target",
    "..shared.sequential",
    "scipy.special",  # the speedup interval of sequential rounds (``shared.sequential.interval``)
)

_IMPORTED_AT = time.perf_counter()  # before torch: the zygote's start-up is timed from here


def main() -> None:
    """`python -m PACKAGE.job.worker`, from the neutral copy of this package the pool wrote (``job_package``). The
    first line of its input is the pool's JSON configuration ({"backend", "log", "isolation", "policy", "bwrap",
    "trusted_cache", "forget"}): neither its command line nor its environment names the evaluator."""
    die_with_parent()  # no zygote outlives the pool's process
    requests = _Lines(0)
    config = json.loads(requests.next_line() or "{}")
    sys.argv[:] = [""]
    _forget_import_hooks(config.get("forget") or ())
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    redirect_output(config["log"])
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

    sending = threading.Lock()  # a job's own threads send too (``kernel_watch``): one line at a time

    def send(message: dict[str, Any]) -> None:
        line = json.dumps(message, default=str) + "\n"
        with sending:
            proto.write(line)
            proto.flush()

    try:
        from . import sandbox

        started = time.perf_counter()
        info = sandbox.prepare_zygote(config.get("backend", "auto"), preload=PRELOAD)
        prepared = time.perf_counter()
        confinement = confine_jobs(config, info, lambda: sandbox.enter_child(info))
        if confinement.trusted_cache and info.backend != "interpreter":
            from .compile import trusted_cache

            trusted_cache.build_helpers(confinement.trusted_cache, confinement.driver_built)
        if confinement.policy is None:  # no sandbox probe opened the runtime from a forked job: check that it can
            sandbox.check_forked_runtime(info)
    except BaseException as e:
        send({"event": "startup_error", "message": "".join(traceback.format_exception_only(type(e), e)).strip()})
        return
    # Orphans of a job process (whatever it started) are re-parented here, so they can be reaped, not left as zombies.
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    status = confinement.status
    grants = _pidfds_work()
    send(
        {
            "event": "ready",
            "pid": os.getpid(),
            **info.__dict__,
            "isolation": status.mechanism,
            "isolation_reason": status.reason,
            "grants": grants,
            "startup_s": {
                "torch": round(started - _IMPORTED_AT, 3),
                **sandbox.STARTUP_S,
                "isolation": round(time.perf_counter() - prepared, 3),
            },
        }
    )
    while True:
        line = requests.next_line()
        if line is None:  # the pool closed the pipe: shut down
            break
        code = _run_in_child(json.loads(line), info, confinement, proto, send, requests if grants else None)
        # A leading newline ends any line a killed job process left half-written.
        proto.write("\n")
        send({"event": "exited", "code": code})
    proto.close()
    os._exit(0)  # skip interpreter teardown (torch's can be slow)


def _forget_import_hooks(modules: Any) -> None:
    """Drop the import hooks that the evaluator's own installation added at start-up (an editable install's finder,
    named by the pool): their modules, finders, path hooks and `sys.path` entries."""
    for name in modules:
        module = sys.modules.pop(name, None)
        if module is None:
            continue
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "__module__", None) != name]
        sys.path_hooks[:] = [h for h in sys.path_hooks if getattr(h, "__module__", None) != name]
        placeholder = getattr(module, "PATH_PLACEHOLDER", None)
        sys.path[:] = [p for p in sys.path if p != placeholder]
        sys.path_importer_cache.pop(placeholder, None)


def _pidfds_work() -> bool:
    """Can this zygote watch a job process and its input at once (``_wait_passing_grants``)?"""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


class _Lines:
    """Lines read from a file descriptor with a buffer of its own, so that `poll` on the descriptor tells the truth
    (a buffered text file can hold lines that `poll` does not see)."""

    def __init__(self, fd: int):
        self.fd = fd
        self._buffer = b""

    def next_line(self) -> str | None:
        """The next line, waiting for it; None at the end of input."""
        while b"\n" not in self._buffer:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def buffered(self) -> bool:
        return b"\n" in self._buffer


def _run_in_child(
    request: dict[str, Any], info: Any, confinement: Confinement, proto: TextIO, send: Send, requests: _Lines | None
) -> int:
    """Fork a job process for `request` and wait for it, passing it the pool's device grants (`requests`: the
    pool's lines, None where grants cannot be passed); returns its exit code (minus the signal that killed it)."""

    from .compile import trusted_cache

    if confinement.trusted_cache:
        trusted_cache.seed_job(confinement.trusted_cache, request["job"])
    go_read, go_write = os.pipe()
    grant_read, grant_write = os.pipe()
    zygote_pid = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = confinement.fork()
    if pid == 0:  # the job process: never returns
        code = 1
        try:
            os.close(go_write)
            os.close(grant_write)
            run_job(request, info, confinement, send, go_read, zygote_pid, grant_read if requests else None)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
                proto.flush()
            os._exit(code)
    os.close(go_read)
    os.close(grant_read)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also done by the child: whichever runs first, the group exists before "started"
    send({"event": "started", "pid": pid})
    with contextlib.suppress(OSError):  # the job process may already be gone
        os.write(go_write, b"g")
    os.close(go_write)
    status = _wait_passing_grants(pid, requests, grant_write) if requests else os.waitpid(pid, 0)[1]
    os.close(grant_write)
    _reap_leftovers(pid)
    if confinement.trusted_cache:
        trusted_cache.keep_job(confinement.trusted_cache, request["job"])
    return os.waitstatus_to_exitcode(status)


def _wait_passing_grants(pid: int, requests: _Lines, grant_write: int) -> int:
    """Wait for the job process to end (its wait status), writing a byte to `grant_write` for each grant line the
    pool sends meanwhile."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(requests.fd, select.POLLIN)
    try:
        while True:
            ready = {requests.fd} if requests.buffered() else {fd for fd, _ in poller.poll()}
            if pidfd in ready:
                return os.waitpid(pid, 0)[1]
            line = requests.next_line()
            if line is None:  # the pool is gone: the job process dies with it (PDEATHSIG)
                poller.unregister(requests.fd)
            elif _is_grant(line):
                with contextlib.suppress(OSError):  # the job may have closed its end
                    os.write(grant_write, b"g")
    finally:
        os.close(pidfd)


def _is_grant(line: str) -> bool:
    try:
        return json.loads(line).get("grant") is True
    except (ValueError, AttributeError):
        return False


def _reap_leftovers(pgid: int) -> None:
    """Kill and reap what a finished job left running: its process group, and processes that left the group (they
    are re-parented to this subreaper). Between jobs the zygote has no children of its own."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(1000):  # a bound, in case processes keep appearing
        try:
            if os.waitpid(-1, os.WNOHANG)[0]:
                continue  # reaped one
        except ChildProcessError:
            return  # no child left
        for pid in _child_pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(-1, 0)


def _child_pids() -> list[int]:
    me = os.getpid()
    children = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path("/proc", entry.name, "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                children.append(int(entry.name))
    return children


if __name__ == "__main__":
    main()
