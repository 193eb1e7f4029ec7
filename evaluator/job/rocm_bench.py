"""The ROCm benchmark's perf API (the module `MODULE_NAME`) as job processes provide it.

ROCm-benchmark files import ``PytestBenchmarker``, ``do_bench_config`` and ``save_all_benchmark_results`` from the
suite's own harness, which users do not have installed. A module under that name ships in ``shims/``, importable
only in the job processes of files that name it (``install``: its sources, read when this module is imported, are
written to the job's directory and put on ``sys.path`` there, never in the caller's process, and the shim is bound
to this module). Its
benchmarker times nothing itself: it calls the benchmarked callable once under the ``Collector`` of the perf stage
(``bench_capture.capture_bench_calls``), so the ``CallRecorder`` captures the wrapper calls it makes; the job's own
timer then times those calls (on rotating inputs, like every captured call). A callable that launches a kernel without a
wrapper function (``kernel[grid](...)`` in a lambda) has no call to time, and is reported.
``save_all_benchmark_results`` writes only inside the job's scratch directory.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .capture import CallRecorder, RecordedCall

SHIM_DIR = Path(__file__).parent / "shims"
MODULE_NAME = "geak_eval.perf.ROCm.performance_utils_pytest"
_SHIM_PACKAGE = MODULE_NAME.split(".")[0]
# Read in the zygote: a job process sees no file of the evaluator.
_SHIM_SOURCES = {str(p.relative_to(SHIM_DIR)): p.read_text() for p in sorted(SHIM_DIR.rglob("*.py"))}

Calculator = Callable[[dict[str, Any], float], Any]


@dataclass
class Benchmark:
    """One `run_benchmark` call: the op, its parameters, its FLOPs from the file's calculator, and the span of
    wrapper calls (indices into the recorder's calls) it made."""

    op_name: str
    params: dict[str, Any]
    flops: int | None
    first_call: int
    end_call: int


class Collector:
    """Gathers the benchmarks of a bench job's test_performance cases and turns them into calls to time."""

    def __init__(self, recorder: CallRecorder, estimate: Callable[[Callable[[], Any]], float] | None = None):
        self.recorder = recorder
        self.estimate = estimate
        self.benchmarks: list[Benchmark] = []

    def run(self, fn: Callable[[], Any], op_name: str, params: dict[str, Any], flops: int | None) -> float:
        """Call the benchmarked callable once, recording its wrapper calls; the timer's estimate of its time (ms)."""
        first = len(self.recorder.calls)
        fn()
        self.benchmarks.append(Benchmark(op_name, dict(params), flops, first, len(self.recorder.calls)))
        return self.estimate(fn) if self.estimate is not None else math.nan

    def timed_calls(self) -> list[RecordedCall]:
        """The calls a timing may time: the wrapper calls the benchmarks made (with the file's FLOP count when a
        benchmark made exactly one); without benchmarks, every recorded call."""
        if not self.benchmarks:
            return list(self.recorder.calls)
        calls: list[RecordedCall] = []
        for b in self.benchmarks:
            made = self.recorder.calls[b.first_call : b.end_call]
            if len(made) == 1 and made[0].flops is None:
                made[0].flops = b.flops
            calls += made
        return calls

    def unwrapped(self) -> list[str]:
        """The benchmarks that called no wrapper function (nothing of theirs can be timed)."""
        return [_signature(b.op_name, b.params) for b in self.benchmarks if b.first_call == b.end_call]


_state: dict[str, Any] = {"collector": None, "scratch": None}


def install(scratch: Path, files: list[str]) -> None:
    """In a job process: confine the shim's files to `scratch`; where one of `files` (the job's) names the shim,
    write it into `scratch`, make it importable there and bind it to this module."""
    _state["scratch"] = Path(scratch).resolve()
    if not any(_SHIM_PACKAGE in Path(f).read_text(errors="replace") for f in files):
        return
    site = Path(scratch) / "site"
    for name, text in _SHIM_SOURCES.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    sys.path.insert(0, str(site))
    importlib.import_module(MODULE_NAME).BACKEND = sys.modules[__name__]


@contextlib.contextmanager
def collecting(collector: Collector):
    _state["collector"] = collector
    try:
        yield collector
    finally:
        _state["collector"] = None


def submit(
    op: Callable[[], Any],
    op_name: str,
    params: dict[str, Any],
    gbps_calculator: Calculator | None = None,
    tflops_calculator: Calculator | None = None,
) -> dict[str, Any]:
    """What `PytestBenchmarker.run_benchmark` does: run the op once (captured by the collector of a bench job),
    and return the suite harness's record of it. "ms" is the timer's estimate in a bench job (NaN elsewhere: timing
    is the bench stage's, with its own timer)."""
    nbytes = _work(gbps_calculator, params, 1e6)  # GB/s at 1 ms → bytes
    flops = _work(tflops_calculator, params, 1e9)  # TFLOP/s at 1 ms → FLOPs
    collector: Collector | None = _state["collector"]
    if collector is not None:
        ms = collector.run(op, op_name, params, flops)
    else:
        op()
        ms = math.nan
    return {
        "params": params,
        "ms": round(ms, 4) if math.isfinite(ms) else ms,
        "min_ms": ms,
        "max_ms": ms,
        "GB/s": round(nbytes / (ms * 1e6), 2) if nbytes and math.isfinite(ms) and ms > 0 else "N/A",
        "TFLOPS": round(flops / (ms * 1e9), 2) if flops and math.isfinite(ms) and ms > 0 else "N/A",
    }


def save_results(results: dict[str, list[dict[str, Any]]], output_dir: str | Path) -> list[Path]:
    """Write one JSON file per op, inside the job's scratch directory (a directory elsewhere is replaced by
    `<scratch>/perf`). Returns the files written."""
    scratch: Path | None = _state["scratch"]
    if scratch is None:
        raise RuntimeError(f"{MODULE_NAME} writes results only inside a job")
    target = Path(output_dir).resolve()
    if not target.is_relative_to(scratch):
        print(f"{MODULE_NAME}: {output_dir} is outside the job's directory; writing to {scratch / 'perf'}")
        target = scratch / "perf"
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for op_name, records in results.items():
        if records:
            path = target / f"{Path(op_name).name}.json"
            path.write_text(json.dumps(records, indent=2, default=str))
            written.append(path)
    return written


def _work(calculator: Calculator | None, params: dict[str, Any], scale: float) -> int | None:
    if calculator is None:
        return None
    try:
        value = float(calculator(params, 1.0)) * scale
    except Exception:
        return None
    return int(value) if math.isfinite(value) and value > 0 else None


def _signature(op_name: str, params: dict[str, Any]) -> str:
    return f"{op_name}({', '.join(f'{k}={v!r}' for k, v in params.items())})"
