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
import math
import os
import select
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..shared.isolation_policy import PROCESS_ONLY, Policy
from ..shared.probe_rules import kernel_stuck_s, probe_stall_s
from ..shared.protocol import (
    HEARTBEAT_S,
    REPRODUCED,
    BenchJob,
    CheckJob,
    Job,
    PeaksJob,
    ScreenJob,
    job_from_dict,
    output_file_of_test,
    timed_output_file,
    timed_output_sets,
)
from . import kernel_profile, process_ties
from .bench_capture import Send, calls_to_time, capture_bench_calls
from .process_ties import PR_SET_CHILD_SUBREAPER, die_with_parent, prctl

if TYPE_CHECKING:
    from ..shared.sequential import RoundPlan

# Imported once in the zygote so that job processes inherit them instead of importing them per job (relative names:
# modules of this package). Every job-side module is among them: a job process needs none of their files, which its
# namespaces do not show.
PRELOAD = (
    "triton.testing",
    ".capture",
    ".timing",
    ".device_ceilings",
    ".pytest_plugin",
    ".rocm_bench",
    ".screening",
    ".compile.forked",
    ".compile.dry_pass",
    ".compile.watch",
    ".process_ties",
    ".probes",
    ".probe_variants",
    ".namespaces",
    ".device_wait",
    ".compile.trusted_cache",
    ".kernel_profile",
    ".profile_target",
    "..shared.sequential",
    "scipy.special",  # the speedup interval of sequential rounds (``shared.sequential.interval``)
)

_MONOTONIC = time.monotonic  # bound before any user code: a timing's time limit
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
    _redirect_output(config["log"])
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
        confinement = _confinement(config, info, lambda: sandbox.enter_child(info))
        if confinement.trusted_cache and info.backend != "interpreter":
            from .compile import trusted_cache

            trusted_cache.build_helpers(confinement.trusted_cache, lambda scratch: _driver_built(confinement, scratch))
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


@dataclass(frozen=True)
class _Confinement:
    """How this zygote's job processes are isolated (``namespaces.confine`` with `policy`, or process only)."""

    status: Any  # namespaces.Status
    policy: Policy | None  # None when jobs run as plain processes
    cpu_only: bool
    forker: Any | None = None  # namespaces.JobForker
    trusted_cache: str | None = None  # see compile/trusted_cache.py: only with isolated jobs (which compile privately)

    def fork(self) -> int:
        return self.forker.fork(process_ties.fork_process) if self.forker is not None else process_ties.fork_process()

    def enter(self, scratch: str | None) -> None:
        from . import namespaces

        if self.policy is None:
            return
        if not scratch:  # a job that writes no file (peaks): an empty directory in the worker's own
            scratch = tempfile.mkdtemp(prefix="job-", dir=os.getcwd())
        namespaces.confine(self.policy, scratch, self.cpu_only, self.status.user_ns)


def _confinement(config: dict[str, Any], info: Any, open_runtime: Callable[[], None]) -> _Confinement:
    """Probe the per-job namespaces once (with the runtime opened inside); "namespaces" demands them, "process"
    skips them."""
    from . import namespaces

    cpu_only = info.backend == "interpreter"
    mode = config.get("isolation", "auto")
    if mode == "process" or not config.get("policy"):
        return _Confinement(namespaces.Status(PROCESS_ONLY, "turned off"), None, cpu_only)
    policy = Policy.from_json(config["policy"])
    status = namespaces.probe(policy, bool(config.get("bwrap")), cpu_only, open_runtime)
    if not status.isolated and mode == "namespaces" and not config.get("bwrap"):  # (the pool retries without)
        raise RuntimeError(f"job isolation was required but is not available: {status.reason}")
    if not status.isolated:
        return _Confinement(status, None, cpu_only)
    from .compile import trusted_cache

    trusted = config.get("trusted_cache")
    trusted = trusted_cache.runtime_root(trusted, info) if trusted else None
    return _Confinement(status, policy, cpu_only, namespaces.JobForker(status.user_ns), trusted)


def _driver_built(confinement: _Confinement, scratch: str) -> bool:
    """Create Triton's driver in a process confined as a job is (its paths, hence its helper's cache key, are a
    job's) that runs no user code, with `scratch` as its folder: its helper module compiled into the job cache there.
    True if the process did."""
    from . import sandbox

    pid = confinement.fork()
    if pid == 0:  # never returns
        code = 1
        try:
            confinement.enter(scratch)
            sandbox.load_driver()
            code = 0
        except BaseException:
            traceback.print_exc()  # to the zygote's log
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


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
    request: dict[str, Any], info: Any, confinement: _Confinement, proto: TextIO, send: Send, requests: _Lines | None
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
            _job_process(request, info, confinement, send, go_read, zygote_pid, grant_read if requests else None)
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


def _job_process(
    request: dict[str, Any],
    info: Any,
    confinement: _Confinement,
    send: Send,
    go_read: int,
    zygote_pid: int,
    grant_read: int | None,
) -> None:
    from . import device_grant, device_wait, sandbox
    from .compile import dry_pass

    os.setpgid(0, 0)  # its own process group: the pool kills the job with all it started
    die_with_parent()
    if os.getppid() not in (zygote_pid, 0):  # the zygote died before the line above took effect (0: a PID 1)
        return
    _redirect_output(request["log"])
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


def _redirect_output(log_path: str) -> None:
    """Point fds 1 and 2 (and so sys.stdout / sys.stderr) at `log_path`."""
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


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


# ----------------------------------------------------------------------------------------- check


def run_check(job: CheckJob, info: Any, send) -> dict[str, Any]:
    """Run a file's tests (and repeats and probes, as the job says), each test's outcome and output kept. On a GPU,
    `@triton.autotune` kernels tune with the timing job's short benchmark (``timing.tuning_bench``): the device is
    shared here, so no choice made in a check is by speed, and Triton's 125 ms a config spent seconds a tuning key
    (10-11 s for a 48-config file's timing on an H100); so do those whose file asked for Triton's CUDA-graph
    benchmark (`use_cuda_graph=True`: ROCm `rmsnorm_fwd.py`), not one the file wrote itself. Their configs compile
    at once in forked processes first (``launch_modes.configs_compiled_ahead``), and those that fail there are not
    tuned. A compile that lasts is said to the caller (``compile.watch``)."""
    from .compile import watch

    running: dict[str, Any] = {"test": None}  # the test or probe now running (``_run_check`` keeps it)

    def said(words: dict[str, Any]) -> None:
        send({"event": "progress", **({"test": running["test"]} if running["test"] else {}), **words})

    with watch.reporting(said):
        if info.backend == "interpreter":  # which compiles nothing
            return _run_check(job, info, send, running)
        from . import launch_modes, timing

        with launch_modes.tuned_with(timing.tuning_bench, over_tritons=True), launch_modes.configs_compiled_ahead():
            return _run_check(job, info, send, running)


def _run_check(job: CheckJob, info: Any, send, running: dict[str, Any]) -> dict[str, Any]:
    import torch

    from . import error_reports, launch_modes, poisoning, user_code
    from .capture import RECORDED_CALLS, CallRecorder, to_portable
    from .compile import trusted_cache
    from .kernel_watch import KernelWatch
    from .probes import make_probes, replay_probes

    started = time.perf_counter()
    gpu = info.backend != "interpreter"
    out_dir = Path(job.outputs_dir)
    path = job.path
    seed = job.seed
    poisoning.set_poisoning(job.poison)
    result: dict[str, Any] = {"tests": [], "import_error": None, "fresh": []}
    if not gpu:
        from . import interpreter_shims

        def heartbeat(programs: int) -> None:
            send({"event": "progress", "test": running["test"], "programs": programs, "at": time.time()})

        interpreter_shims.report_programs(heartbeat, HEARTBEAT_S)
    trusted_cache.reuse_autotuning(gpu)
    send({"event": "progress", "stage": f"importing {Path(path).name}"})  # the job's process and context are ready
    try:
        user_code.seed_everything(seed)
        module = user_code.load_module(path, job.module_name)
    except BaseException as e:
        result["import_error"] = error_reports.describe_error(e, path, None)
        return result
    # Only a reference's run draws probes from its calls; another check replays the probes it is given.
    making = "make" in (job.probes or {})
    recorder = CallRecorder(module, job.wrappers, keep_args="integers", limit=RECORDED_CALLS if making else 0)
    fatal = ended = None  # why nothing more can run; why nothing more is run (``CheckJob.stop_kinds``)

    def record(entry: dict[str, Any], error: BaseException | None) -> str | None:
        """Keep one test's outcome and output; returns why nothing more runs (a lost GPU context, a stop kind)."""
        nonlocal fatal, ended
        if "_return" in entry:
            try:
                torch.save(to_portable(entry.pop("_return")), out_dir / output_file_of_test(entry["name"]))
            except Exception as e:  # unpicklable or broken output
                entry.update(kind="error", message=f"test output could not be read back: {e}")
        entry.pop("_return", None)
        result["tests"].append(entry)
        if error is not None and error_reports.context_lost(gpu, str(error)):
            fatal = "the GPU context was lost after a fault in an earlier test"
        elif entry["kind"] in job.stop_kinds and ended is None:
            ended = f"the run ended at {entry['name']}, which failed ({entry['kind']})"
        return fatal or ended

    def starting(name: str, stall_s: float | None = None) -> None:
        running["test"] = name
        send({"event": "progress", "test": name} | ({"stall_s": stall_s} if stall_s else {}))

    stuck = lambda stuck_s: send({"event": "progress", "test": running["test"], "stuck_s": stuck_s})
    watched = lambda stuck_s: launch_modes.kernels_watched(KernelWatch(stuck, stuck_s), gpu)
    with watched(kernel_stuck_s(None)):  # a test whose GPU kernels spin ends within seconds, not at the limit
        if job.test_style == "pytest":
            not_run = _run_pytest(job, module, recorder, gpu, record, starting, lambda: user_code.seed_everything(seed))
            result["tests"] += [_skipped_after(t, ended) for t in not_run]
        direct_tests = () if job.test_style == "pytest" else job.tests
        for name in direct_tests:
            if fatal or ended:
                kind = "error" if fatal else "skipped"
                result["tests"].append({"name": name, "kind": kind, "message": f"not run: {fatal or ended}"})
                continue
            starting(name)
            user_code.seed_everything(seed)
            entry, error = _run_test(module, name, path, recorder, gpu)
            if entry["kind"] != "pass":
                entry.pop("_return", None)
            record(entry, error)
        check_s = time.perf_counter() - started  # what a candidate's job takes of it: the import and the tests, once
        if job.repeat_tests and not (fatal or ended):  # the reference: is each output reproducible, all of it written?
            for entry in [t for t in result["tests"] if t["kind"] == "pass" and t["name"] in direct_tests]:
                starting(f"{entry['name']} (again)")
                user_code.seed_everything(seed)
                with poisoning.second_poison_filled() if job.poison else contextlib.nullcontext():
                    again, error = _run_test(module, entry["name"], path, recorder, gpu)
                if again["kind"] == "pass":
                    with contextlib.suppress(Exception):
                        output = to_portable(again.pop("_return", None))
                        torch.save(output, out_dir / output_file_of_test(entry["name"], "again"))
                if error is not None and error_reports.context_lost(gpu, str(error)):
                    fatal = "the GPU context was lost after a fault in a repeated test"
                    break

    probes = job.probes
    if probes and not (fatal or ended):
        starting("probes")
        describe = lambda e: error_reports.describe_error(e, path, module)["message"]
        stall_s = probe_stall_s(job.probe_stall_s, check_s)
        probe_starting = lambda name: starting(name, stall_s)  # the caller ends a probe silent longer as hung
        with watched(kernel_stuck_s(check_s)):  # ...or whose kernels spin
            if making:
                make = probes["make"]
                hung = frozenset(make.get("hung", ()))  # where an earlier run of this reference hung
                made = make_probes(recorder, make["seed"], seed, job.max_calls, out_dir, gpu, describe, check_s,
                                   job.poison, make["variants"], probe_starting, hung)  # fmt: skip
                result["fresh"] = made
            else:
                result["fresh"] = replay_probes(
                    recorder, probes["replay"], seed, out_dir, gpu, describe, probe_starting
                )
    return result


def _skipped_after(entry: dict[str, Any], ended: str | None) -> dict[str, Any]:
    """A case pytest did not run because the run ended at a stop kind is skipped, not failed."""
    if ended is not None and entry.get("message") == f"not run: {ended}":
        return {**entry, "kind": "skipped"}
    return entry


def _run_pytest(job: CheckJob, module, recorder, gpu: bool, record, starting, before_test) -> list[dict]:
    """Run the file's pytest-style tests with pytest itself (each case goes to `record`); returns outcomes of what
    did not run as a case (collection errors, cases left after a stop)."""
    from .pytest_plugin import CasePlugin, SessionPlan, run_session

    plan = SessionPlan(frozenset(job.tests), frozenset(job.benchmarks), job.output_source)
    path = Path(job.path)
    plugin = CasePlugin(module, path, plan, recorder, gpu, on_case=record, before_test=before_test, on_start=starting)
    return run_session(plugin, Path(job.scratch))


def _run_test(module, name: str, path: str, recorder, gpu: bool) -> tuple[dict[str, Any], BaseException | None]:
    from . import error_reports, user_code
    from .launch_modes import STATE

    fn = getattr(module, name, None)
    if not callable(fn):
        return {"name": name, "kind": "error", "message": f"{name} is not a function"}, None
    STATE.launches.clear()
    threads = user_code.live_threads()
    recorder.recording = True
    start = time.perf_counter()
    error: BaseException | None = None
    entry: dict[str, Any] = {"name": name, "kind": "pass", "message": ""}
    try:
        entry["_return"] = fn()
        user_code.synchronize(gpu)
    except BaseException as e:
        error = e
        described = error_reports.describe_error(e, path, module)
        entry.update(
            kind="assert" if described["is_assertion"] else "error",
            message=described["message"],
            error=described,
        )
    finally:
        recorder.recording = False
    entry["duration_s"] = time.perf_counter() - start
    entry["launches"] = dict(STATE.launches)
    leftover = user_code.live_threads() - threads
    if leftover and entry["kind"] == "pass":
        entry.update(kind="error", message=f"{name} left {len(leftover)} thread(s) running after it returned")
    return entry, error


# ----------------------------------------------------------------------------------------- bench


def run_bench(job: BenchJob, info: Any, send) -> dict[str, Any]:
    """Time the captured calls of each variant (reference first, if any) interleaved, on shared input sets that
    rotate and change values between timed calls; report samples, launches and device time per call, and save the
    outputs of late timed-like calls for the caller to compare (``timing_rules``)."""
    import torch

    from ..shared.sequential import RoundPlan, settled
    from . import device_grant, error_reports, launch_modes, poisoning, timing
    from .compile import trusted_cache
    from .screening import device_limits

    save = torch.save  # bound before any user code is imported
    poisoning.set_poisoning(False)
    trusted_cache.reuse_autotuning(False)
    laps, ahead_laps = _Laps(), _Laps()
    # the device is shared until the timing starts: autotuned kernels only compile their configs meanwhile
    with launch_modes.tuning_deferred(), launch_modes.configs_compiled_ahead():
        captured = _bench_variants(job, send)
        if "error" in captured:
            return captured
        variants = captured["variants"]
        labels = list(variants)
        signatures = {label: [c.signature for c in v["calls"]] for label, v in variants.items()}
        if len({tuple(s) for s in signatures.values()}) > 1:
            return {"error": "the variants' captured calls differ: " + json.dumps(signatures)}
        ready = _made_ready_ahead(job, variants, labels, send, ahead_laps) if info.backend != "interpreter" else None
        if ready is not None and "error" in ready:
            return ready
    send({"event": "progress", "bench": "waiting for the device alone"})
    device_grant.DEVICE_GRANTS.wait_alone()
    granted = _MONOTONIC()
    if info.backend == "interpreter":
        return {"error": "timing needs a GPU: no CUDA or ROCm device is visible"}
    planned = RoundPlan.from_dict(job.rounds)

    # identical kernels of the variants are tuned once, on the first's calls; each config timed by a few calls
    with launch_modes.twins_tuned_alike(), launch_modes.tuned_with(timing.tuning_bench):
        if ready is None:
            ready = _ready_calls(job, variants, labels, send, laps)
        prepared = ready if "error" in ready else _prepare_timers(job, ready["calls"], labels, planned, laps)
    if "error" in prepared:
        return prepared
    timers, per_call = prepared["timers"], prepared["calls"]

    plan = planned.for_calls(
        [(entry["method"], entry["estimate_ms"], entry["graph_nodes"]) for entry in per_call[labels[0]]]
    )
    stop = None
    timed_out = False
    rounds_from = _MONOTONIC()
    if set(labels) == {"reference", "candidate"}:

        def stop(out: dict[str, list[list[float]]]) -> bool:
            nonlocal timed_out
            if settled(out["reference"], out["candidate"], plan):
                return True
            timed_out = bool(plan.max_s) and _MONOTONIC() - rounds_from > plan.max_s
            return timed_out

    lag_before = timing.device_lag_ms()
    send({"event": "progress", "bench": "timed rounds", "batch": "start"})
    try:
        rounds = timing.interleaved(timers, plan, seed=job.seed, stop=stop)
    except timing.TimingFooled as e:
        return {"error": str(e), "fooled": True}
    except Exception as e:  # user code that fails only when timed
        return {"error": "a call failed while it was timed", "error_detail": error_reports.describe_error(e, "", None)}
    send({"event": "progress", "bench": "timed rounds", "batch": "end"})
    phases_s = {
        **{f"ahead {part}": seconds for part, seconds in ahead_laps.seconds.items()},
        "prepare": rounds_from - granted,
        **{f"prepare {part}": seconds for part, seconds in laps.seconds.items()},
        "rounds": _MONOTONIC() - rounds_from,
    }
    device_lag_ms = max(lag_before, timing.device_lag_ms())
    device_grant.DEVICE_GRANTS.release()  # measured: the outputs' check and the exit share the device
    for label in labels:
        for i, entry in enumerate(per_call[label]):
            timer = timers[label][i]
            samples = [r[i] for r in rounds[label]]
            entry.update(
                samples=samples,
                median_ms=statistics.median(samples),
                timed_calls=timer.timed_calls,
                timed_launches=timer.launches_per_call(),
            )
    if len(labels) > 1:
        send({"event": "progress", "bench": "checking the outputs of the timed calls"})
        try:
            _save_timed_outputs(timers, per_call, Path(job.outputs_dir), save)
        except Exception as e:
            detail = error_reports.describe_error(e, "", None)
            return {"error": "a call failed when the outputs of the timed calls were checked", "error_detail": detail}
    device_ms = {label: sum(t.device_ms for t in timers[label]) for label in labels}
    tuned = {label: autotune_choices(variants[label]["module"]) for label in labels}
    return {
        "calls": per_call,
        "labels": labels,
        "device_ms": device_ms,
        "autotune": tuned,
        "device_lag_ms": device_lag_ms,
        "device_limits": device_limits(),
        "rounds_timed_out": timed_out,
        "helpers": captured["helpers"],
        "phases_s": phases_s,
    }


class _Laps:
    """Seconds spent in each named part of a timing's preparation (what the job reports in ``phases_s``)."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    @contextlib.contextmanager
    def lap(self, name: str):
        started = _MONOTONIC()
        try:
            yield
        finally:
            self.seconds[name] += _MONOTONIC() - started


@dataclass
class _Ready:
    """One variant's captured call made ready to time: its original function, its input sets, what its untimed call
    counted (the entry its timing reports), and a graph timer captured before the device was granted, if any."""

    fn: Any
    sets: Any
    entry: dict[str, Any]
    graph: Any = None

    def once(self) -> Any:
        """One untimed call on the first input set (what is estimated, guarded and profiled)."""
        return self.sets.call(self.fn, 0)


def _ready_calls(job: BenchJob, variants: dict[str, Any], labels: list[str], send: Send, laps: _Laps) -> dict[str, Any]:
    """Per captured call, each variant's `_Ready` (its input sets made, compiled and tuned, its untimed call
    counted): {"calls": [{label: _Ready}]}, or an error result. The seconds go to `laps`."""
    import torch

    from . import timing

    n_calls = len(variants[labels[0]]["calls"])
    budget = int(torch.cuda.mem_get_info()[0] * 0.4) // (n_calls * len(labels))
    calls: list[dict[str, _Ready]] = []
    for i in range(n_calls):
        base_call = variants[labels[0]]["calls"][i]  # every variant times the same input values
        base = (base_call.args, base_call.kwargs)
        count = timing.set_count(timing.tensor_bytes(base), budget)
        calls.append({})
        for label in labels:
            v = variants[label]
            send({"event": "progress", "bench": f"{label}:{base_call.signature}"})
            fn = v["recorder"].originals[v["calls"][i].wrapper]
            try:
                with laps.lap("calls"):
                    sets = timing.InputSets(base, count, seed=job.input_seed)
                    calls[i][label] = _Ready(fn, sets, _prepare_call(fn, sets, v["module"], base_call))
            except Exception as e:  # user code failing on the captured call's copies (a fault on other addresses)
                return _timed_call_failed(label, base_call.signature, e)
    return {"calls": calls}


def _made_ready_ahead(
    job: BenchJob, variants: dict[str, Any], labels: list[str], send: Send, laps: _Laps
) -> dict[str, Any] | None:
    """`_ready_calls` while the device is still shared, with the graphs of calls short enough for one captured too
    (sized by each call's least time there): the preparation the device alone would otherwise wait for (on an H200,
    a quarter of a suite's timings' time alone went to graph captures). None, to make them ready once granted, where
    an autotuned kernel has not tuned yet (its first call tunes, with the device alone). A call that fails here is
    the timing's error at once (a fault leaves the device unusable to the job: TritonBench-revised
    `sgmv_expand_slice.py` on an H200); one for lack of memory beside the sharing jobs runs again alone (the pool)."""
    from .launch_modes import STATE

    if STATE.deferred_tunings:
        return None
    ready = _ready_calls(job, variants, labels, send, laps)
    if "error" in ready:
        return ready
    if STATE.deferred_tunings:
        return None
    with laps.lap("timers"):
        for by_label in ready["calls"]:
            failed = _graphs_ahead(by_label, job.rep_ms)
            if failed is not None:
                return failed
    return ready


def _graphs_ahead(by_label: dict[str, _Ready], sample_ms: float) -> dict[str, Any] | None:
    """Each variant's graph of a call short enough for one, sized by the call's least time on the shared device and
    `sample_ms` (``timing.graph_calls``; none where a variant's cannot be captured); the error result of a call that
    failed, else None."""
    from . import timing

    least = math.inf
    for label, r in by_label.items():
        try:
            least = min(least, timing.least_ms(r.once))
        except Exception as e:  # user code failing on the captured call's copies (a fault on other addresses)
            return _timed_call_failed(label, r.entry["signature"], e)
    if least >= timing.GRAPH_BELOW_MS:
        return None
    per_graph = timing.graph_calls(least, len(next(iter(by_label.values())).sets), sample_ms)
    for label, r in by_label.items():
        try:
            r.graph = timing.graph_timer(r.fn, r.sets, per_graph)
        except Exception as e:  # the warm-up before the capture faulted
            return _timed_call_failed(label, r.entry["signature"], e)
    if any(r.graph is None for r in by_label.values()):
        for r in by_label.values():
            r.graph = None
    return None


def _prepare_timers(
    job: BenchJob, calls: list[dict[str, _Ready]], labels: list[str], plan: RoundPlan, laps: _Laps
) -> dict[str, Any]:
    """Per captured call and variant (made ready: `_Ready`): estimate it and make its timer (the same method for
    every variant of a call, its samples as short as `plan`'s time limit needs; a graph captured ahead where its
    size suits the estimate), then guard it; {"timers", "calls"}, or an error result. The parts' seconds go to
    `laps`."""
    from . import timing

    # each variant's call's share of the rounds' time limit up to the first look (None: no limit)
    rounds_ms = plan.max_s * 1e3 / (plan.min_rounds * len(labels) * len(calls)) if plan.max_s else None
    timers: dict[str, list[Any]] = {label: [] for label in labels}
    per_call: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for by_label in calls:
        estimates = {}
        for label, r in by_label.items():
            per_call[label].append(r.entry)
            try:
                with laps.lap("estimates"):
                    estimates[label] = timing.estimate_ms(r.once)
            except Exception as e:  # user code failing on the captured call's copies (a fault on other addresses)
                return _timed_call_failed(label, r.entry["signature"], e)
        count = len(next(iter(by_label.values())).sets)
        fastest = min(estimates.values())
        per_graph = timing.graph_calls(fastest, count, job.rep_ms) if fastest < timing.GRAPH_BELOW_MS else None
        min_reps = timing.fewest_reps(max(estimates.values()), rounds_ms)
        with laps.lap("timers"):
            made = _made_ahead(by_label, per_graph)
            if made is None:
                made = {}
                for label, r in by_label.items():
                    try:
                        made[label] = timing.make_timer(r.fn, r.sets, estimates[label], job.rep_ms, per_graph, min_reps)
                    except Exception as e:  # the warm-up before a graph capture faulted
                        return _timed_call_failed(label, r.entry["signature"], e)
            if len({timer.method for timer in made.values()}) > 1:  # one in a graph, another not: time alike
                made = {label: timing.make_timer(r.fn, r.sets, estimates[label], job.rep_ms, None, min_reps)
                        for label, r in by_label.items()}  # fmt: skip
        nodes = max(timer.graph_nodes for timer in made.values())  # the band covers the variant that replays more
        for label, r in by_label.items():
            timer = made[label]
            try:
                with laps.lap("guards"):
                    timing.guard(r.once, estimates[label])
            except timing.TimingFooled as e:
                return {"error": f"{label}: {e}", "fooled": not isinstance(e, timing.DeviceBusy), "label": label}
            timers[label].append(timer)
            r.entry.update(
                method=timer.method,
                input_sets=len(r.sets),
                per_graph=timer.per_graph,
                graph_nodes=nodes,
                estimate_ms=estimates[label],
            )
            if job.profile:
                r.entry["kernel_ms"] = timing.kernel_times(r.once)
    return {"timers": timers, "calls": per_call}


def _made_ahead(by_label: dict[str, _Ready], per_graph: int | None) -> dict[str, Any] | None:
    """The graph timers captured ahead for a call, where every variant has one and their size is within a factor of
    two of `per_graph` (replays of 1-4 ms where 2 ms is asked); None: make them now. A graph not used is freed."""
    graphs = {label: r.graph for label, r in by_label.items()}
    for r in by_label.values():
        r.graph = None
    if per_graph is None or any(g is None for g in graphs.values()):
        return None
    if not all(per_graph / 2 <= g.per_graph <= per_graph * 2 for g in graphs.values()):
        return None
    return graphs


def _timed_call_failed(label: str, signature: str, e: BaseException) -> dict[str, Any]:
    from . import error_reports

    return {
        "error": f"{label}: its call {signature} failed when prepared for timing (on copies of the test's arguments)",
        "error_detail": error_reports.describe_error(e, "", None),
        "label": label,
    }


def autotune_choices(module) -> dict[str, dict[str, str]]:
    """What each `@triton.autotune` kernel of a module chose (informational: why an interval is wide): kernel ->
    tuning key -> config."""
    from triton.runtime.autotuner import Autotuner

    choices: dict[str, dict[str, str]] = {}
    for value in list(vars(module).values()):
        fn = value
        for _ in range(4):  # through @triton.heuristics wrappers
            if fn is None or isinstance(fn, Autotuner):
                break
            try:
                fn = getattr(fn, "fn", None)
            except Exception:
                fn = None
        if isinstance(fn, Autotuner):
            name = getattr(fn.base_fn, "__name__", "?")
            choices[name] = {str(key): str(config) for key, config in dict(fn.cache).items()}
    return choices


def _bench_variants(job: BenchJob, send: Send) -> dict[str, Any]:
    """Load each variant and run its bench functions once, capturing the wrapper calls (with cloned arguments); every
    variant times the calls the reference's chose (``calls_to_time``; the first variant's where none is labelled so).
    {"variants": {label: variant}, "helpers": the signatures left untimed}, or {"error": ...} when one fails."""
    from . import timing

    variants: dict[str, Any] = {}
    for spec in job.modules:
        captured = capture_bench_calls(job, spec, send, timing.estimate_ms)
        if "error" in captured:
            return captured
        variants[spec["label"]] = captured
    chooser = "reference" if "reference" in variants else next(iter(variants))
    chosen = calls_to_time(variants[chooser]["calls"], job.max_calls)
    like = [c.signature for c in chosen.calls]
    for label, v in variants.items():
        v["calls"] = chosen.calls if label == chooser else calls_to_time(v["calls"], job.max_calls, like).calls
    return {"variants": variants, "helpers": chosen.helpers}


def _prepare_call(fn, sets, module, base_call) -> dict[str, Any]:
    """Compile (and autotune) outside the timed region, and count what the call moves and launches untimed."""
    import torch

    from . import launch_modes, timing
    from .capture import bytes_moved, output_bytes
    from .launch_modes import STATE
    from .screening import compiled_facts

    ret = sets.call(fn, 0)
    torch.cuda.synchronize()
    args, kwargs = sets.sets[0]
    flops = _counted(module, f"flops_{base_call.wrapper}", base_call) or base_call.flops
    declared = _counted(module, f"bytes_{base_call.wrapper}", base_call)
    entry = {
        "wrapper": base_call.wrapper,
        "signature": base_call.signature,
        "bytes": declared or bytes_moved(args, kwargs, ret),
        "flops": flops,
        "certain_bytes": declared or output_bytes(args, kwargs, ret),
        "bytes_declared": bool(declared),
        "low_precision": any(
            "float8" in str(t.dtype) or t.dtype in (torch.int8, torch.uint8) for t in timing.tensors_of(sets.base)
        ),
    }
    del ret
    before = Counter(STATE.launches)
    with launch_modes.compiled_kept():  # what the compiler made of the kernels (why a kernel is slow)
        sets.call(fn, 0)  # the untimed call whose launches every timed call must match
        torch.cuda.synchronize()
        entry["kernels"] = compiled_facts(STATE.compiled)
    entry["checked_launches"] = dict(STATE.launches - before)
    return entry


def _save_timed_outputs(timers, entries: dict[str, list[dict[str, Any]]], out_dir: Path, save) -> None:
    """After all the timed calls: each variant's outputs on the same fresh values at its timed addresses (the
    reference's twice, to tell nondeterminism from cheating), saved under the names the caller expects
    (``protocol``). New allocations are poisoned meanwhile, so an output left unwritten cannot hold a right answer
    by chance."""
    from . import poisoning, timing
    from .capture import call_outputs, same_outputs

    poisoning.set_poisoning(True)
    try:
        first_label = next(iter(entries))  # the reference: its output size picks the checked sets for every variant
        for label, label_timers in timers.items():
            for i, timer in enumerate(label_timers):
                checked = timed_output_sets(len(timer.sets), entries[first_label][i]["certain_bytes"])
                first: dict[int, Any] = {}
                for run in ("", "again") if label == "reference" else ("",):
                    for k, (ret, args, kwargs) in timer.check_outputs(checked, timing.CHECK_STEP).items():
                        outputs = call_outputs(ret, args, kwargs)
                        if run and same_outputs(first[k], outputs):
                            outputs = REPRODUCED  # gigabytes that need no saving, reading back and comparing
                        first.setdefault(k, outputs)
                        save(outputs, out_dir / timed_output_file(label, i, k, run))
    finally:
        poisoning.set_poisoning(False)


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


def _counted(module, name: str, call) -> int | None:
    counter = getattr(module, name, None)
    if not callable(counter):
        return None
    try:
        return int(counter(*call.args, **call.kwargs))
    except Exception:
        return None


if __name__ == "__main__":
    main()
