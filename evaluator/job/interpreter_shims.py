"""Run GPU-written Triton files on Triton's CPU interpreter (``TRITON_INTERPRET=1``), unchanged.

Imported only inside worker processes, and only when no GPU is used: ``install()`` patches torch and Triton for
the whole process. The interpreter presents itself as one CUDA device of compute capability 9.0 (H100-like limits,
but 8 SMs so persistent kernels stay quick; an MI300 also reports 9.x to torch), so code that asks which GPU it runs
on takes the path it takes on the GPUs it is written for, and tests that need "arch 9+" run:

* tensors: ``device="cuda"``, ``.cuda()``, ``.to("cuda")`` land on the CPU (``CudaToCpu``); asked from the user's
  code, a CPU tensor says it lives on ``cuda:0`` (``.device``, ``.is_cuda``, ``.get_device()``), while torch's,
  Triton's and other installed packages' code still see the truth;
* ``torch.cuda``: ``device(...)`` / ``_DeviceGuard`` / ``device_of`` (any index, also ``None``), ``set_device``,
  ``current_device``, ``device_count``, ``is_available``, ``get_device_properties`` / ``_capability`` / ``_name``,
  streams and events (the host clock), Philox generator states, ``synchronize`` and the memory statistics;
* Triton: ``triton.runtime.driver.active`` (target, device properties, current device and stream, a benchmarker
  that times nothing, so ``@triton.autotune`` keeps its first config), string annotations (``BLOCK:
  "tl.constexpr"``), grids given as lists, float arguments (fp32 scalars, as on a GPU), pointer arguments without a
  torch storage, integer-held masks, ``and`` / ``or`` on tensors, ``x[:, None]`` on a scalar, vendor libdevice math
  (``tl.extra.cuda/hip.libdevice``, ``triton.language.extra.libdevice``), computed with NumPy/SciPy, and block
  pointers where the installed Triton has dropped them (``interpreter_block_pointers``).

What the interpreter still cannot run is recognized by ``cpu_support`` and reported as "not checkable on CPU".
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from . import interpreter_block_pointers

CAPABILITY = (9, 0)
WARP_SIZE = 32
DEVICE_NAME = "cpu (Triton interpreter)"
SM_COUNT = 8  # fixed, so that persistent kernels split work the same way on every machine
SHARED_MEMORY = 232448  # bytes per block (an H100's opt-in limit)


def install() -> None:
    """Patch torch and Triton for GPU-written code (see the module docstring). Call once, after importing Triton."""
    _map_torch_cuda()
    _install_driver()
    _autotune_without_timing()
    _accept_string_annotations()
    _accept_list_grids()
    _float_arguments()
    _storageless_pointer_arguments()
    _boolean_masks()
    _tensor_boolean_operators()
    _surplus_full_slices()
    _map_libdevice()
    if interpreter_block_pointers.interpreter_lacks_block_pointers():
        interpreter_block_pointers.install()
    CudaToCpu().__enter__()


def report_programs(callback: Callable[[int], None], every_s: float) -> None:
    """While kernels are interpreted, call `callback(programs run so far)` at most every `every_s` seconds (a
    heartbeat: a run killed at the time limit while it was still running programs was slow, not hung)."""
    from triton.runtime import interpreter

    builder_cls = type(interpreter.interpreter_builder)
    set_grid_idx = builder_cls.set_grid_idx
    count, due = 0, 0.0

    def counting(self, *idx: int) -> None:
        nonlocal count, due
        count += 1
        now = time.monotonic()
        if now >= due:
            due = now + every_s
            callback(count)
        set_grid_idx(self, *idx)

    builder_cls.set_grid_idx = counting


# ----------------------------------------------------------------------------------------- torch


def _is_gpu_device(device: Any) -> bool:
    """ "cuda", "cuda:1", torch.device("cuda"), or a bare index (`device=torch.cuda.current_device()`)."""
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    try:
        return torch.device(device).type == "cuda"
    except (RuntimeError, TypeError, ValueError):
        return False


_DEVICE = torch._C.TensorBase.device
_IS_CUDA = torch._C.TensorBase.is_cuda
_GET_DEVICE = torch._C.TensorBase.get_device


class CudaToCpu(TorchFunctionMode):
    """Runs GPU-written tests on the CPU: `device="cuda"`, `.cuda()` and `.to("cuda")` land on the CPU, and to the
    user's code (not to torch's, Triton's or other installed packages') a CPU tensor says it lives on `cuda:0`:
    `x.device`, `x.is_cuda`, `x.get_device()`, so `str(x.device)`, `x.device.index` and `x.device.type == "cuda"`
    checks pass. Every CUDA device named to torch is the CPU again."""

    def __init__(self) -> None:
        super().__init__()
        self.library_dirs = _library_dirs()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("device") is not None and _is_gpu_device(kwargs["device"]):
            kwargs["device"] = "cpu"
        name = getattr(func, "__name__", "")
        if name == "cuda" and args:
            return args[0]
        if name == "to" and len(args) > 1 and isinstance(args[1], (str, int, torch.device)) and _is_gpu_device(args[1]):
            args = (args[0], "cpu", *args[2:])
        result = func(*args, **kwargs)
        asked = getattr(func, "__self__", None) if name == "__get__" else func
        if asked in (_DEVICE, _IS_CUDA, _GET_DEVICE) and args[0].device.type == "cpu":
            caller = sys._getframe(1).f_code.co_filename
            if not caller.startswith(self.library_dirs):
                return {_DEVICE: _CUDA0, _IS_CUDA: True, _GET_DEVICE: 0}[asked]
        return result


_CUDA0 = torch.device("cuda", 0)


@dataclass(frozen=True)
class DeviceProperties:
    """What `torch.cuda.get_device_properties` answers for the interpreter's one device."""

    name: str = DEVICE_NAME
    major: int = CAPABILITY[0]
    minor: int = CAPABILITY[1]
    multi_processor_count: int = SM_COUNT
    total_memory: int = 0
    warp_size: int = WARP_SIZE
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 49152
    shared_memory_per_block_optin: int = SHARED_MEMORY
    shared_memory_per_multiprocessor: int = SHARED_MEMORY + 1024
    L2_cache_size: int = 50 * 2**20
    gcnArchName: str = "NONE"  # torch's name (ROCm)
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"


class DeviceContext(contextlib.AbstractContextManager):
    """`torch.cuda.device(x)` and its kin: there is one device, so selecting one does nothing (any `x`, even the
    `None` index of a CPU tensor)."""

    def __init__(self, device: Any = None) -> None:
        self.idx = 0

    def __exit__(self, *exc: object) -> None:
        return None


class _Stream:
    """A stream of the interpreter's device: work runs at once, so every wait is already over."""

    def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
        self.device = torch.device("cpu")
        self.priority = priority
        self.cuda_stream = 0

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait_stream(self, stream: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> Any:
        return event


class _Event:
    """A CUDA event: work runs at once, so an event records the host clock (tests that time themselves run)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait(self, stream: Any = None) -> None:
        return None

    def elapsed_time(self, end: _Event) -> float:
        if self.at is None or end.at is None:
            raise RuntimeError("both events must be recorded before elapsed_time()")
        return (end.at - self.at) * 1000.0


class _CudaGenerator:
    """`torch.cuda.default_generators[i]`: a CUDA (Philox) generator's state is a seed and an offset (16 bytes),
    which code that drives its own Philox kernels reads and advances. Seeded from torch's seed at first use, so the
    reference and a candidate (seeded alike) draw alike."""

    def __init__(self) -> None:
        self._seed: int | None = None
        self._offset = 0
        self.device = torch.device("cuda", 0)

    def initial_seed(self) -> int:
        if self._seed is None:
            self._seed = torch.initial_seed() & (2**63 - 1)
        return self._seed

    def manual_seed(self, seed: int) -> _CudaGenerator:
        self._seed, self._offset = int(seed) & (2**63 - 1), 0
        return self

    def get_state(self) -> torch.Tensor:
        return torch.tensor([self.initial_seed(), self._offset], dtype=torch.int64).view(torch.uint8)

    def set_state(self, state: torch.Tensor) -> None:
        seed, offset = state.view(torch.int64).tolist()
        self._seed, self._offset = seed, offset

    def get_offset(self) -> int:
        return self._offset

    def set_offset(self, offset: int) -> None:
        self._offset = int(offset)


class _DefaultGenerators:
    def __init__(self) -> None:
        self._generator = _CudaGenerator()

    def __getitem__(self, index: int) -> _CudaGenerator:
        return self._generator

    def __len__(self) -> int:
        return 1


def _map_torch_cuda() -> None:
    cuda = torch.cuda
    props = DeviceProperties(total_memory=_physical_memory())
    stream = _Stream()
    replacements: dict[str, Any] = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "device": DeviceContext,
        "device_of": DeviceContext,
        "_DeviceGuard": DeviceContext,
        "get_device_properties": lambda device=None: props,
        "get_device_capability": lambda device=None: CAPABILITY,
        "get_device_name": lambda device=None: DEVICE_NAME,
        "get_arch_list": lambda: [f"sm_{CAPABILITY[0]}{CAPABILITY[1]}"],
        "synchronize": lambda device=None: None,
        "empty_cache": lambda: None,
        "reset_peak_memory_stats": lambda device=None: None,
        "memory_allocated": lambda device=None: 0,
        "max_memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0,
        "max_memory_reserved": lambda device=None: 0,
        "Stream": _Stream,
        "Event": _Event,
        "current_stream": lambda device=None: stream,
        "default_stream": lambda device=None: stream,
        "set_stream": lambda s: None,
        "stream": lambda s=None: contextlib.nullcontext(s),
        "default_generators": _DefaultGenerators(),
    }
    for name, value in replacements.items():
        setattr(cuda, name, value)
    if not hasattr(torch._C, "_cuda_getCurrentRawStream"):  # `from torch._C import _cuda_getCurrentRawStream`
        torch._C._cuda_getCurrentRawStream = lambda device=None: 0
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)  # Inductor-generated wrappers allocate so
    if guards is not None and hasattr(guards, "_empty_strided_cpu"):
        guards._empty_strided_cuda = guards._empty_strided_cpu


def _library_dirs() -> tuple[str, ...]:
    """Where installed packages and the standard library live: code there sees CPU tensors as they are."""
    paths = sysconfig.get_paths()
    found = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    found += [p for p in sys.path if "-packages" in p]
    found.append(os.path.dirname(os.path.abspath(__file__)))  # the job-side code (this package)
    dirs = {f(d) for d in found for f in (os.path.abspath, os.path.realpath)}
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


# ----------------------------------------------------------------------------------------- triton driver


def _no_timing(kernel_call: Any, quantiles: Any = None, **kwargs: Any) -> Any:
    """The interpreter's benchmarker: nothing can be timed, so every config "takes" 0 ms (the autotuner keeps the
    first) and the kernel is not run for nothing."""
    return [0.0, 0.0, 0.0] if quantiles is not None else 0.0


class _DriverUtils:
    @staticmethod
    def get_device_properties(device: Any = None) -> dict[str, Any]:
        return {
            "max_shared_mem": SHARED_MEMORY,
            "max_num_regs": 65536,
            "multiprocessor_count": SM_COUNT,
            "warpSize": WARP_SIZE,
            "sm_clock_rate": 1980000,
            "mem_clock_rate": 2619000,
            "mem_bus_width": 5120,
        }


class InterpreterDriver:
    """`triton.runtime.driver.active` under the interpreter (Triton has no driver for the CPU and would raise
    "0 active drivers")."""

    utils = _DriverUtils()

    @classmethod
    def is_active(cls) -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", CAPABILITY[0] * 10 + CAPABILITY[1], WARP_SIZE)

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_device_interface(self) -> ModuleType:
        return torch.cuda

    def get_benchmarker(self) -> Any:
        return _no_timing

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: Any) -> None:
        return None

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        return CAPABILITY

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_empty_cache_for_benchmark(self) -> torch.Tensor:
        return torch.empty(0, dtype=torch.int8)

    def clear_cache(self, cache: torch.Tensor) -> None:
        cache.zero_()


def _autotune_without_timing() -> None:
    """`@triton.autotune`: whatever benchmarker it was given (`do_bench=`, `warmup=`/`rep=`, `use_cuda_graph=True`),
    nothing can be timed on the CPU, so every config "takes" 0 ms and the first is kept, without running the others."""
    from triton.runtime.autotuner import Autotuner

    Autotuner._bench = lambda self, *args, config, **meta: [0.0, 0.0, 0.0]


def _install_driver() -> None:
    from triton.runtime.driver import driver as config

    instance = InterpreterDriver()
    if hasattr(config, "set_active"):  # Triton >= 3.2: DriverConfig
        config._default = instance
        config.set_active(instance)
    else:  # older: a lazy proxy
        config._obj = instance


# ----------------------------------------------------------------------------------------- triton language


def _accept_string_annotations() -> None:
    """`BLOCK: "tl.constexpr"`: the interpreter re-parses kernels and sees the annotation quoted twice
    (`"'tl.constexpr'"`), so it takes BLOCK for a runtime argument; unquote it first."""
    from triton.runtime import jit

    normalize = jit._normalize_ty

    def normalize_unquoted(ty: Any) -> str:
        if isinstance(ty, str) and len(ty) > 1 and ty[0] == ty[-1] and ty[0] in "'\"":
            with contextlib.suppress(ValueError, SyntaxError):
                ty = ast.literal_eval(ty)
        return normalize(ty)

    jit._normalize_ty = normalize_unquoted


def _accept_list_grids() -> None:
    """`kernel[[m, n]](...)` or a grid function returning a list: a GPU launch takes any sequence, the interpreter
    only tuples."""
    from triton.runtime import interpreter

    init = interpreter.GridExecutor.__init__

    def init_with_tuple_grid(self, fn, arg_names, grid, *args, **kwargs):
        if isinstance(grid, list):
            grid = tuple(grid)
        elif callable(grid):
            grid = _tuple_grid(grid)
        init(self, fn, arg_names, grid, *args, **kwargs)

    interpreter.GridExecutor.__init__ = init_with_tuple_grid


def _float_arguments() -> None:
    """A Python float passed to a kernel is an fp32 scalar on a GPU (`x.to(...)` works, `scale * h` with an fp16 `h`
    is fp32); the interpreter would hand the kernel the bare float."""
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    interpreter._implicit_cvt = implicit_cvt  # also used, by name, for the items of a tuple argument


def _storageless_pointer_arguments() -> None:
    """A kernel argument with `data_ptr()` and `dtype` but no torch storage (a strided view class of the file's own)
    is a pointer on a GPU; the interpreter, which copies every tensor argument's storage to the host and back,
    would fail on it. On CPU its address is host memory already, so it passes through as it is."""
    from triton.runtime import interpreter

    executor = interpreter.GridExecutor
    to_host, back = executor._init_args_hst, executor._restore_args_dev

    def storageless(arg: Any) -> bool:
        return hasattr(arg, "data_ptr") and not hasattr(interpreter._unwrap_tensor(arg), "untyped_storage")

    def without(args: Any, kwargs: dict) -> tuple[list, dict]:
        keep = {k: None if storageless(v) else v for k, v in kwargs.items()}
        return [None if storageless(a) else a for a in args], keep

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = to_host(self, *without(args_dev, kwargs))
        args_hst = [a if storageless(a) else h for a, h in zip(args_dev, args_hst, strict=True)]
        return args_hst, {k: v if storageless(v) else kwargs_hst[k] for k, v in kwargs.items()}

    def restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        (args_dev, kwargs), (args_hst, kwargs_hst) = without(args_dev, kwargs), without(args_hst, kwargs_hst)
        back(self, args_dev, args_hst, kwargs, kwargs_hst)

    executor._init_args_hst, executor._restore_args_dev = init_args_hst, restore_args_dev


def _tuple_grid(grid: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def as_tuple(meta: Any) -> Any:
        value = grid(meta)
        return tuple(value) if isinstance(value, list) else value

    return as_tuple


def _boolean_masks() -> None:
    """A mask is int1 to Triton, but the interpreter sometimes holds it as int32 data (a scalar comparison broadcast
    to a block), which its load and store then refuse ("mask has unsupported dtype")."""
    from triton.runtime import interpreter

    builder_cls = type(interpreter.interpreter_builder)
    load, store = builder_cls.create_masked_load, builder_cls.create_masked_store

    def as_bool(mask: Any) -> Any:
        if mask is not None and mask.data.dtype != np.bool_:
            return interpreter.TensorHandle(mask.data.astype(np.bool_), mask.dtype)
        return mask

    builder_cls.create_masked_load = lambda self, ptrs, mask, *rest: load(self, ptrs, as_bool(mask), *rest)
    builder_cls.create_masked_store = lambda self, ptrs, value, mask, *rest: store(
        self, ptrs, value, as_bool(mask), *rest
    )


def _tensor_boolean_operators() -> None:
    """`mask = (rows < M) and (cols < N)` in a kernel: Triton's compiler makes `and` / `or` on tensors elementwise
    (constexpr operands still short-circuit); plain Python, which the interpreter runs, would keep only one operand
    (a block tensor is always truthy), so masks lose a bound and loads run out of bounds. Rewrite them as the
    compiler reads them."""
    from triton.runtime import interpreter

    rewriter = interpreter.FunctionRewriter
    first = rewriter.ast_transformer

    class BooleanOperators(ast.NodeTransformer):
        def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
            self.generic_visit(node)
            method = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
            no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
            thunks = [ast.Lambda(args=no_args, body=value) for value in node.values]
            call = ast.Call(ast.Name("_interpreted_boolean_op", ast.Load()), [ast.Constant(method), *thunks], [])
            return ast.copy_location(call, node)

    class Both:
        def visit(self, tree: ast.AST) -> ast.AST:
            return BooleanOperators().visit(first.visit(tree))

    rewriter.ast_transformer = Both()
    interpreter._interpreted_boolean_op = _boolean_op  # the interpreter hands its globals to the kernels it rewrites


def _surplus_full_slices() -> None:
    """`cond[:, None]` on a scalar: Tritons up to 3.6 (what GPUs run) skip a `:` past a tensor's rank, later ones
    raise "too many indices"; files written for the former use it to broadcast a scalar condition as a column."""
    import builtins

    from triton.language import core

    getitem = core.tensor.__getitem__
    full_slice_types = (builtins.slice, core.slice)

    @core.builtin
    def lenient_getitem(self, slices, _semantic=None):
        try:
            return getitem(self, slices, _semantic=_semantic)
        except ValueError as e:
            if "too many indices" not in str(e):
                raise
        items = slices.values if isinstance(slices, core.tuple) else slices
        result = self
        for dim, item in enumerate(items if isinstance(items, (list, tuple)) else [items]):
            if core._unwrap_if_constexpr(item) is None:
                result = _semantic.expand_dims(result, min(dim, len(result.shape)))  # 3.6: list.insert's rule
            elif not isinstance(item, full_slice_types) or (item.start, item.stop, item.step) != (None, None, None):
                raise ValueError(f"unsupported tensor index: {item}")
        return result

    core.tensor.__getitem__ = lenient_getitem


def _boolean_op(method: str, *operands: Callable[[], Any]) -> Any:
    """`a and b` / `a or b` as Triton's compiler evaluates them: Python values short-circuit, tensors combine
    elementwise (`logical_and` / `logical_or`)."""
    import triton.language as tl

    tensors: list[Any] = []
    value: Any = None
    for operand in operands:
        value = operand()
        if isinstance(value, tl.core.tensor):
            tensors.append(value)
        elif bool(value) is (method == "logical_or"):
            return value
    if not tensors:
        return value
    result = tensors[0]
    for other in tensors[1:]:
        result = getattr(result, method)(other)
    return result


def _np_erf(x: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.erf(x)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _special(name: str):
    def fn(*args: np.ndarray) -> np.ndarray:
        from scipy import special

        return getattr(special, name)(*args)

    return fn


# libdevice function (without the __nv_ / __ocml_ prefix and the f / _f32 / _f64 suffix) -> NumPy
LIBDEVICE_NUMPY: dict[str, Any] = {
    "abs": np.abs,
    "fabs": np.abs,
    "llabs": np.abs,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "atanh": np.arctanh,
    "cbrt": np.cbrt,
    "ceil": np.ceil,
    "copysign": np.copysign,
    "cos": np.cos,
    "cosh": np.cosh,
    "erf": _np_erf,
    "erfc": _special("erfc"),
    "erfinv": _special("erfinv"),
    "exp": np.exp,
    "exp2": np.exp2,
    "exp10": lambda x: np.power(x.dtype.type(10), x),
    "expm1": np.expm1,
    "fast_exp": np.exp,
    "fast_log": np.log,
    "fdim": lambda x, y: np.maximum(x - y, 0),
    "floor": np.floor,
    "fma": lambda x, y, z: x * y + z,
    "fmax": np.fmax,
    "fmin": np.fmin,
    "fmod": np.fmod,
    "hypot": np.hypot,
    "isinf": np.isinf,
    "isnan": np.isnan,
    "isfinite": np.isfinite,
    "isfinited": np.isfinite,
    "finite": np.isfinite,
    "lgamma": _special("gammaln"),
    "llrint": np.rint,
    "lrint": np.rint,
    "rint": np.rint,
    "nearbyint": np.rint,
    "llround": _round_half_away,
    "round": _round_half_away,
    "log": np.log,
    "log10": np.log10,
    "log1p": np.log1p,
    "log2": np.log2,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
    "powi": np.power,
    "pown": np.power,
    "rcbrt": lambda x: 1 / np.cbrt(x),
    "remainder": np.remainder,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "signbit": np.signbit,
    "sin": np.sin,
    "sinh": np.sinh,
    "sqrt": np.sqrt,
    "tan": np.tan,
    "tanh": np.tanh,
    "tgamma": _special("gamma"),
    "trunc": np.trunc,
    "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x),
    "saturate": lambda x: np.clip(x, 0, 1),
    "rhypot": lambda x, y: 1 / np.hypot(x, y),
    "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "scalbn": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "nextafter": np.nextafter,
    "normcdf": _special("ndtr"),
    "normcdfinv": _special("ndtri"),
    "erfcinv": _special("erfcinv"),
    "erfcx": _special("erfcx"),
    "i0": _special("i0"),
    "i1": _special("i1"),
    "cyl_bessel_i0": _special("i0"),
    "cyl_bessel_i1": _special("i1"),
    "j0": _special("j0"),
    "j1": _special("j1"),
    "y0": _special("y0"),
    "y1": _special("y1"),
    "fast_cos": np.cos,
    "fast_sin": np.sin,
    "fast_tan": np.tan,
    "fast_tanh": np.tanh,
    "fast_exp10": lambda x: np.power(x.dtype.type(10), x),
    "fast_log2": np.log2,
    "fast_log10": np.log10,
    "fast_pow": np.power,
    "fast_fdivide": np.divide,
    # the round-to-nearest forms of the rounding-mode family are IEEE's default rounding (the _rz/_rd/_ru forms
    # are left out: NumPy cannot round another way)
    **{f"{p}{op}_rn": fn for p in "fd" for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply))},
    **{f"{p}{op}_rn": fn for p in "fd" for op, fn in (("div", np.divide), ("sqrt", np.sqrt))},
    "frcp_rn": lambda x: 1 / x,
    "drcp_rn": lambda x: 1 / x,
    "frsqrt_rn": lambda x: 1 / np.sqrt(x),
    "fma_rn": lambda x, y, z: x * y + z,
    "fmaf_rn": lambda x, y, z: x * y + z,
}


def libdevice_function(symbol: str) -> Any:
    """The NumPy function for a libdevice/OCML symbol (`__nv_powf`, `__ocml_pow_f32`, `__nv_isfinited`,
    `__triton_hip_llrint`), or None."""
    name = re.sub(r"^__(nv|ocml|triton_hip)_", "", symbol)
    for suffix in ("", "_f16", "_f32", "_f64", "f", "d"):
        base = name.removesuffix(suffix) if suffix else name
        if base in LIBDEVICE_NUMPY:
            return LIBDEVICE_NUMPY[base]
    return None


def _map_libdevice() -> None:
    """Vendor libdevice calls (`tl.extra.cuda.libdevice.pow`, `tl.extra.hip.libdevice.llrint`,
    `triton.language.extra.libdevice.tanh`) run through NumPy; an unknown one still raises the interpreter's
    NotImplementedError (reported as not checkable on CPU)."""
    import triton.language as tl
    from triton.runtime import interpreter

    names = ("triton.language.extra.cuda.libdevice", "triton.language.extra.hip.libdevice")
    backends = [m for m in map(_import, names) if m is not None]
    generic = _import("triton.language.extra.libdevice")
    builder_cls = type(interpreter.interpreter_builder)
    refuse = builder_cls.create_extern_elementwise

    def create_extern_elementwise(self, lib_name, lib_path, symbol, args, ret_type, is_pure):
        fn = libdevice_function(symbol)
        if fn is None:
            return refuse(self, lib_name, lib_path, symbol, args, ret_type, is_pure)
        with np.errstate(all="ignore"):
            out = fn(*(a.data for a in args))
        return interpreter.TensorHandle(np.asarray(out).astype(interpreter._get_np_dtype(ret_type)), ret_type.scalar)

    builder_cls.create_extern_elementwise = create_extern_elementwise

    def bound(member: Any) -> Any:
        semantic = interpreter.interpreter_semantic
        return lambda *a, **k: member(*a, **{n: v for n, v in k.items() if n != "_semantic"}, _semantic=semantic)

    by_name: dict[str, Any] = {}
    for module in reversed(backends):  # the CUDA version wins where both have a function
        by_name.update({n: m for n, m in vars(module).items() if tl.core.is_builtin(m)})
    stub_names = [n for n, v in vars(generic).items() if callable(v) and n in by_name] if generic else []
    imported = {id(m): m for module in backends for m in vars(module).values() if tl.core.is_builtin(m)}
    known = imported | {id(getattr(generic, n)): by_name[n] for n in stub_names}  # also HIP's where CUDA has one
    patch_lang = interpreter._patch_lang

    def patch_lang_with_libdevice(fn):
        scope = patch_lang(fn)
        for module in backends:
            for name, member in list(vars(module).items()):
                if tl.core.is_builtin(member):
                    scope.set_attr(module, name, bound(member))
        for name in stub_names:
            scope.set_attr(generic, name, bound(by_name[name]))
        names = _GlobalNames(fn.__globals__)
        for name, value in list(fn.__globals__.items()):  # `from ...libdevice import tanh`
            if id(value) in known:
                scope.set_attr(names, name, bound(known[id(value)]))
        return scope

    interpreter._patch_lang = patch_lang_with_libdevice


class _GlobalNames:
    """A module's globals as attributes, so the interpreter's patch scope can set and restore them."""

    def __init__(self, names: dict[str, Any]) -> None:
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._names[name] = value

    def __delattr__(self, name: str) -> None:
        self._names.pop(name, None)


def _import(name: str) -> ModuleType | None:
    try:
        __import__(name)
    except ImportError:
        return None
    return sys.modules[name]
