"""An autotuned kernel's configs compiled ahead of its tuning, in forked processes at once (within
``launch_modes.configs_compiled_ahead``), so that the tuning only times them and leaves out those that failed."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from ..kernel_names import kernel_function, kernel_name
from . import watch
from .forked import ForkedCompiles, compile_mode, idle_cores

COMPILE_AHEAD_WORKERS = 8  # forked processes compiling one autotuned kernel's configs at once, at most
COMPILE_AHEAD_S = 120.0  # what is not compiled by then compiles when tuned


def compile_configs_ahead(tuner: Any, configs: list[Any], args: tuple, kwargs: dict) -> list[Any]:
    """Compile every config of `tuner` for this call (``launch_modes.configs_compiled_ahead``), in forked processes,
    as many at once as the host's idle cores allow (2 to ``COMPILE_AHEAD_WORKERS``); returns the configs whose
    compile raised (their tuning need not compile them again); what else fails here is left to the tuning, which says
    why. Not on the interpreter, which compiles nothing."""
    try:
        from triton.runtime._async_compile import active_mode
    except ImportError:  # an older Triton: its configs compile when tuned
        return []
    if not hasattr(kernel_function(tuner), "src") or active_mode.get() is not None:  # interpreted, or gathered
        return []
    executor = ForkedCompiles(min(len(configs), max(2, min(COMPILE_AHEAD_WORKERS, idle_cores()))))
    submitted: list[Any] = []  # the config of each submitted compile, in order
    with compile_mode(executor):
        try:
            for config in configs:
                with contextlib.suppress(Exception):
                    tuner.fn.run(*args, **{**kwargs, "warmup": True}, **config.all_kwargs())
                submitted += [config] * (len(executor.queued) - len(submitted))
        finally:
            with watch.compiling(f"{len(configs)} configs of {kernel_name(kernel_function(tuner))} at once"):
                report = executor.run(time.monotonic() + COMPILE_AHEAD_S)
    return [submitted[i] for i in sorted(report.failed_at)]


def tuned_without(tuner: Any, original: Callable[..., Any], failed: list[Any], args: tuple, kwargs: dict) -> Any:
    """Tune `tuner` among its configs that did not fail to compile ahead (``compile_configs_ahead``), so that no
    failing config is compiled again one by one; where all did, run the first alone, which fails there as Triton
    would."""
    every = tuner.configs
    tuner.configs = [c for c in every if c not in failed] or every[:1]
    try:
        return original(tuner, *args, **kwargs)
    finally:
        tuner.configs = every
