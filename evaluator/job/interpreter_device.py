"""The one CUDA device Triton's CPU interpreter presents to torch: tensors asked for on "cuda" land on the CPU
(``CudaToCpu``), and ``torch.cuda`` answers as a device of compute capability 9.0 would (``map_torch_cuda``)."""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

CAPABILITY = (9, 0)
WARP_SIZE = 32
DEVICE_NAME = "cpu (Triton interpreter)"
SM_COUNT = 8  # fixed, so that persistent kernels split work the same way on every machine
SHARED_MEMORY = 232448  # bytes per block (an H100's opt-in limit)


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


def map_torch_cuda() -> None:
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
