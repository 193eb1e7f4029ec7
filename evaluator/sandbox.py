"""Worker-side runtime: imports torch and Triton, picks the backend, and instruments user code.

Imported only inside worker processes (see ``worker.py``): it patches torch and Triton globally.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import traceback
from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


@dataclass(frozen=True)
class RuntimeInfo:
    backend: str  # cuda | rocm | interpreter
    device: str
    arch: str | None
    torch_version: str
    triton_version: str


def start_runtime(requested: str = "auto") -> RuntimeInfo:
    """Choose the backend (a visible GPU unless `requested` is "interpreter"), then import and warm up Triton."""
    gpu = requested != "interpreter" and torch.cuda.is_available()
    if requested == "gpu" and not gpu:
        raise RuntimeError("a GPU backend was requested but torch sees no CUDA/ROCm device")
    if not gpu:
        os.environ["TRITON_INTERPRET"] = "1"
    import triton

    if gpu:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        hip = getattr(torch.version, "hip", None)
        arch = getattr(props, "gcnArchName", None) if hip else f"sm_{props.major}{props.minor}"
        info = RuntimeInfo("rocm" if hip else "cuda", props.name, arch, torch.__version__, triton.__version__)
        torch.empty(1, device="cuda")  # create the context now, not inside the user's first test
    else:
        _install_interpreter_shims()
        info = RuntimeInfo("interpreter", "cpu (Triton interpreter)", None, torch.__version__, triton.__version__)
    _install_launch_counter()
    _warm_up_triton(gpu)
    return info


# ----------------------------------------------------------------------------------------- interpreter (CPU)


def _is_gpu_device(device: Any) -> bool:
    try:
        return torch.device(device).type == "cuda"
    except (RuntimeError, TypeError, ValueError):
        return False


class CudaToCpu(TorchFunctionMode):
    """Runs GPU-written tests on the CPU: `device="cuda"`, `.cuda()` and `.to("cuda")` land on the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("device") is not None and _is_gpu_device(kwargs["device"]):
            kwargs["device"] = "cpu"
        name = getattr(func, "__name__", "")
        if name == "cuda" and args:
            return args[0]
        if name == "to" and len(args) > 1 and isinstance(args[1], (str, torch.device)) and _is_gpu_device(args[1]):
            args = (args[0], "cpu", *args[2:])
        return func(*args, **kwargs)


def _install_interpreter_shims() -> None:
    from triton.runtime.autotuner import Autotuner

    # No GPU to benchmark on: the autotuner keeps its first config (all configs "time" the same).
    Autotuner.do_bench = property(lambda self: lambda call, quantiles=None: [0.0, 0.0, 0.0])
    for name in ("synchronize", "empty_cache", "reset_peak_memory_stats"):
        setattr(torch.cuda, name, lambda *a, **k: None)
    CudaToCpu().__enter__()


# ----------------------------------------------------------------------------------------- launch counting

LAUNCHES: Counter[str] = Counter()


def _install_launch_counter() -> None:
    """Count kernel launches per kernel name (to tell a Triton kernel from a torch fallback)."""
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    for cls in classes:
        original = cls.run

        def run(self, *args, __original=original, **kwargs):
            if not kwargs.get("warmup", False):
                LAUNCHES[_kernel_name(self)] += 1
            return __original(self, *args, **kwargs)

        cls.run = run


def _kernel_name(fn: Any) -> str:
    inner = getattr(fn, "fn", None)
    return getattr(inner, "__name__", None) or getattr(fn, "__name__", "?")


def _warm_up_triton(gpu: bool) -> None:
    """Compile (GPU) or interpret (CPU) one tiny kernel so the first user check does not pay Triton's start-up."""
    import triton
    import triton.language as tl

    @triton.jit
    def _geak_warmup(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(16, device="cuda" if gpu else "cpu")
    _geak_warmup[(1,)](x, 16, BLOCK=16)
    if gpu:
        torch.cuda.synchronize()
    LAUNCHES.clear()


# ----------------------------------------------------------------------------------------- poisoning


def set_poisoning(enabled: bool) -> None:
    """Fill new allocations (torch.empty*) with NaN / the largest integer so an unwritten output cannot pass."""
    torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = enabled


# ----------------------------------------------------------------------------------------- user modules


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def synchronize(gpu: bool) -> None:
    if gpu:
        torch.cuda.synchronize()


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


# ----------------------------------------------------------------------------------------- errors


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
    return {
        "type": type(exc).__name__,
        "message": text,
        "frames": frames,
        "compile_location": _compile_location(exc, module),
        "is_assertion": isinstance(exc, AssertionError),
    }


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
    for value in vars(module).values():
        fn = value
        while fn is not None and not hasattr(fn, "def_file_line_number"):
            fn = getattr(fn, "fn", None)
        if fn is not None and getattr(fn, "src", None) == cur.src:
            return {
                "line": fn.def_file_line_number + node_line - 1,
                "column": getattr(cur.node, "col_offset", 0) + 1,
                "kernel": _kernel_name(fn),
                "message": (cur.error_message or "").strip() or str(cur).splitlines()[-1],
            }
    return None
