"""GEAK's `geak_eval.perf.ROCm.performance_utils_pytest`: the API of GEAK-eval's module, backed by GEAK's timer.

On GEAK's path only inside job processes, where `rocm_bench.install` (``evaluator/job/rocm_bench.py``) binds it to
that module as `BACKEND`, so a job imports nothing of GEAK by name through it. `PytestBenchmarker.run_benchmark` runs
the benchmarked callable once and hands it to the perf stage, which times it with GEAK's interleaved timer;
`save_all_benchmark_results` writes only inside the job's scratch directory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BACKEND: Any = None  # the job process's `rocm_bench` module, bound by its `install`
PYTEST_BENCHMARK_RESULTS: dict[str, list[dict[str, Any]]] = {}


class do_bench_config:  # GEAK-eval's name
    """Timing settings as GEAK-eval spells them (GEAK's timer uses its own, the same for every variant)."""

    def __init__(
        self,
        warm_up: int = 25,
        repetition: int = 100,
        quantiles: list[float] | None = None,
        return_mode: str = "median",
    ):
        self.warm_up = warm_up
        self.repetition = repetition
        self.quantiles = quantiles if quantiles is not None else [0.5, 0.8, 0.2]
        self.return_mode = return_mode


def add_benchmark_result(op_name: str, result: dict[str, Any]) -> None:
    PYTEST_BENCHMARK_RESULTS.setdefault(op_name, []).append(result)


def save_all_benchmark_results(output_dir: str) -> None:
    for path in _backend().save_results(PYTEST_BENCHMARK_RESULTS, output_dir):
        print(f"Benchmark results saved to: {path}")
    PYTEST_BENCHMARK_RESULTS.clear()


class PytestBenchmarker:
    """Benchmarks a zero-argument callable (a lambda with its inputs bound)."""

    def __init__(self, op_callable: Callable[[], Any], op_name: str, config: do_bench_config | None = None):
        if not callable(op_callable):
            raise TypeError("op_callable must be callable")
        self.op_callable = op_callable
        self.op_name = op_name
        self.config = config if config is not None else do_bench_config()

    def run_benchmark(
        self,
        current_params_dict: dict[str, Any],
        gbps_calculator: Callable[[dict[str, Any], float], Any] | None = None,
        tflops_calculator: Callable[[dict[str, Any], float], Any] | None = None,
    ) -> dict[str, Any]:
        result = _backend().submit(
            self.op_callable, self.op_name, current_params_dict, gbps_calculator, tflops_calculator
        )
        add_benchmark_result(self.op_name, result)
        return result


def _backend() -> Any:
    # outside a job process: a native run with this folder on PYTHONPATH (benchmarks/suite_report.py)
    if BACKEND is None:
        from geak.evaluator.job import rocm_bench

        return rocm_bench
    return BACKEND
