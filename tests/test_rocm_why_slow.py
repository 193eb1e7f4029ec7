"""Why-slow facts of a kernel compiled for an AMD GPU: registers, spills and the compiler's occupancy read from its
own assembly (a HIP driver may report 0 registers and spills), occupancy estimated with the compute unit's constants,
and the words an AMD user reads (wavefronts, VGPRs, LDS, CU). Recorded-format assembly, a simulated HIP device."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from geak.evaluator import slowness
from geak.evaluator.job import screening
from geak.evaluator.job.amd_assembly import assembly_facts
from geak.evaluator.results import KernelProfile, Peaks

ASM = (Path(__file__).parent / "fixtures" / "rocm" / "matmul_gfx942.amdgcn").read_text()
# An older LLVM's kernel info (no TotalNumVgprs, no spill counts in the metadata), as for a gfx90a elementwise kernel
OLDER_ASM = """; Kernel info:
; codeLenInByte = 2192
; NumSgprs: 30
; NumVgprs: 39
; NumAgprs: 0
; ScratchSize: 0
; LDSByteSize: 0 bytes/workgroup (compile time only)
; Occupancy: 8
"""


def hip_props(arch: str) -> SimpleNamespace:
    """What a ROCm torch reports of an MI300X-class device (HIP's figures in CUDA's names)."""
    return SimpleNamespace(gcnArchName=arch, multi_processor_count=304, regs_per_multiprocessor=65536,
                           max_threads_per_multi_processor=2048, shared_memory_per_multiprocessor=65536,
                           shared_memory_per_block_optin=65536, warp_size=64)  # fmt: skip


def compiled(asm: str, num_warps: int = 4, shared: int = 0) -> SimpleNamespace:
    """A Triton HIP CompiledKernel as an older driver leaves it: 0 registers and spills."""
    metadata = SimpleNamespace(shared=shared, num_warps=num_warps, num_stages=2)
    return SimpleNamespace(hash="h", n_regs=0, n_spills=0, metadata=metadata, asm={"amdgcn": asm})


def test_the_assembly_says_what_the_driver_does_not():
    assert assembly_facts(ASM) == {"vgprs": 384, "spills": 9, "scratch_bytes": 36, "waves_per_simd": 1,
                                   "lds_bytes": 0}  # fmt: skip
    assert assembly_facts(OLDER_ASM) == {"vgprs": 39, "scratch_bytes": 0, "waves_per_simd": 8, "lds_bytes": 0}
    assert assembly_facts("no kernel info") == {}


def test_a_rocm_jobs_kernel_facts_come_from_the_assembly():
    raw = screening.kernel_facts("matmul_kernel", compiled(ASM))
    assert (raw["n_regs"], raw["n_spills"], raw["waves_per_simd"], raw["scratch_bytes"]) == (384, 9, 1, 36)
    nvidia = SimpleNamespace(hash="h", n_regs=128, n_spills=0, metadata=SimpleNamespace(shared=0, num_warps=4,
                             num_stages=3), asm={"ptx": "..."})  # fmt: skip
    assert screening.kernel_facts("k", nvidia)["n_regs"] == 128 and "waves_per_simd" not in screening.kernel_facts(
        "k", nvidia
    )


def test_occupancy_uses_the_compute_units_constants():
    limits = screening.limits_of(hip_props("gfx942:sramecc+:xnack-"))
    assert limits["max_waves_per_simd"] == 8 and limits["lds_per_cu"] == 64 * 1024
    spilling = slowness.kernel_facts(screening.kernel_facts("matmul_kernel", compiled(ASM)), limits)
    assert spilling.amd and spilling.occupancy == 0.125 and spilling.limited_by == "registers"  # 1 wave of 8 a SIMD
    light = slowness.kernel_facts(screening.kernel_facts("add", compiled(OLDER_ASM)), limits)
    assert light.occupancy == 1.0 and light.limited_by == "wavefronts"
    # no compiler occupancy: the VGPR file's share (512 per lane; 128 VGPRs -> 4 wavefronts a SIMD)
    vgprs = slowness.kernel_facts({"kernel": "k", "n_regs": 128, "num_warps": 4}, limits)
    assert vgprs.occupancy == 0.5 and vgprs.limited_by == "registers"
    # LDS: 48 KB of gfx942's 64 KB a workgroup -> one workgroup of 4 wavefronts a CU; gfx950's 160 KB holds three
    lds = {"kernel": "k", "n_regs": 32, "num_warps": 4, "shared": 48 * 1024}
    assert slowness.kernel_facts(lds, limits).occupancy == 4 / 32
    assert slowness.kernel_facts(lds, limits).limited_by == "LDS"
    assert slowness.kernel_facts(lds, screening.limits_of(hip_props("gfx950"))).occupancy == 12 / 32


def test_an_amd_kernel_is_described_in_amd_words():
    limits = screening.limits_of(hip_props("gfx942"))
    facts = slowness.kernel_facts(screening.kernel_facts("matmul_kernel", compiled(ASM, shared=32 * 1024)), limits)
    line = slowness.kernel_line(facts)
    assert line.startswith("4 wavefronts, 2 stages, 384 VGPRs/lane, 9 spilled, 36 B scratch/lane, 32 KB LDS")
    assert "warps" not in line and "shared" not in line
    measured = KernelProfile("matmul_kernel", "h", 1, 0.1, 0.125, 40.0, 30.0, 12.0, 2.0)
    said = slowness.measured_line(SimpleNamespace(**{**facts.__dict__, "measured": measured}))
    assert "VALU busy 30%" in said and "SM" not in said
    peaks = Peaks("AMD Instinct MI300X", 4300.0, 1000.0, 120.0, "measured")
    cost = slowness.call_cost("f(f32[1M])", 1 << 20, None, None, 0.5, peaks)
    assert "wavefronts" in cost.why and "warps" not in cost.why
