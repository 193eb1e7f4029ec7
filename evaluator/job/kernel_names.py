"""Triton's kernel objects named: the `@triton.jit` function under an autotuner, and a kernel's name."""

from __future__ import annotations

from typing import Any


def kernel_function(tuner: Any) -> Any:
    """The `@triton.jit` function under an autotuner, through `@triton.heuristics`; under the interpreter, the
    Python function itself (which has no `src`)."""
    fn = tuner.fn
    while not hasattr(fn, "src") and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


def kernel_name(fn: Any) -> str:
    inner = getattr(fn, "fn", None)
    return getattr(inner, "__name__", None) or getattr(fn, "__name__", "?")
