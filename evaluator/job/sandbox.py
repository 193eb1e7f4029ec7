"""Worker-side runtime: imports torch and Triton, picks the backend, and instruments Triton (``launch_counter``).

Imported only inside worker processes (see ``worker.py``): it patches torch and Triton globally. The work is split
in two: ``prepare_zygote`` runs once in the long-lived fork server and never touches a GPU driver (a process that
initialized CUDA or HIP cannot hand a usable GPU to its forked children); ``enter_child`` runs in each forked job
process and creates its GPU context there.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from . import launch_counter, process_ties
from .launch_modes import STATE

BACKEND_CHOICES = ("auto", "gpu", "interpreter")


@dataclass(frozen=True)
class RuntimeInfo:
    backend: str  # cuda | rocm | interpreter
    device: str
    arch: str | None
    torch_version: str
    triton_version: str
    units: int | None = None  # compute units (SMs, CUs) the device shows (``runtime_facts.RuntimeFacts``)
    memory_bytes: int | None = None


@dataclass(frozen=True)
class GpuDescription:
    """The visible GPU (``_describe_gpu``'s fields)."""

    backend: str  # cuda | rocm
    device: str
    arch: str | None
    units: int
    memory_bytes: int


def prepare_zygote(requested: str = "auto", preload: Iterable[str] = ()) -> RuntimeInfo:
    """Choose the backend (a visible GPU unless `requested` is "interpreter"), import Triton (and the `preload`
    modules) and do every warm-up that stays off the GPU. The GPU is looked at from a short-lived probe process, so
    this process stays fit to fork job processes that each open their own GPU context (``enter_child``): the
    sandbox probe, or ``check_forked_runtime``, checks that from a forked process."""
    if requested not in BACKEND_CHOICES:
        raise ValueError(f"backend must be one of {', '.join(BACKEND_CHOICES)}, not {requested!r}")
    mark = _phase_clock()
    gpu = None if requested == "interpreter" else probe_gpu()
    mark("gpu probe")
    if requested == "gpu" and gpu is None:
        raise RuntimeError("a GPU backend was requested but torch sees no CUDA/ROCm device")
    if gpu is None:
        os.environ["TRITON_INTERPRET"] = "1"  # read by triton at import and at @triton.jit time
    import triton

    mark("triton")
    if gpu is not None:
        info = RuntimeInfo(gpu.backend, gpu.device, gpu.arch, torch.__version__, triton.__version__, gpu.units,
                           gpu.memory_bytes)  # fmt: skip
    else:
        from . import interpreter_shims

        interpreter_shims.install()
        info = RuntimeInfo("interpreter", "cpu (Triton interpreter)", None, torch.__version__, triton.__version__)
    launch_counter.install()
    for name in preload:
        importlib.import_module(name, __package__)  # a relative name: a module of evaluator/job
    mark("preload")
    _warm_up_cpu_paths()
    if gpu is None:
        _warm_up_interpreter()
    else:
        _warm_up_triton_host_side()
    mark("warm-up")
    return info


STARTUP_S: dict[str, float] = {}  # seconds of each phase of `prepare_zygote`, for the pool's log


def _phase_clock() -> Callable[[str], None]:
    import time

    last = [time.perf_counter()]

    def mark(phase: str) -> None:
        now = time.perf_counter()
        STARTUP_S[phase] = round(now - last[0], 3)
        last[0] = now

    return mark


def check_forked_runtime(info: RuntimeInfo) -> None:
    """That a process forked from the warmed-up zygote can open the GPU (the sandbox probe checks it where jobs are
    isolated, from inside their namespaces)."""
    if info.backend == "interpreter":
        return
    import triton

    _in_forked_process(
        "a process forked from the warmed-up worker cannot use the GPU (was the GPU driver initialized during "
        f"the warm-up? torch {torch.__version__}, triton {triton.__version__})",
        lambda: enter_child(info),
    )


def load_driver() -> None:
    """Create Triton's GPU driver, as a job's first launch does: its helper module (`cuda_utils`, `hip_utils`) is
    compiled into the Triton cache, or loaded from it."""
    import triton

    getattr(triton.runtime.driver.active, "utils")  # noqa: B009 (the driver is made on first access)


def prepare_profiled_process() -> None:
    """In the process a profiler starts for a profile job (``profile_target``): the launch counting a capture needs,
    and the GPU context open."""
    import triton  # noqa: F401 (its JIT is what the launch counting wraps)

    launch_counter.install()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()


def enter_child(info: RuntimeInfo) -> None:
    """In a job process forked from the zygote: create the GPU context now, not inside the user's first test."""
    if info.backend != "interpreter":
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------------- forked checks


def probe_gpu() -> GpuDescription | None:
    """The visible GPU, as seen from a forked probe process (which may initialize the driver, then exits)."""
    found = _in_forked_process("looking for a GPU failed", _describe_gpu)
    return GpuDescription(**found) if found else None


def _in_forked_process(failure: str, fn: Callable[[], Any]) -> Any:
    """Run `fn` in a forked process that exits right after, and return its (JSON) result; RuntimeError starting
    with `failure` if it raises or the process dies."""
    read_fd, write_fd = os.pipe()
    pid = process_ties.fork_process()
    if pid == 0:  # never returns
        code = 1
        try:
            os.close(read_fd)
            try:
                report = {"value": fn()}
            except Exception as e:
                report = {"error": "".join(traceback.format_exception_only(type(e), e)).strip()}
            with os.fdopen(write_fd, "w") as pipe:
                pipe.write(json.dumps(report))
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0 or not data:
        raise RuntimeError(f"{failure}: its process ended without an answer ({_exit_words(code)})")
    report = json.loads(data)
    if "error" in report:
        raise RuntimeError(f"{failure}: {report['error']}")
    return report["value"]


def _describe_gpu() -> dict[str, Any] | None:
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    hip = getattr(torch.version, "hip", None)
    arch = getattr(props, "gcnArchName", None) if hip else f"sm_{props.major}{props.minor}"
    return {
        "backend": "rocm" if hip else "cuda",
        "device": props.name,
        "arch": arch,
        "units": int(props.multi_processor_count),
        "memory_bytes": int(props.total_memory),
    }


def _exit_words(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit status {code}"


def _warm_up_cpu_paths() -> None:
    """Run, on tiny CPU tensors, what checks call, so that its lazy imports happen once here, not in every job
    (`assert_close` imports torch.distributed.tensor and sympy on first use)."""
    x = torch.zeros(4)
    torch.testing.assert_close(x, x.clone())


def _warm_up_triton_host_side() -> None:
    """Work a first GPU launch repeats in every process that needs no GPU: hashing Triton's own files into its
    compile-cache key (a third of a second; `triton_key` is in runtime.cache in recent Triton, compiler.compiler
    before) and importing the Gluon front end (recent Triton only)."""
    import triton.compiler.compiler as compiler
    import triton.runtime.cache as cache

    triton_key = getattr(cache, "triton_key", None) or getattr(compiler, "triton_key", None)
    if triton_key is not None:
        triton_key()
    with contextlib.suppress(ImportError):
        importlib.import_module("triton.experimental.gluon")


def _warm_up_interpreter() -> None:
    """Interpret one tiny kernel in the zygote so no job pays the interpreter's first-launch cost. (On a GPU the
    zygote must not compile: that would initialize the driver; `_warm_up_triton_host_side` does what it can.)"""
    import triton
    import triton.language as tl

    @triton.jit
    def _warmup(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(16)
    _warmup[(1,)](x, 16, BLOCK=16)
    STATE.launches.clear()
