"""A worker process: runs ONE job of user code and reports plain JSON. Started by ``pool.WorkerPool``.

Protocol (newline-delimited JSON): on a private copy of the original stdout the worker writes ``{"event": "ready"}``
once torch and Triton are warm, reads one job line from stdin, may write ``{"event": "progress"}`` lines, and ends
with ``{"event": "result"}``. Anything the user's code prints goes to a log file, never to the protocol pipe. A
worker that dies or exits without a result message has failed, whatever its exit code.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

FATAL_GPU_ERRORS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "illegal instruction",
    "misaligned address",
    "memory access fault",
    "hipErrorIllegal",
)


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    log_fd = os.open(os.environ["GEAK_WORKER_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)

    def send(message: dict[str, Any]) -> None:
        proto.write(json.dumps(message, default=str) + "\n")
        proto.flush()

    try:
        from . import sandbox

        info = sandbox.start_runtime(os.environ.get("GEAK_BACKEND", "auto"))
    except BaseException as e:
        send(
            {
                "event": "startup_error",
                "message": "".join(traceback.format_exception_only(type(e), e)).strip(),
            }
        )
        return
    send({"event": "ready", "pid": os.getpid(), **info.__dict__})
    line = sys.stdin.readline()
    if not line:
        return
    job = json.loads(line)
    if job.get("cwd"):
        os.chdir(job["cwd"])
    try:
        handler = {"check": run_check, "bench": run_bench}[job["kind"]]
        result = handler(job, info, send)
    except BaseException as e:  # the worker's own failure, reported rather than lost
        result = {"worker_error": "".join(traceback.format_exception(type(e), e, e.__traceback__))}
    send({"event": "result", **result})
    proto.close()
    os._exit(0)  # skip interpreter teardown: user code may have left state that hangs on exit


# ----------------------------------------------------------------------------------------- check


def run_check(job: dict[str, Any], info: Any, send) -> dict[str, Any]:
    import torch

    from . import sandbox
    from .capture import CallRecorder, call_outputs, fresh_args, replayable, to_portable

    gpu = info.backend != "interpreter"
    device = "cuda" if gpu else "cpu"
    out_dir = Path(job["outputs_dir"])
    path = job["path"]
    sandbox.set_poisoning(True)
    result: dict[str, Any] = {"tests": [], "import_error": None, "calls": [], "fresh": []}
    try:
        module = sandbox.load_module(path, job["module_name"])
    except BaseException as e:
        result["import_error"] = sandbox.describe_error(e, path, None)
        return result
    recorder = CallRecorder(module, job["wrappers"])
    fatal = None
    for name in job["tests"]:
        if fatal:
            result["tests"].append({"name": name, "kind": "error", "message": f"not run: {fatal}"})
            continue
        send({"event": "progress", "test": name})
        entry, error = _run_test(module, name, path, recorder, gpu)
        if entry["kind"] == "pass":
            try:
                torch.save(to_portable(entry.pop("_return", None)), out_dir / f"{name}.pt")
                entry["output_file"] = f"{name}.pt"
            except Exception as e:  # unpicklable or broken output
                entry.update(kind="error", message=f"test output could not be read back: {e}")
        entry.pop("_return", None)
        result["tests"].append(entry)
        if error is not None and gpu and any(s in str(error) for s in FATAL_GPU_ERRORS):
            fatal = "the GPU context was lost after a fault in an earlier test"

    result["calls"] = [
        {"wrapper": c.wrapper, "spec": c.spec, "signature": c.signature}
        for c in recorder.unique_calls(job.get("max_calls", 8))
    ]
    fresh = job.get("fresh")
    if fresh and not fatal:
        calls = fresh.get("calls") or result["calls"]
        for i, call in enumerate(calls):
            entry = {"index": i, "signature": call["signature"], "status": "skipped"}
            fn = recorder.originals.get(call["wrapper"])
            if fn is None:
                entry.update(status="error", message=f"wrapper {call['wrapper']}() is missing")
            elif replayable(call["spec"]):
                try:
                    args, kwargs = fresh_args(call["spec"], fresh["seed"] + i, device)
                except (ValueError, RuntimeError, TypeError) as e:
                    entry.update(status="skipped", message=f"inputs cannot be redrawn: {e}")
                else:
                    sandbox.LAUNCHES.clear()
                    try:
                        ret = fn(*args, **kwargs)
                        sandbox.synchronize(gpu)
                        torch.save(call_outputs(ret, args, kwargs), out_dir / f"fresh_{i}.pt")
                        entry.update(status="ok", output_file=f"fresh_{i}.pt", launches=dict(sandbox.LAUNCHES))
                    except BaseException as e:
                        entry.update(status="error", message=sandbox.describe_error(e, path, module)["message"])
                        if gpu and any(s in entry["message"] for s in FATAL_GPU_ERRORS):
                            result["fresh"].append(entry)
                            break
            result["fresh"].append(entry)
    return result


def _run_test(module, name: str, path: str, recorder, gpu: bool) -> tuple[dict[str, Any], BaseException | None]:
    from . import sandbox

    fn = getattr(module, name, None)
    if not callable(fn):
        return {"name": name, "kind": "error", "message": f"{name} is not a function"}, None
    sandbox.LAUNCHES.clear()
    threads = sandbox.live_threads()
    recorder.recording = True
    start = time.perf_counter()
    error: BaseException | None = None
    entry: dict[str, Any] = {"name": name, "kind": "pass", "message": ""}
    try:
        entry["_return"] = fn()
        sandbox.synchronize(gpu)
    except BaseException as e:
        error = e
        described = sandbox.describe_error(e, path, module)
        entry.update(
            kind="assert" if described["is_assertion"] else "error",
            message=described["message"],
            error=described,
        )
    finally:
        recorder.recording = False
    entry["duration_s"] = time.perf_counter() - start
    entry["launches"] = dict(sandbox.LAUNCHES)
    leftover = sandbox.live_threads() - threads
    if leftover and entry["kind"] == "pass":
        entry.update(kind="error", message=f"{name} left {len(leftover)} thread(s) running after it returned")
    return entry, error


# ----------------------------------------------------------------------------------------- bench


def run_bench(job: dict[str, Any], info: Any, send) -> dict[str, Any]:
    import torch

    from . import sandbox, timing
    from .capture import CallRecorder, bytes_moved
    from .peaks import device_peaks

    if info.backend == "interpreter":
        return {"error": "timing needs a GPU: no CUDA or ROCm device is visible"}
    sandbox.set_poisoning(False)
    variants: dict[str, dict[str, Any]] = {}
    for spec in job["modules"]:
        label = spec["label"]
        try:
            module = sandbox.load_module(spec["path"], spec["module_name"])
        except BaseException as e:
            return {
                "error": f"{label}: import failed",
                "error_detail": sandbox.describe_error(e, spec["path"], None),
                "label": label,
            }
        recorder = CallRecorder(module, spec["wrappers"], keep_args=True)
        recorder.recording = True
        for name in job["functions"]:
            send({"event": "progress", "bench": f"{label}:{name}"})
            try:
                getattr(module, name)()
                torch.cuda.synchronize()
            except BaseException as e:
                return {
                    "error": f"{label}: {name}() failed",
                    "label": label,
                    "error_detail": sandbox.describe_error(e, spec["path"], module),
                }
        recorder.recording = False
        calls = recorder.unique_calls(job.get("max_calls", 16))
        if not calls:
            return {"error": f"{label}: {', '.join(job['functions'])} called no wrapper function of the kernel section"}
        variants[label] = {
            "module": module,
            "recorder": recorder,
            "calls": calls,
            "kernels": set(spec["kernels"]),
        }

    labels = list(variants)
    signatures = {label: [c.signature for c in v["calls"]] for label, v in variants.items()}
    if len({tuple(s) for s in signatures.values()}) > 1:
        return {"error": "the variants' captured calls differ: " + json.dumps(signatures)}

    peaks = device_peaks(measure=job.get("measure_peaks", True))
    timers: dict[str, list[Any]] = {label: [] for label in labels}
    per_call: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    n_calls = len(variants[labels[0]]["calls"])
    for i in range(n_calls):
        fns, estimates = {}, {}
        for label in labels:
            v = variants[label]
            call = v["calls"][i]
            fn = _bound(v["recorder"].originals[call.wrapper], call.args, call.kwargs)
            send({"event": "progress", "bench": f"{label}:{call.signature}"})
            ret = fn()  # compile / autotune outside the timed region
            torch.cuda.synchronize()
            flops = _counted(v["module"], f"flops_{call.wrapper}", call)
            moved = _counted(v["module"], f"bytes_{call.wrapper}", call) or bytes_moved(call.args, call.kwargs, ret)
            del ret
            fns[label], estimates[label] = fn, timing.estimate_ms(fn)
            per_call[label].append(
                {"wrapper": call.wrapper, "signature": call.signature, "bytes": moved, "flops": flops}
            )
        prefer_graph = min(estimates.values()) < timing.GRAPH_BELOW_MS
        for label in labels:
            timer = timing.make_timer(fns[label], estimates[label], job.get("rep_ms", 25), prefer_graph)
            try:
                timing.guard(fns[label], estimates[label])
            except timing.TimingFooled as e:
                return {"error": f"{label}: {e}", "fooled": True, "label": label}
            timers[label].append(timer)
            per_call[label][i]["method"] = timer.method
            if job.get("profile", True):
                per_call[label][i]["kernel_ms"] = timing.kernel_times(fns[label], variants[label]["kernels"])

    rounds = timing.interleaved(timers, job.get("rounds", 15), seed=job.get("seed", 0))
    for label in labels:
        for i, entry in enumerate(per_call[label]):
            samples = [r[i] for r in rounds[label]]
            entry["samples"] = samples
            entry["median_ms"] = statistics.median(samples)
    return {"calls": per_call, "rounds": rounds, "peaks": peaks.__dict__, "labels": labels}


def _bound(fn, args: tuple, kwargs: dict):
    return lambda: fn(*args, **kwargs)


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
