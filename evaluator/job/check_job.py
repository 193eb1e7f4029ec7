"""The check job: a file's tests (and their repeats and probes, as the job says), each test's outcome and output
kept."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from ..shared.probe_rules import kernel_stuck_s, probe_stall_s
from ..shared.protocol import HEARTBEAT_S, CheckJob, output_file_of_test


def run_check(job: CheckJob, info: Any, send) -> dict[str, Any]:
    """Run a file's tests (and repeats and probes, as the job says), each test's outcome and output kept. On a GPU,
    `@triton.autotune` kernels tune with the timing job's short benchmark (``timing.tuning_bench``): the device is
    shared here, so no choice made in a check is by speed, and Triton's 125 ms a config spends seconds a tuning key
    of a file with many configs; so do those whose file asked for Triton's CUDA-graph
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
    # Only a reference's run draws probes from its calls; another check replays the probes it is given.
    making = "make" in (job.probes or {})
    recording = lambda m: CallRecorder(m, job.wrappers, keep_args="integers", limit=RECORDED_CALLS if making else 0)
    recorder = None
    try:
        user_code.seed_everything(seed)
        if job.repository is not None:  # a repository's module: its wrappers recorded before the package binds them
            from .repository import import_candidate

            module, recorder = import_candidate(job.repository, path, recording)
        else:
            module = user_code.load_module(path, job.module_name)
    except BaseException as e:
        result["import_error"] = error_reports.describe_error(e, path, None)
        return result
    recorder = recorder or recording(module)
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
    # a reference's tests note the sizes its kernels step over without a mask, for probes at multiples of its blocks
    recording = launch_modes.steps_recorded() if making else contextlib.nullcontext()
    with watched(kernel_stuck_s(None)), recording:  # a test whose GPU kernels spin ends within seconds
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
                                   job.poison, make["variants"], probe_starting, hung,
                                   make.get("budget_s"))  # fmt: skip
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
    hooks = {"on_case": record, "before_test": before_test, "on_start": starting}
    if job.repository is None:
        return run_session(CasePlugin(module, path, plan, recorder, gpu, **hooks), Path(job.scratch))
    from . import repository  # a repository's tests, in its own files

    plugin = CasePlugin(module, path, plan, recorder, gpu, **hooks, name_of=repository.case_name)
    limits = repository.case_limits(job.repository, record)
    try:
        args = repository.session_args(job.repository, Path(job.scratch))
        return run_session(plugin, Path(job.scratch), args, (limits,) if limits is not None else ())
    except RuntimeError:  # the repository's configuration or a conftest.py failed: no test could run
        return [{"name": "collection", "kind": "error", "message": repository.unloadable()}]


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
