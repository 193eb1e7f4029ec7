"""The device a launch configuration is searched for, and what its Triton backend makes of a configuration.

Built from the evaluator's runtime facts (``{"backend": "cuda" | "rocm" | "interpreter", "arch": "sm_90" | "gfx942" |
…}``; where reported, the torch property names ``warp_size`` and ``shared_memory_per_block_optin``), or from the
backend's name alone. Triton's AMD backend differs from the NVIDIA one in what the search must know:

- a launch that omits ``num_stages`` gets 2 (``HIPOptions``), not 3; a ``triton.Config`` passes its own 3 alike;
- its stream pipeliner keeps ``num_stages - 1`` copies of a loop's tiles in LDS (one at least), one more where it
  copies global memory to LDS asynchronously (gfx950 and gfx1250 by default); LDS is 64 KB a workgroup, 160 KB on
  gfx950 and 320 KB on gfx1250;
- a wavefront is 64 lanes on CDNA (gfx9) and 32 from gfx10 on (RDNA);
- ``waves_per_eu`` (an occupancy hint, 0 = none), ``matrix_instr_nonkdim`` (the MFMA size: 0 = the compiler's
  choice, 16 or 32) and ``kpack`` (1 or 2; gfx950 overwrites it with 1) are compile options of its own; the NVIDIA
  backend rejects them as unrecognised keywords, the CPU interpreter ignores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ROCM_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")  # compile options only ROCm's Triton accepts
ROCM_DOT_OPTIONS = ("matrix_instr_nonkdim", "kpack")  # they shape a kernel's tl.dot alone
ROCM_DEFAULTS = {"waves_per_eu": 0, "matrix_instr_nonkdim": 0, "kpack": 1}
_WAVES_PER_EU = (0, 1, 2, 3, 4)  # 0 keeps the compiler's occupancy; AMD's tuning guides try 1 to 4
_NONKDIM = (0, 16, 32)  # MFMA 16x16 or 32x32 enforced, or the compiler's choice
_KPACK = (1, 2)
CUDA_SHARED_MEMORY = 227 * 1024  # H100/H200 opt-in limit a block
AMD_LDS = 64 * 1024  # gfx90a, gfx942 and RDNA
_AMD_LDS_BY_ARCH = {"gfx950": 160 * 1024, "gfx1250": 320 * 1024}
_ASYNC_COPY_ARCHS = ("gfx950", "gfx1250")  # where Triton's AMD pipeliner copies to LDS asynchronously


@dataclass(frozen=True)
class DeviceTarget:
    """A device's backend ("cuda", "rocm", "interpreter"; "" unknown), arch (``sm_90``, ``gfx942``; "" unknown),
    lanes a warp and shared memory a block (bytes)."""

    backend: str = ""
    arch: str = ""
    warp_size: int = 32
    shared_memory: int = CUDA_SHARED_MEMORY

    @classmethod
    def of(cls, device: DeviceTarget | Mapping[str, Any] | str | None) -> DeviceTarget:
        """The target of a runtime's facts, of a backend's name ("hip" is "rocm", Triton's name for it), or none."""
        if isinstance(device, DeviceTarget):
            return device
        facts: Mapping[str, Any] = {"backend": device} if isinstance(device, str) or device is None else device
        backend = str(facts.get("backend") or "")
        backend = "rocm" if backend == "hip" else backend
        arch = str(facts.get("arch") or "").split(":")[0]  # torch's gcnArchName carries features: gfx90a:sramecc+
        if backend == "rocm":
            warp = 32 if _gfx_major(arch) >= 10 else 64  # an unknown arch is taken as CDNA, the Instinct GPUs
            shared = _AMD_LDS_BY_ARCH.get(arch, AMD_LDS)
        else:
            warp, shared = 32, CUDA_SHARED_MEMORY
        return cls(
            backend,
            arch,
            _positive(facts.get("warp_size")) or warp,
            _positive(facts.get("shared_memory_per_block_optin")) or shared,
        )

    @property
    def rocm(self) -> bool:
        return self.backend == "rocm"

    @property
    def cdna(self) -> bool:
        """An AMD GPU with MFMA units (gfx9; an unknown AMD arch is taken as one)."""
        return self.rocm and _gfx_major(self.arch) < 10

    def option_default(self, option: str) -> int:
        """What Triton uses for a launch option a launch omits."""
        if option in ROCM_DEFAULTS:
            return ROCM_DEFAULTS[option]
        if option == "num_stages":
            return 2 if self.rocm else 3
        return {"num_warps": 4, "num_ctas": 1}[option]

    def rocm_choices(self, option: str) -> tuple[int, ...]:
        """The values of one of ROCm's compile options worth trying here: none off ROCm, none for an MFMA option off
        CDNA, none for ``kpack`` on gfx950 (which overwrites it)."""
        if not self.rocm:
            return ()
        if option == "waves_per_eu":
            return _WAVES_PER_EU
        if not self.cdna:
            return ()
        if option == "matrix_instr_nonkdim":
            return _NONKDIM
        return _KPACK if option == "kpack" and self.arch != "gfx950" else ()

    @property
    def tuned_rocm_options(self) -> tuple[str, ...]:
        """ROCm's compile options with values to try on this device."""
        return tuple(o for o in ROCM_OPTIONS if self.rocm_choices(o))

    def shared_buffers(self, num_stages: int) -> int:
        """How many copies of a pipelined loop's tiles live in shared memory at `num_stages`."""
        if not self.rocm:
            return max(1, num_stages)
        return max(1, num_stages - 1) + (1 if self.arch in _ASYNC_COPY_ARCHS else 0)


def _gfx_major(arch: str) -> int:
    """The major version of a ``gfxNNN`` arch (9 for gfx90a/gfx942/gfx950, 11 for gfx1100); 9 where unknown."""
    digits = arch.removeprefix("gfx")[:-2]
    return int(digits) if arch.startswith("gfx") and digits.isdigit() else 9


def _positive(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None
