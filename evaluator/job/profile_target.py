"""The process Nsight Compute or rocprofv3 starts for a profile job (``profiler_run``): `python -m
PACKAGE.job.profile_target SPEC`. It captures the file's calls as a timing does (``bench_capture``), runs each chosen
call once to compile and tune it, then once more between the profiler's start and stop (CUDA's profiler calls; on
ROCm, ROCTx's resume and pause, which rocprofv3 follows with ``--selected-regions``), and writes which of the file's
kernels each call launched, in order (the profiler's rows are matched with them)."""

from __future__ import annotations

import ctypes
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .profiler_run import LAUNCHES_FILE


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["scratch"]) / LAUNCHES_FILE
    out.write_text(json.dumps(profiled_calls(spec)))
    return 0


def profiled_calls(spec: dict[str, Any]) -> dict[str, Any]:
    """{"calls": [{"signature", "launches": [{"kernel", "hash"}]}]}, or {"error", "detail"}."""
    import torch

    from . import error_reports, launch_modes, rocm_bench, sandbox, timing
    from .bench_capture import calls_to_time, capture_bench_calls
    from .launch_modes import STATE

    sandbox.prepare_profiled_process()
    job = SimpleNamespace(**spec)
    rocm_bench.install(Path(job.scratch), [m["path"] for m in job.modules])  # the ROCm suite's benchmark module
    module_spec = {**job.modules[0], "label": "profiled"}
    captured = capture_bench_calls(job, module_spec, lambda message: None, timing.estimate_ms)
    if "error" in captured:
        return {"error": captured["error"], "detail": captured.get("error_detail")}
    kernels = set(module_spec["kernels"])
    brackets = profiler_brackets(bool(torch.version.hip))
    if brackets is None:
        return {"error": "ROCTx (librocprofiler-sdk-roctx.so) could not be loaded: rocprofv3 would count every launch"}
    start, stop = brackets
    calls = []
    for call in calls_to_time(captured["calls"], job.max_calls).calls:
        fn = captured["recorder"].originals[call.wrapper]
        sets = timing.InputSets((call.args, call.kwargs), 1, seed=0)
        try:
            sets.call(fn, 0)  # compiled and tuned before it is profiled
            torch.cuda.synchronize()
            with launch_modes.compiled_kept():
                start()
                try:
                    sets.call(fn, 0)
                    torch.cuda.synchronize()
                finally:
                    stop()
                launched = [(name, kernel) for name, kernel in STATE.compiled if name in kernels]
        except Exception as e:
            return {"error": f"its call {call.signature} failed", "detail": error_reports.describe_error(e, "", None)}
        launches = [{"kernel": name, "hash": str(getattr(kernel, "hash", "") or "")} for name, kernel in launched]
        calls.append({"signature": call.signature, "launches": launches})
    return {"calls": calls}


def profiler_brackets(hip: bool) -> tuple[Callable[[], Any], Callable[[], Any]] | None:
    """The calls that start and stop the profiler's collection: CUDA's profiler API, or on ROCm ROCTx's resume and
    pause of every thread (HIP's profiler calls are no-ops there); None where ROCTx cannot be loaded."""
    if not hip:
        import torch

        cudart = torch.cuda.cudart()
        return cudart.cudaProfilerStart, cudart.cudaProfilerStop
    for name in ("librocprofiler-sdk-roctx.so", "librocprofiler-sdk-roctx.so.1"):
        try:
            roctx = ctypes.CDLL(name)
        except OSError:
            continue
        every_thread = ctypes.c_uint64(0)
        return functools.partial(roctx.roctxProfilerResume, every_thread), functools.partial(
            roctx.roctxProfilerPause, every_thread
        )
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
