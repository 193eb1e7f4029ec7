"""Worker-side runtime: imports torch and Triton, picks the backend, and instruments user code.

Imported only inside worker processes (see ``worker.py``): it patches torch and Triton globally. The work is split
in two: ``prepare_zygote`` runs once in the long-lived fork server and never touches a GPU driver (a process that
initialized CUDA or HIP cannot hand a usable GPU to its forked children); ``enter_child`` runs in each forked job
process and creates its GPU context there.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from ..shared.poison import second_poison
from . import process_ties
from .kernel_watch import KernelWatch

BACKEND_CHOICES = ("auto", "gpu", "interpreter")


@dataclass(frozen=True)
class RuntimeInfo:
    backend: str  # cuda | rocm | interpreter
    device: str
    arch: str | None
    torch_version: str
    triton_version: str


@dataclass(frozen=True)
class GpuDescription:
    backend: str  # cuda | rocm
    device: str
    arch: str | None


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
        info = RuntimeInfo(gpu.backend, gpu.device, gpu.arch, torch.__version__, triton.__version__)
    else:
        from . import interpreter_shims

        interpreter_shims.install()
        info = RuntimeInfo("interpreter", "cpu (Triton interpreter)", None, torch.__version__, triton.__version__)
    _install_launch_counter()
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

    _install_launch_counter()
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
    return {"backend": "rocm" if hip else "cuda", "device": props.name, "arch": arch}


def _exit_words(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit status {code}"


# ----------------------------------------------------------------------------------------- the device alone


class DeviceStillBusy(RuntimeError):
    """Granted the device alone, the job found it still busy: what the jobs paused for it had queued did not drain
    (the pool then runs the timing once more, once they have ended)."""


class DeviceGrant:
    """A timing job's way to have the device alone for what it measures (``worker``'s protocol): `wait_alone()` asks
    the pool for it, blocks until granted, then waits until the device is quiet (`quiet`: what the jobs paused for
    it had queued has drained; it raises DeviceStillBusy where that does not happen); `release()` gives it back once
    measured. Without a grant channel (the pool then gave the job the device from its start), `wait_alone()` only
    waits for the device to be quiet."""

    def __init__(self) -> None:
        self._send: Callable[[dict[str, Any]], None] | None = None
        self._fd: int | None = None
        self._quiet: Callable[[], None] | None = None
        self._held = False

    def open(
        self, send: Callable[[dict[str, Any]], None], fd: int | None, quiet: Callable[[], None] | None = None
    ) -> None:
        self._send, self._fd, self._quiet, self._held = send, fd, quiet, False

    def wait_alone(self) -> None:
        if self._held:
            return
        if self._fd is not None and self._send is not None:
            self._send({"event": "device_wanted"})
            if os.read(self._fd, 1) != b"g":
                raise RuntimeError("the evaluator closed the job's device grant without granting the device")
        self._held = True
        if self._quiet is not None:
            self._quiet()

    def release(self) -> None:
        """What needs the device alone is done (the rounds): the pool lets the paused jobs go on while this one checks
        its timed calls' outputs and exits."""
        if self._held and self._send is not None:
            self._send({"event": "device_released"})
        self._held = False


DEVICE_GRANTS = DeviceGrant()


# ----------------------------------------------------------------------------------------- launch counting

LAUNCHES: Counter[str] = Counter()
LAUNCH_STREAMS: Counter[int] = Counter()  # launches per GPU stream handle, within `streams_tracked`
KERNEL_EVENTS: list[tuple[str, Any, Any]] = []  # (kernel, start event, end event) per launch, within `kernels_timed`
COMPILED: list[tuple[str, Any]] = []  # (kernel, its launch's CompiledKernel) per launch, within `compiled_kept`
DEFERRED_TUNINGS: Counter[str] = Counter()  # autotuned launches that ran untuned, within `tuning_deferred`, by kernel
_GHOST = threading.Event()  # set: kernel launches are counted but do nothing (see `ghost_kernels`)
_TRACK_STREAMS = threading.Event()
_TIME_KERNELS = threading.Event()
_DEFER_TUNING = threading.Event()
_SHARE_TWINS = threading.Event()
_KEEP_TUNING = threading.Event()
_COMPILE_AHEAD = threading.Event()
_TWIN_CHOICES: dict[tuple[Any, ...], dict[Any, int]] = {}  # a kernel's fingerprint -> tuning key -> config index
# what autotuners time their configs with, and whether over Triton's own benchmarks too, within `tuned_with`
_TUNING_BENCH: list[tuple[Callable[..., Any], bool]] = []
_COMPILE_ONLY = threading.Event()
_EVERY_CONFIG = threading.Event()
_KEEP_COMPILED = threading.Event()
_WATCHES: list[KernelWatch] = []  # the watch of the tests or probes now running, within `kernels_watched`

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


@contextlib.contextmanager
def streams_tracked():
    """Within it, each Triton launch also counts the GPU stream it went to (timing: work escaping to a side
    stream)."""
    _TRACK_STREAMS.set()
    try:
        yield
    finally:
        _TRACK_STREAMS.clear()


@contextlib.contextmanager
def kernels_timed():
    """Within it, each Triton launch is bracketed by device events on its stream (``KERNEL_EVENTS``): the device
    time of each kernel, without a profiler."""
    KERNEL_EVENTS.clear()
    _TIME_KERNELS.set()
    try:
        yield
    finally:
        _TIME_KERNELS.clear()


@contextlib.contextmanager
def tuning_deferred():
    """Within it, a `@triton.autotune` kernel runs its first config without timing the others or keeping a choice:
    a timing job captures its calls while other jobs share the device, and tunes later, with the device alone. Where
    the first config cannot run (too much shared memory for the device, say: TritonBench-revised `matmul_triton2.py`'s
    on an H200), the next that runs does. Tuning there instead chose by a shared device's noise with Triton's own
    benchmark, and each variant of an A/A kept its own choice (1.06x "faster" against itself)."""
    _DEFER_TUNING.set()
    try:
        yield
    finally:
        _DEFER_TUNING.clear()


@contextlib.contextmanager
def configs_compiled_ahead():
    """Within it, an autotuned kernel's launch that would tune (or, within ``tuning_deferred``, defer its tuning)
    first compiles every one of its configs for the call, in forked processes at once (``compile.forked``), and its
    tuning leaves out those that failed to compile there. A timing job's capture, while the device is shared, so that
    its tuning, with the device alone, only times them: on an H200, compiling the configs one by one while tuning held
    the device alone for 3 s (TritonBench-revised `matmul_triton2.py`, 8 configs) to 20 s (`int4_matmul.py`, 36),
    every other job of its GPU paused meanwhile. A check on a GPU, whose first run of an autotuned file compiles every
    config."""
    _COMPILE_AHEAD.set()
    try:
        yield
    finally:
        _COMPILE_AHEAD.clear()


@contextlib.contextmanager
def tuning_kept():
    """Within it, a `@triton.autotune` kernel that meets a tuning key it has not tuned (a probe's other sizes) runs the
    config it chose for a key it tuned, instead of compiling and timing every config again: on an H200 a
    TritonBench-revised file's one probe at other sizes spent 10 s re-tuning. The choice is not kept. A kernel that
    has tuned nothing yet, or whose choice cannot run there, tunes as it would."""
    _KEEP_TUNING.set()
    try:
        yield
    finally:
        _KEEP_TUNING.clear()


@contextlib.contextmanager
def twins_tuned_alike():
    """Within it, a `@triton.autotune` kernel of the same source, configs and tuning keys as one tuned before in this
    job takes that kernel's choice for a key instead of tuning again: identical kernels of two variants run the same
    config (an A/A's two tunings otherwise pick among near-equal configs by noise), and the second costs nothing."""
    _TWIN_CHOICES.clear()
    _SHARE_TWINS.set()
    try:
        yield
    finally:
        _SHARE_TWINS.clear()


@contextlib.contextmanager
def tuned_with(bench: Callable[..., Any], over_tritons: bool = False):
    """Within it, a `@triton.autotune` kernel whose file gave it no benchmark of its own times its configs with
    `bench` (Triton's ``do_bench`` signature) instead of Triton's default. `over_tritons`: also one whose file asked
    for one of Triton's own benchmarks (`use_cuda_graph`, `warmup`, `rep`), where no choice is by speed (a check); a
    benchmark the file wrote itself (`do_bench=`) is its own everywhere."""
    entry = (bench, over_tritons)
    _TUNING_BENCH.append(entry)
    try:
        yield
    finally:
        _TUNING_BENCH.remove(entry)


@contextlib.contextmanager
def compile_only():
    """Within it, every Triton launch compiles its kernel (``warmup``) and launches nothing: under Triton's
    ``AsyncCompileMode`` the compiles of many variants then run in parallel. Launches are not counted."""
    _COMPILE_ONLY.set()
    try:
        yield
    finally:
        _COMPILE_ONLY.clear()


@contextlib.contextmanager
def every_config_compiled():
    """Within ``compile_only``, an autotuned kernel's launch compiles each of its configs (a check's kernels compiled
    ahead: ``compile.dry_pass``), not only the one it would run."""
    _EVERY_CONFIG.set()
    try:
        yield
    finally:
        _EVERY_CONFIG.clear()


@contextlib.contextmanager
def compiled_kept():
    """Within it, each Triton launch keeps what it returned (``COMPILED``: the compiled kernel with its registers,
    spills, shared memory, warps and stages)."""
    COMPILED.clear()
    _KEEP_COMPILED.set()
    try:
        yield
    finally:
        _KEEP_COMPILED.clear()


@contextlib.contextmanager
def kernels_watched(watch: KernelWatch, gpu: bool):
    """Within it, `watch` is told of an event recorded after each Triton launch, and its thread watches them
    (``kernel_watch``; on a GPU only, where the thread can query in relaxed capture mode)."""
    if not gpu or not watch.start(hip=bool(torch.version.hip)):
        yield
        return
    _WATCHES.append(watch)
    try:
        yield
    finally:
        _WATCHES.remove(watch)
        watch.stop()


@contextlib.contextmanager
def ghost_kernels():
    """Within it, every Triton launch is a no-op: outputs that come out right anyway were not computed by the
    kernels."""
    _GHOST.set()
    try:
        yield
    finally:
        _GHOST.clear()


def _install_launch_counter() -> None:
    """Count kernel launches per kernel name (to tell a Triton kernel from a torch fallback)."""
    from triton.runtime.jit import JITFunction

    classes: list[type] = [JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    event, current_stream = torch.cuda.Event, torch.cuda.current_stream  # bound before any user code
    capturing = torch.cuda.is_current_stream_capturing
    for cls in classes:
        original = cls.run

        def counted(self, *args, __original=original, **kwargs):
            if not kwargs.get("warmup", False):
                name = _kernel_name(self)
                LAUNCHES[name] += 1
                if _TRACK_STREAMS.is_set():
                    LAUNCH_STREAMS[current_stream().cuda_stream] += 1
                if _GHOST.is_set():
                    return None
                if _TIME_KERNELS.is_set():
                    start, end = event(enable_timing=True), event(enable_timing=True)
                    start.record(current_stream())
                    ret = __original(self, *args, **kwargs)
                    end.record(current_stream())
                    KERNEL_EVENTS.append((name, start, end))
                    return ret
                if _WATCHES:
                    ret = __original(self, *args, **kwargs)
                    if not capturing():  # an event recorded in a capture would be the graph's, not a launch's
                        done = event()
                        done.record(current_stream())
                        _WATCHES[-1].launched(done)
                    return ret
            return __original(self, *args, **kwargs)

        def run(self, *args, __original=original, __counted=counted, **kwargs):
            if _COMPILE_ONLY.is_set():
                kwargs["warmup"] = True
                return __original(self, *args, **kwargs)
            ret = __counted(self, *args, **kwargs)
            if _KEEP_COMPILED.is_set() and ret is not None and not kwargs.get("warmup", False):
                COMPILED.append((_kernel_name(self), ret))
            return ret

        cls.run = run
    _install_tuning_deferral()


def _install_tuning_deferral() -> None:
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.run

    def tuned(self, *args, **kwargs):
        every = self.configs
        if len(every) <= 1:
            return original(self, *args, **kwargs)
        if _SHARE_TWINS.is_set():
            return _tuned_like_twins(self, original, args, kwargs)
        if _EVERY_CONFIG.is_set() and _COMPILE_ONLY.is_set():
            return _every_config_run(self, original, args, kwargs)
        only = _untuned_config(self, args, kwargs)
        if only is None:
            key = _tuning_key(self, args, kwargs) if _COMPILE_AHEAD.is_set() else None
            if key is None or key in self.cache:  # not compiling ahead, or tuned for this key already
                return original(self, *args, **kwargs)
            return _tuned_without(self, original, _compile_ahead(self, every, args, kwargs), args, kwargs)
        if _COMPILE_AHEAD.is_set() and _DEFER_TUNING.is_set():
            _compile_ahead(self, every, args, kwargs)
        # deferred: the first config that runs (none chosen, none kept), as a shared device would choose by noise
        others = [c for c in every if c is not only] if _DEFER_TUNING.is_set() else []
        if _DEFER_TUNING.is_set():
            DEFERRED_TUNINGS[_kernel_name(_kernel_function(self))] += 1
        for config in (only, *others):
            self.configs = [config]
            try:
                return original(self, *args, **kwargs)
            except Exception:
                continue
            finally:
                self.configs = every
        return original(self, *args, **kwargs)  # none runs alone: tuned at once (and raising as Triton would)

    def run(self, *args, **kwargs):
        if not _TUNING_BENCH or len(self.configs) <= 1:  # every timed launch comes here: nothing added to it
            return tuned(self, *args, **kwargs)
        with _benchmarked_by(self, *_TUNING_BENCH[-1]):
            return tuned(self, *args, **kwargs)

    Autotuner.run = run


@contextlib.contextmanager
def _benchmarked_by(tuner: Any, bench: Callable[..., Any] | None, over_tritons: bool = False):
    """`tuner` times its configs with `bench` within, where it was given no benchmark of its own (``_do_bench``
    None: no `do_bench`, `warmup`, `rep` or `use_cuda_graph` argument), or, `over_tritons`, only one Triton made for
    it from those arguments. Triton reads the benchmark through a cached property, so the tuner's own attribute
    takes its place and is taken away after."""
    own = getattr(tuner, "_do_bench", None)
    if bench is None or (own is not None and not (over_tritons and tritons_own_benchmark(own))):
        yield
        return
    saved = tuner.__dict__.pop("do_bench", None)
    tuner.__dict__["do_bench"] = bench
    try:
        yield
    finally:
        del tuner.__dict__["do_bench"]
        if saved is not None:
            tuner.__dict__["do_bench"] = saved


def tritons_own_benchmark(do_bench: Any) -> bool:
    """Is `do_bench` one of the benchmarks `@triton.autotune` builds from its `use_cuda_graph`, `warmup` and `rep`
    arguments (made in Triton's autotuner module), not one the file wrote?"""
    return getattr(do_bench, "__module__", None) == "triton.runtime.autotuner"


def _every_config_run(tuner: Any, original: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Run `tuner` once with each of its configs alone (within ``compile_only``: each compiles, nothing launches)."""
    every = tuner.configs
    for config in every:
        tuner.configs = [config]
        try:
            original(tuner, *args, **kwargs)
        except Exception:  # a config that fails here fails at its tuning in the job, which says why
            continue
        finally:
            tuner.configs = every


def _tuned_like_twins(tuner: Any, original: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run `tuner` with the choices its twins made (over any it made before, untwinned), and record those it makes."""
    fingerprint = _fingerprint(tuner)
    known = _TWIN_CHOICES.setdefault(fingerprint, {})
    for key, index in known.items():
        tuner.cache[key] = tuner.configs[index]
    try:
        return original(tuner, *args, **kwargs)
    finally:
        for key, config in tuner.cache.items():
            if key not in known and config in tuner.configs:
                known[key] = tuner.configs.index(config)


COMPILE_AHEAD_WORKERS = 8  # forked processes compiling one autotuned kernel's configs at once, at most
COMPILE_AHEAD_S = 120.0  # what is not compiled by then compiles when tuned


def _compile_ahead(tuner: Any, configs: list[Any], args: tuple, kwargs: dict) -> list[Any]:
    """Compile every config of `tuner` for this call (``configs_compiled_ahead``), in forked processes, as many at
    once as the host's idle cores allow (2 to ``COMPILE_AHEAD_WORKERS``); returns the configs whose compile raised
    (their tuning need not compile them again); what else fails here is left to the tuning, which says why. Not on
    the interpreter, which compiles nothing."""
    try:
        from triton.runtime._async_compile import active_mode
    except ImportError:  # an older Triton: its configs compile when tuned
        return []
    if not hasattr(_kernel_function(tuner), "src") or active_mode.get() is not None:  # interpreted, or gathered
        return []
    from .compile import watch
    from .compile.forked import ForkedCompiles, compile_mode, idle_cores

    executor = ForkedCompiles(min(len(configs), max(2, min(COMPILE_AHEAD_WORKERS, idle_cores()))))
    submitted: list[Any] = []  # the config of each submitted compile, in order
    with compile_mode(executor):
        try:
            for config in configs:
                with contextlib.suppress(Exception):
                    tuner.fn.run(*args, **{**kwargs, "warmup": True}, **config.all_kwargs())
                submitted += [config] * (len(executor.queued) - len(submitted))
        finally:
            with watch.compiling(f"{len(configs)} configs of {_kernel_name(_kernel_function(tuner))} at once"):
                report = executor.run(time.monotonic() + COMPILE_AHEAD_S)
    return [submitted[i] for i in sorted(report.failed_at)]


def _tuned_without(tuner: Any, original: Callable[..., Any], failed: list[Any], args: tuple, kwargs: dict) -> Any:
    """Tune `tuner` among its configs that did not fail to compile ahead (``_compile_ahead``); where all did, run the
    first alone, which fails there as Triton would (TritonBench-revised `triton_linear_activation.py` on an H200: 88
    configs failing in ptxas, compiled one by one in its check, took a minute)."""
    every = tuner.configs
    tuner.configs = [c for c in every if c not in failed] or every[:1]
    try:
        return original(tuner, *args, **kwargs)
    finally:
        tuner.configs = every


def _untuned_config(tuner: Any, args: tuple, kwargs: dict) -> Any:
    """The one config an autotuned kernel runs without tuning for this call (``tuning_kept``, ``tuning_deferred``);
    None: it runs as Triton runs it."""
    if _KEEP_TUNING.is_set() and tuner.cache and _tuning_key(tuner, args, kwargs) not in tuner.cache:
        return next(iter(tuner.cache.values()))  # what it chose for a key it tuned
    return tuner.configs[0] if _DEFER_TUNING.is_set() else None


def _tuning_key(tuner: Any, args: tuple, kwargs: dict) -> tuple[Any, ...] | None:
    """The key under which `tuner` keeps its choice for this call (as ``Autotuner.run`` makes it: the values of its
    `key` arguments, then every tensor argument's dtype); None if it cannot be made."""
    try:
        named = {**dict(zip(tuner.arg_names, args, strict=False)), **kwargs}
        named = {k: v for k, v in named.items() if k in tuner.arg_names}
        key = [named[k] for k in tuner.keys if k in named]
        return tuple(key + [str(v.dtype) for v in named.values() if hasattr(v, "dtype")])
    except Exception:
        return None


def _kernel_function(tuner: Any) -> Any:
    """The `@triton.jit` function under an autotuner, through `@triton.heuristics`; under the interpreter, the
    Python function itself (which has no `src`)."""
    fn = tuner.fn
    while not hasattr(fn, "src") and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


def _fingerprint(tuner: Any) -> tuple[Any, ...]:
    """What makes two autotuned kernels twins: the kernel's source, the configs in order, the tuning keys."""
    fn = _kernel_function(tuner)
    source = getattr(fn, "src", None)
    if source is None:  # the interpreter's: the Python function itself
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = id(fn)
    return (source, tuple(str(c) for c in tuner.configs), tuple(getattr(tuner, "keys", ())))


def _kernel_name(fn: Any) -> str:
    inner = getattr(fn, "fn", None)
    return getattr(inner, "__name__", None) or getattr(fn, "__name__", "?")


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
    LAUNCHES.clear()


# ----------------------------------------------------------------------------------------- seeding


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy, torch (CPU and every GPU) as the suites' own harness does before it imports a file, so
    the reference and a candidate draw the same test inputs. Called before the import, before each test and each
    replay."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA/HIP device (lazily, if not initialized yet)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


# ----------------------------------------------------------------------------------------- poisoning


def set_poisoning(enabled: bool) -> None:
    """Fill new allocations (torch.empty*) with NaN / the largest integer so an unwritten output cannot pass.

    Deterministic mode is set through the call `torch.use_deterministic_algorithms` makes: recent versions of that
    function also import torch._inductor (over a second, in every job process) only to flag torch.compile."""
    fast = getattr(torch._C, "_set_deterministic_algorithms", None)
    if fast is not None:
        fast(enabled, warn_only=True)
    else:  # older or newer torch without the private entry point: the public call (slower first time)
        torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = enabled


_ALLOCATORS = (
    (torch, "empty"),
    (torch, "empty_like"),
    (torch, "empty_strided"),
    (torch.Tensor, "new_empty"),
    (torch.Tensor, "new_empty_strided"),
)


@contextlib.contextmanager
def second_poison_filled():
    """Within it, what `torch.empty*` returns holds the second poison (``shared/poison.py``): a reference's second
    run on the same inputs, so that what its kernels never write differs between its two runs and is known
    undefined. The allocators are replaced where code looks them up (`torch.empty(...)`), not in a torch function
    mode: a mode would sit between user code and the CPU interpreter's device shims, and slow every torch call."""
    originals = [(owner, name, getattr(owner, name), name in vars(owner)) for owner, name in _ALLOCATORS]

    def filled(allocate: Callable[..., Any]) -> Callable[..., Any]:
        def allocate_filled(*args: Any, **kwargs: Any) -> Any:
            tensor = allocate(*args, **kwargs)
            if isinstance(tensor, torch.Tensor) and tensor.numel():
                tensor.fill_(second_poison(tensor.dtype))
            return tensor

        return functools.wraps(allocate)(allocate_filled)

    for owner, name, allocate, _ in originals:
        setattr(owner, name, filled(allocate))
    try:
        yield
    finally:
        for owner, name, allocate, own in originals:
            if own:
                setattr(owner, name, allocate)
            else:  # inherited (`Tensor.new_empty` is `TensorBase`'s)
                delattr(owner, name)


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
                "kernel": _kernel_name(fn),
                "message": (cur.error_message or "").strip() or str(cur).splitlines()[-1],
            }
    return None
