"""What AMD Instinct GPUs are, per architecture (the ``gcnArchName`` a ROCm torch reports, as gfx942:sramecc+:xnack-),
where torch's device properties do not say it: the last-level cache (torch's ``L2_cache_size`` is one XCD's L2, 4 MB
on an MI300X, while reads are served from the 256 MB Infinity Cache behind it), and the compute unit's limits for
occupancy (a CU has 4 SIMDs; a wavefront's VGPRs and AGPRs share one file per SIMD lane). Plain data for both sides:
the job sizes its cache flush and its L2 probe from it, the caller estimates occupancy with it."""

from __future__ import annotations

from dataclasses import dataclass

MB = 1 << 20
SIMDS_PER_CU = 4
VGPR_GRANULE = 8  # gfx90a and later allocate a wavefront's unified VGPRs in blocks of 8 (LLVM AMDGPUUsage, gfx90a)


@dataclass(frozen=True)
class AmdArch:
    """One architecture's facts. `last_level_cache`: the largest cache in front of HBM (the Infinity Cache / MALL
    where there is one, else the L2 of the device torch shows: one GCD of an MI250X); `lds_per_cu`: local data share
    a workgroup may use; `vgprs_per_lane`: VGPRs + AGPRs a SIMD lane holds for all its wavefronts;
    `max_waves_per_simd`: wavefronts a SIMD keeps resident."""

    name: str
    last_level_cache: int
    lds_per_cu: int
    vgprs_per_lane: int = 512
    max_waves_per_simd: int = 8


ARCHS = {
    # CDNA2 whitepaper: 8 MB L2 per GCD, no Infinity Cache; torch shows each GCD of an MI250/MI250X as its own device.
    "gfx90a": AmdArch("CDNA2 (MI210/MI250/MI250X)", 8 * MB, 64 * 1024),
    # CDNA3 whitepaper and MI300X/MI325X datasheets: 256 MB AMD Infinity Cache (MALL) behind 4 MB of L2 per XCD.
    "gfx942": AmdArch("CDNA3 (MI300A/MI300X/MI325X)", 256 * MB, 64 * 1024),
    # CDNA4 whitepaper: 256 MB Infinity Cache, 160 KB of LDS per CU.
    "gfx950": AmdArch("CDNA4 (MI350X/MI355X)", 256 * MB, 160 * 1024),
}


def amd_arch(gcn_arch_name: str | None) -> AmdArch | None:
    """The facts of an architecture named as torch names it (features after ":" ignored); None where unknown."""
    return ARCHS.get((gcn_arch_name or "").split(":")[0].strip())


def last_level_cache(l2_bytes: int, gcn_arch_name: str | None) -> int:
    """The bytes a buffer must exceed to be read from memory, not a cache: the architecture's last-level cache where
    it is known and larger than the L2 torch reports, else that L2."""
    arch = amd_arch(gcn_arch_name)
    return max(l2_bytes, arch.last_level_cache) if arch else l2_bytes


def flush_bytes(last_level: int) -> int:
    """A buffer that, zeroed, evicts the inputs of the previous call: twice the last-level cache, at least 256 MB
    (what ``triton.testing.do_bench`` zeroes)."""
    return max(256 * MB, 2 * last_level)


def resident_workgroups(
    arch: AmdArch, wavefronts: int, vgprs: int | None, lds_bytes: int | None, waves_per_simd: int | None = None
) -> dict[str, int]:
    """Workgroups of `wavefronts` wavefronts a compute unit keeps resident, per resource that bounds them: its
    wavefront slots, the registers (the compiler's occupancy `waves_per_simd` where known, else the unified VGPR
    file's share of `vgprs` per lane) and the LDS. The occupancy is the least of them times `wavefronts` over
    ``max_waves_per_simd * SIMDS_PER_CU``."""
    found = {"wavefronts": arch.max_waves_per_simd * SIMDS_PER_CU // wavefronts}
    if waves_per_simd is None and vgprs:
        waves_per_simd = arch.vgprs_per_lane // (-(-vgprs // VGPR_GRANULE) * VGPR_GRANULE)
    if waves_per_simd is not None:
        found["registers"] = min(waves_per_simd, arch.max_waves_per_simd) * SIMDS_PER_CU // wavefronts
    if lds_bytes:
        found["LDS"] = arch.lds_per_cu // lds_bytes
    return found
