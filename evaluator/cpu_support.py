"""What Triton's CPU interpreter cannot check, and how to tell: the one authority for the verdict "not checkable on
CPU: <reason>".

Such a file is neither passed nor failed: ``CheckResult.not_checkable`` holds the reason (``ok`` is False, so
nothing unverified is ever accepted), editors show it as information, and ``geak check`` exits with
``EXIT_NOT_CHECKABLE``. It is decided from the interpreter's own errors (``limit_in_error``), from a static look at
the kernels where that is sure (``spin_wait``), and from how a run that hit the time limit ended (``slow_or_hung``).
What the interpreter runs but does not model (bf16 rounding, TF32 dots, races, out-of-bounds reads) is a caveat of
a passing verdict instead (``verdict.INTERPRETER_CAVEAT``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .python_source import parse

NOT_CHECKABLE = "not checkable on CPU"
STALLED_AFTER_S = 5.0  # a timed-out run with no new program for this long was hung, not slow (``HEARTBEAT_S``: 1 s)


@dataclass(frozen=True)
class CpuLimit:
    """A feature the interpreter cannot run, known by a fragment of the error it raises."""

    marks: tuple[str, ...]
    reason: str  # may name {triton}, the interpreter's Triton version


ERROR_LIMITS = (
    CpuLimit(
        ("Block pointers have been removed",),
        "block pointers (tl.make_block_ptr / tl.advance) are gone from Triton {triton}, the interpreter's version, "
        "and this use escapes GEAK's emulation of them (check on a GPU whose Triton has them, or port the kernel to "
        "tensor descriptors)",
    ),
    CpuLimit(
        ("inline_asm not supported in interpreter mode",),
        "inline assembly (tl.inline_asm_elementwise) cannot be interpreted",
    ),
    CpuLimit(
        ("extern_elementwise not supported in interpreter mode",),
        "a vendor libdevice function the interpreter cannot compute (not in GEAK's NumPy map)",
    ),
    CpuLimit(
        ("ValueError('Unsupported data type')",),  # the interpreter's atomics: 16-bit floats other than fp16
        "an atomic operation on bf16 values (tl.atomic_add, tl.atomic_max...), which the interpreter's atomics lack",
    ),
    CpuLimit(
        ("Torch not compiled with CUDA enabled", "Cannot access accelerator device when none is available"),
        "the code needs torch's CUDA runtime, which a CPU-only torch lacks",
    ),
)


def limit_in_error(message: str, triton_version: str | None = None) -> str | None:
    """The reason an error is the interpreter's limit rather than the kernel's fault, or None."""
    for limit in ERROR_LIMITS:
        if any(mark in message for mark in limit.marks):
            return limit.reason.format(triton=triton_version or "installed here")
    return None


def crash_hint(message: str) -> str:
    """What a crash of an interpreted run means: the interpreter reads and writes real host memory, so a kernel's
    out-of-bounds access faults (or corrupts the heap) where a GPU may silently read or write past the end. It is the
    kernel's bug, so it stays a failure, with this explanation."""
    if any(s in message for s in ("SIGSEGV", "SIGABRT", "SIGBUS")):
        return (
            f"{message} (under the interpreter this is usually a kernel's out-of-bounds memory access, which a GPU "
            "may silently tolerate)"
        )
    return message


def slow_or_hung(last_progress: dict | None, killed_at: float, timeout_s: float) -> str | None:
    """For a run killed at the time limit: the reason "too slow" when the interpreter was still running new
    programs up to the end (from the job's heartbeat events), or None when it had stalled (a hang: a failure)."""
    if not last_progress or "programs" not in last_progress:
        return None
    if killed_at - float(last_progress.get("at", 0.0)) > STALLED_AFTER_S:
        return None
    return (
        f"too slow under the interpreter: still running after {timeout_s:g} s "
        f"({last_progress['programs']:,} kernel programs interpreted); raise --timeout or check on a GPU"
    )


def spin_wait(source: str) -> str | None:
    """A kernel whose programs wait for each other (a `while` loop on an atomic or a volatile load): the
    interpreter runs programs one after another, so the first waiter never sees the others. Returns the reason."""
    try:
        tree = parse(source)
    except SyntaxError:
        return None
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef) or not any("jit" in ast.unparse(d) for d in func.decorator_list):
            continue
        for loop in ast.walk(func):
            if isinstance(loop, ast.While) and _waits_on_memory(loop):
                return (
                    f"the programs of {func.name} wait for each other (spin-wait at line {loop.lineno}); the "
                    "interpreter runs programs one after another, so the wait never ends"
                )
    return None


def _waits_on_memory(loop: ast.While) -> bool:
    for node in ast.walk(loop.test) if not _is_true(loop.test) else ast.walk(loop):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("atomic_cas", "atomic_xchg", "atomic_add", "atomic_or", "atomic_max", "atomic_min"):
                return True
            if name == "load" and any(k.arg == "volatile" and ast.unparse(k.value) == "True" for k in node.keywords):
                return True
    return False


def _is_true(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value)
