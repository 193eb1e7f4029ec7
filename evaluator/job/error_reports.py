"""Errors of user code as plain data (its text, its frames in the user's file, a Triton compile error's kernel line),
and the GPU faults after which nothing more can run in the job."""

from __future__ import annotations

import inspect
import os
import traceback
from types import ModuleType
from typing import Any

from ..shared.protocol import COMPILE_ERRORS
from .kernel_names import kernel_name

# Triton's AMD backend: a RuntimeError of its passes or of the linker, an AssertionError of its options, raised in
# its compiler (its driver's errors are launches', not compiles')
AMD_BACKEND = os.path.join("triton", "backends", "amd", "")

FATAL_GPU_ERRORS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "illegal instruction",
    "misaligned address",
    "memory access fault",
    "hipErrorIllegal",
)


def context_lost(gpu: bool, message: str) -> bool:
    """A GPU fault after which the process's context is unusable: nothing more can run in this job."""
    return gpu and any(s in message for s in FATAL_GPU_ERRORS)


def describe_error(exc: BaseException, user_file: str, module: ModuleType | None) -> dict[str, Any]:
    """An error as plain data: its text, the user-file frames of its traceback, and the kernel line of a
    Triton compile error."""
    frames = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for fs in traceback.extract_tb(cur.__traceback__):
            if os.path.abspath(fs.filename) == os.path.abspath(user_file):
                frames.append({"line": fs.lineno, "func": fs.name, "code": fs.line or ""})
        cur = cur.__cause__ or cur.__context__
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    compile_error = compile_failure(exc)
    return {
        "type": type(exc).__name__,
        "message": text,
        "frames": frames,
        "compile_location": _compile_location(exc, module),
        # a test's own assertion (a wrong result), not one of the AMD compiler's (a kernel that does not compile)
        "is_assertion": isinstance(exc, AssertionError) and not compile_error,
        "compile_error": compile_error,
    }


def compile_failure(exc: BaseException) -> bool:
    """Whether `exc` (or an error it was raised from) says a kernel does not compile for the device: one of Triton's
    compile errors (``COMPILE_ERRORS``), or an error raised inside the AMD backend's compiler, which raises plain
    RuntimeErrors and AssertionErrors."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ in COMPILE_ERRORS:
            return True
        frames = traceback.extract_tb(cur.__traceback__)
        innermost = frames[-1].filename if frames else ""
        if AMD_BACKEND in innermost and os.path.basename(innermost) != "driver.py":
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _def_line(jit_fn: Any) -> int:
    """The file line of a kernel's `def` (Triton's error lines count from there; 3.6 does not record it)."""
    line = getattr(jit_fn, "def_file_line_number", None)
    if line is not None:
        return line
    lines, start = inspect.getsourcelines(jit_fn.fn)
    return start + next((i for i, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)


def _compile_location(exc: BaseException, module: ModuleType | None) -> dict[str, Any] | None:
    """Map a triton CompilationError (lines relative to the kernel's `def`) to a line of the user's file."""
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:
        return None
    cur: BaseException | None = exc
    while cur is not None and not isinstance(cur, CompilationError):
        cur = cur.__cause__ or cur.__context__
    if cur is None or module is None:
        return None
    node_line = getattr(cur.node, "lineno", None)
    if node_line is None:
        return None
    from triton.runtime.jit import JITFunction

    for value in vars(module).values():
        fn = value
        while fn is not None and not isinstance(fn, JITFunction):  # unwrap Autotuner / Heuristics
            fn = getattr(fn, "fn", None)
        if fn is not None and getattr(fn, "src", None) == cur.src:
            return {
                "line": _def_line(fn) + node_line - 1,
                "column": getattr(cur.node, "col_offset", 0) + 1,
                "kernel": kernel_name(fn),
                "message": (cur.error_message or "").strip() or str(cur).splitlines()[-1],
            }
    return None
