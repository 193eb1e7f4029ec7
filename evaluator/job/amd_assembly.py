"""What the AMD compiler says of a kernel in its own assembly (Triton's ``CompiledKernel.asm["amdgcn"]``): the
"; Kernel info:" comments LLVM's AMDGPU printer writes after each kernel and the code object's metadata. Older HIP
drivers report a loaded kernel's registers and spills as 0 (``hipFuncGetAttribute``), so these lines are the
authority on ROCm."""

from __future__ import annotations

import re
from typing import Any

_COMMENT = re.compile(r"^;\s*(TotalNumVgprs|NumVgprs|NumAgprs|ScratchSize|Occupancy|LDSByteSize):\s*(\d+)", re.M)
_METADATA = re.compile(r"^\s*\.(vgpr_count|agpr_count|vgpr_spill_count|sgpr_spill_count):\s*(\d+)", re.M)


def assembly_facts(text: str) -> dict[str, int]:
    """The kernel's facts: "vgprs" (VGPRs + AGPRs a lane holds), "spills" (VGPRs and SGPRs spilled to scratch),
    "scratch_bytes" (its private memory per lane), "waves_per_simd" (the occupancy the compiler computed) and
    "lds_bytes"; a fact the text does not state is absent."""
    said = {name: int(value) for name, value in _COMMENT.findall(text)}
    meta = {name: int(value) for name, value in _METADATA.findall(text)}
    facts: dict[str, int] = {}
    if "TotalNumVgprs" in said:
        facts["vgprs"] = said["TotalNumVgprs"]
    elif "vgpr_count" in meta:  # the metadata's count includes the AGPRs (gfx90a and later)
        facts["vgprs"] = meta["vgpr_count"]
    elif "NumVgprs" in said:
        facts["vgprs"] = said["NumVgprs"] + said.get("NumAgprs", 0)
    if "vgpr_spill_count" in meta or "sgpr_spill_count" in meta:
        facts["spills"] = meta.get("vgpr_spill_count", 0) + meta.get("sgpr_spill_count", 0)
    renamed = {"ScratchSize": "scratch_bytes", "Occupancy": "waves_per_simd", "LDSByteSize": "lds_bytes"}
    facts |= {ours: said[theirs] for theirs, ours in renamed.items() if theirs in said}
    return facts


def kernel_assembly(kernel: Any) -> str | None:
    """A compiled kernel's AMD assembly; None on other backends."""
    asm = getattr(kernel, "asm", None)
    text = asm.get("amdgcn") if hasattr(asm, "get") else None
    return text if isinstance(text, str) else None
