"""Triton's driver under the CPU interpreter (Triton has none for the CPU), and autotuning that times nothing."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from .interpreter_device import CAPABILITY, SHARED_MEMORY, SM_COUNT, WARP_SIZE


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


def autotune_without_timing() -> None:
    """`@triton.autotune`: whatever benchmarker it was given (`do_bench=`, `warmup=`/`rep=`, `use_cuda_graph=True`),
    nothing can be timed on the CPU, so every config "takes" 0 ms and the first is kept, without running the others."""
    from triton.runtime.autotuner import Autotuner

    Autotuner._bench = lambda self, *args, config, **meta: [0.0, 0.0, 0.0]


def install_driver() -> None:
    from triton.runtime.driver import driver as config

    instance = InterpreterDriver()
    if hasattr(config, "set_active"):  # Triton >= 3.2: DriverConfig
        config._default = instance
        config.set_active(instance)
    else:  # older: a lazy proxy
        config._obj = instance
