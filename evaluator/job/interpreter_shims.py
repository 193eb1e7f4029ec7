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
  pointers where the installed Triton has dropped them (``interpreter_block_pointers``);
* bf16 arithmetic, which the interpreter does on the bit patterns: in float32, rounded to bf16
  (``interpreter_bfloat16``).

Each part has its module: the device torch sees (``interpreter_device``), Triton's driver (``interpreter_driver``),
its language (``interpreter_language``), vendor math (``interpreter_libdevice``) and block pointers.

What the interpreter still cannot run is recognized by ``cpu_support`` and reported as "not checkable on CPU".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from . import (
    interpreter_bfloat16,
    interpreter_block_pointers,
    interpreter_device,
    interpreter_driver,
    interpreter_language,
    interpreter_libdevice,
)


def install() -> None:
    """Patch torch and Triton for GPU-written code (see the module docstring). Call once, after importing Triton."""
    interpreter_device.map_torch_cuda()
    interpreter_driver.install_driver()
    interpreter_driver.autotune_without_timing()
    interpreter_language.accept_string_annotations()
    interpreter_language.accept_list_grids()
    interpreter_language.float_arguments()
    interpreter_language.storageless_pointer_arguments()
    interpreter_language.boolean_masks()
    interpreter_language.tensor_boolean_operators()
    interpreter_language.surplus_full_slices()
    interpreter_libdevice.map_libdevice()
    interpreter_bfloat16.install()
    if interpreter_block_pointers.interpreter_lacks_block_pointers():
        interpreter_block_pointers.install()
    interpreter_device.CudaToCpu().__enter__()


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
