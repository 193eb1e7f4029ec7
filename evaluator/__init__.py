"""Runs and measures Triton kernels against their embedded unit tests. Knows nothing of LLMs.

The modules here are the caller's side (the trusted process: ``api``, the pool, the verdicts); what runs in a job
process, beside the code under test, is in ``job/``; what both sides agree on is in ``shared/``.

The names below are the evaluator's public surface: what the agent and the server use. They load on first use
(PEP 562), so importing a module of the package, as every job process does for ``job/`` and ``shared/``, loads none of
the caller's side; type checkers read them from ``__init__.pyi``."""

from __future__ import annotations

from importlib import import_module

# public name -> (module, its name there)
_EXPORTS: dict[str, tuple[str, str]] = {
    # evaluating
    "Evaluator": ("api", "Evaluator"),
    "EvalOptions": ("options", "EvalOptions"),
    "BadInput": ("inputs", "BadInput"),
    "Progress": ("progress", "Progress"),
    "WorkerStartError": ("zygote", "WorkerStartError"),
    "WorkerPool": ("pool", "WorkerPool"),
    "device_masks": ("pool", "device_masks"),
    "pin_device": ("pool", "pin_device"),
    "usable_cores": ("pool", "usable_cores"),
    "default_root": ("compile_store", "default_root"),
    "job_environment": ("isolation", "job_environment"),
    "register_secret": ("redaction", "register_secret"),
    "parse_tolerance_overrides": ("compare", "parse_tolerance_overrides"),
    "DEFAULT_TOLERANCES": ("compare", "DEFAULT_TOLERANCES"),
    "Tolerance": ("compare", "Tolerance"),
    "tolerance_for": ("compare", "tolerance_for"),
    "longest_first": ("reference_costs", "longest_first"),
    # results
    "BenchResult": ("results", "BenchResult"),
    "CallCost": ("results", "CallCost"),
    "CallTiming": ("results", "CallTiming"),
    "CheckResult": ("results", "CheckResult"),
    "CompiledKernelFacts": ("results", "CompiledKernelFacts"),
    "KernelInfo": ("results", "KernelInfo"),
    "NOT_RUN_KINDS": ("results", "NOT_RUN_KINDS"),
    "ProfileResult": ("results", "ProfileResult"),
    "ScreenedVariant": ("results", "ScreenedVariant"),
    "ScreenResult": ("results", "ScreenResult"),
    "is_undecided": ("shared.sequential", "is_undecided"),
    # why a kernel is slow
    "kernel_line": ("slowness", "kernel_line"),
    "slowness_summary": ("slowness", "summary"),
    "timing_cost": ("slowness", "timing_cost"),
    "with_profile": ("slowness", "with_profile"),
    # Triton files and their source
    "TritonFile": ("triton_file", "TritonFile"),
    "TritonFileError": ("triton_file", "TritonFileError"),
    "parse_triton_file": ("triton_file", "parse_triton_file"),
    "read_triton_file": ("triton_file", "read_triton_file"),
    "looks_like_triton": ("triton_file", "looks_like_triton"),
    "SEPARATOR": ("triton_file", "SEPARATOR"),
    "AUTOTUNE_DECORATORS": ("triton_file", "AUTOTUNE_DECORATORS"),
    "JIT_DECORATORS": ("triton_file", "JIT_DECORATORS"),
    "TEST_PREFIXES": ("triton_file", "TEST_PREFIXES"),
    "constexpr_params": ("triton_file", "constexpr_params"),
    "decorator_name": ("triton_file", "decorator_name"),
    "defined_names": ("triton_file", "defined_names"),
    "is_config_call": ("triton_file", "is_config_call"),
    "is_kernel_def": ("triton_file", "is_kernel_def"),
    "is_test_code": ("triton_file", "is_test_code"),
    "is_benchmark_test": ("triton_file", "is_benchmark_test"),
    "separator_index": ("triton_file", "separator_index"),
    "statement_span": ("triton_file", "statement_span"),
    "parse_python": ("python_source", "parse"),
    "ModuleTests": ("repo_tests", "ModuleTests"),
    "RepositoryError": ("repo_tests", "RepositoryError"),
    "module_tests": ("repo_tests", "module_tests"),
    "node_definition": ("repo_tests", "node_definition"),
    "as_module": ("repo_tests", "as_module"),
    "cases_run": ("repo_tests", "cases_run"),
    "check_module_in_jobs": ("module_shards", "check_module_in_jobs"),
    "read_source": ("triton_file", "read_source"),
    "needs_repository_tests": ("repo_tests", "needs_repository_tests"),
    "tightened_contracts": ("input_contracts", "tightened_contracts"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(import_module(f".{module}", __name__), attribute)
    globals()[name] = value  # found at once from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
