"""Why a kernel is slow: its compile facts against the SM's (AMD: the compute unit's) limits (occupancy), what the
vendor's profiler measured of it where it ran (achieved occupancy, DRAM and SM/CU throughput), and each timed call
against the device's roofline (memory-, compute- or latency-bound). Pure functions of plain data, on the caller's
side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .results import CallCost, CallTiming, CompiledKernelFacts, KernelProfile, Peaks, ProfileResult
from .shared.amd_devices import SIMDS_PER_CU, AmdArch, resident_workgroups

LAUNCH_BOUND_MS = 0.01  # a call under ~10 µs is bound by launching, whatever its tiles
NEAR_CEILING = 0.4  # a call achieving this share of a ceiling is bound by it; below both, by latency
MAX_BLOCKS_PER_SM = 32  # resident thread blocks per SM on NVIDIA Hopper and Ampere
REGISTER_GRANULE = 256  # registers are allocated per warp in units of this many


def kernel_facts(raw: Mapping[str, Any], limits: Mapping[str, int]) -> CompiledKernelFacts:
    """A job's report of one compiled kernel (``job/screening``), with the occupancy its resources allow."""

    def number(key: str) -> int | None:
        value = raw.get(key)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None

    facts = CompiledKernelFacts(
        kernel=str(raw.get("kernel", "?"))[:200],
        n_regs=number("n_regs"),
        n_spills=number("n_spills"),
        shared_bytes=number("shared"),
        num_warps=number("num_warps"),
        num_stages=number("num_stages"),
        hash=str(raw.get("hash") or "")[:128],
        waves_per_simd=number("waves_per_simd"),
        scratch_bytes=number("scratch_bytes"),
        amd="max_waves_per_simd" in limits,
    )
    occupancy, limited_by = (amd_occupancy if facts.amd else occupancy_of)(facts, limits)
    return replace(facts, occupancy=occupancy, limited_by=limited_by)


def occupancy_of(facts: CompiledKernelFacts, limits: Mapping[str, int]) -> tuple[float | None, str | None]:
    """Resident warps per SM over the SM's maximum, from the kernel's warps, registers and shared memory (the CUDA
    occupancy calculator's rule, without its finer allocation granularities), and which resource bounds it."""
    warp = limits.get("warp_size") or 32
    max_threads = limits.get("max_threads_per_multi_processor")
    if not facts.num_warps or not max_threads:
        return None, None
    max_warps = max_threads // warp
    blocks = {"warps": max_warps // facts.num_warps}
    regs_per_sm = limits.get("regs_per_multiprocessor")
    if facts.n_regs and regs_per_sm:
        per_warp = -(-facts.n_regs * warp // REGISTER_GRANULE) * REGISTER_GRANULE
        blocks["registers"] = regs_per_sm // (per_warp * facts.num_warps)
    shared_per_sm = limits.get("shared_memory_per_multiprocessor")
    if facts.shared_bytes and shared_per_sm:
        blocks["shared memory"] = shared_per_sm // facts.shared_bytes
    limited_by = min(blocks, key=lambda k: blocks[k])
    resident = min(min(blocks.values()), MAX_BLOCKS_PER_SM)
    return min(1.0, resident * facts.num_warps / max_warps), limited_by


def amd_occupancy(facts: CompiledKernelFacts, limits: Mapping[str, int]) -> tuple[float | None, str | None]:
    """Resident wavefronts per compute unit over its maximum, counted in workgroups of `num_warps` wavefronts spread
    over its SIMDs (``amd_devices.resident_workgroups``), and which resource bounds them."""
    waves, per_lane, lds = limits.get("max_waves_per_simd"), limits.get("vgprs_per_lane"), limits.get("lds_per_cu")
    if not facts.num_warps or not waves or not per_lane or not lds:
        return None, None
    arch = AmdArch("", 0, lds, per_lane, waves)
    workgroups = resident_workgroups(arch, facts.num_warps, facts.n_regs, facts.shared_bytes, facts.waves_per_simd)
    limited_by = min(workgroups, key=lambda k: workgroups[k])
    return min(1.0, workgroups[limited_by] * facts.num_warps / (waves * SIMDS_PER_CU)), limited_by


def with_profile(
    kernels: Sequence[CompiledKernelFacts], profile: ProfileResult | None
) -> tuple[CompiledKernelFacts, ...]:
    """Each kernel's compile facts with what the profiler measured of the same compiled kernel: the same hash, or,
    where either side has none, the same name if only one profiled kernel has it."""
    if profile is None or not profile.ok:
        return tuple(kernels)
    by_hash = {(p.kernel, p.hash): p for p in profile.kernels if p.hash}
    by_name: dict[str, list[KernelProfile]] = {}
    for p in profile.kernels:
        by_name.setdefault(p.kernel, []).append(p)

    def measured(k: CompiledKernelFacts) -> KernelProfile | None:
        if k.hash and (k.kernel, k.hash) in by_hash:
            return by_hash[(k.kernel, k.hash)]
        named = by_name.get(k.kernel) or []
        return named[0] if len(named) == 1 and (not k.hash or not named[0].hash) else None

    return tuple(replace(k, measured=measured(k) or k.measured) for k in kernels)


def call_cost(
    signature: str, bytes_moved: int, flops: int | None, flops_from: str | None, ms: float | None, peaks: Peaks | None
) -> CallCost:
    """Where one call sits: against the copy bandwidth if it does fewer FLOPs per byte than the device's ridge point
    (or declares none), else against the matmul rate; below ``NEAR_CEILING`` of that ceiling (or under
    ``LAUNCH_BOUND_MS``) it is latency-bound: too little parallel work per launch, or too many short launches."""
    base = {"signature": signature, "bytes_moved": bytes_moved, "flops": flops, "flops_from": flops_from, "ms": ms}
    if ms is None or ms <= 0 or peaks is None:
        return CallCost(**base, pct_peak_bw=None, pct_peak_flops=None, bound="unknown", why="not timed")
    seconds = ms * 1e-3
    bw = bytes_moved / seconds / 1e9 / peaks.bandwidth_gbps if peaks.bandwidth_gbps else None
    fl = flops / seconds / 1e12 / peaks.tflops_16bit if flops and peaks.tflops_16bit else None
    pct = {"pct_peak_bw": _pct(bw), "pct_peak_flops": _pct(fl)}
    ridge = peaks.tflops_16bit * 1e12 / (peaks.bandwidth_gbps * 1e9) if peaks.bandwidth_gbps else None
    intensity = flops / bytes_moved if flops and bytes_moved else None
    compute_side = intensity is not None and ridge is not None and intensity > ridge
    side, share = ("compute", fl) if compute_side else ("memory", bw)
    where = f"{100 * (share or 0):.0f}% of the {'matmul rate' if compute_side else 'copy bandwidth'}"
    if intensity is not None:
        where += f" at {intensity:.1f} FLOP/byte (ridge {ridge:.0f})"
    if ms < LAUNCH_BOUND_MS:
        return CallCost(**base, **pct, bound="latency", why=f"{ms * 1e3:.1f} µs a call: launch-bound ({where})")
    if share is not None and share >= NEAR_CEILING:
        return CallCost(**base, **pct, bound=side, why=f"{side}-bound: {where}")
    warps = "wavefronts" if peaks.device.startswith("AMD") else "warps"  # torch names every AMD GPU "AMD ..."
    why = f"latency-bound: only {where} (too few programs in flight, or stalls that more {warps} or stages would hide)"
    return CallCost(**base, **pct, bound="latency", why=why)


def timing_cost(call: CallTiming, peaks: Peaks | None) -> CallCost:
    """A benchmarked call (``bench``) on the roofline: its bytes, its FLOPs where declared, its median time."""
    flops = int(call.tflops * 1e12 * call.median_ms * 1e-3) if call.tflops else None
    return call_cost(call.signature, call.bytes_moved, flops, "declared" if flops else None, call.median_ms, peaks)


def _pct(share: float | None) -> float | None:
    return None if share is None else 100 * share


def kernel_line(k: CompiledKernelFacts) -> str:
    """What the compiler made of one kernel, in words: ``8 warps, 3 stages, 128 registers/thread, 12 spilled, 64 KB
    shared, occupancy 25% (registers)`` (AMD: ``4 wavefronts, 2 stages, 112 VGPRs/lane, 32 KB LDS, occupancy 50%
    (registers)``), and what the profiler measured of it where it ran (``measured_line``)."""
    unit, registers, shared = ("wavefronts", "VGPRs/lane", "LDS") if k.amd else ("warps", "registers/thread", "shared")
    parts = [
        f"{k.num_warps} {unit}" if k.num_warps else "",
        f"{k.num_stages} stages" if k.num_stages else "",
        f"{k.n_regs} {registers}" if k.n_regs is not None else "",
        f"{k.n_spills} spilled" if k.n_spills else "",
        f"{k.scratch_bytes} B scratch/lane" if k.scratch_bytes else "",
        f"{k.shared_bytes / 1024:.0f} KB {shared}" if k.shared_bytes else "",
        f"occupancy {100 * k.occupancy:.0f}% ({k.limited_by})" if k.occupancy is not None else "",
        measured_line(k),
    ]
    return ", ".join(p for p in parts if p)


def measured_line(k: CompiledKernelFacts) -> str:
    """What the profiler measured of a kernel, in words: ``measured: achieved occupancy 62%, DRAM 85% of peak,
    SM 6%`` (AMD, from rocprofv3: ``VALU busy 6%``); "" where it did not run."""
    m = k.measured
    if m is None:
        return ""
    parts = [
        f"achieved occupancy {100 * m.achieved_occupancy:.0f}%" if m.achieved_occupancy is not None else "",
        f"DRAM {m.dram_pct:.0f}% of peak" if m.dram_pct is not None else "",
        f"{'VALU busy' if k.amd else 'SM'} {m.sm_pct:.0f}%" if m.sm_pct is not None else "",
    ]
    said = ", ".join(p for p in parts if p)
    return f"measured: {said}" if said else ""


def summary(calls: Sequence[CallCost], kernels: Sequence[CompiledKernelFacts]) -> str:
    """One line for a person (hover, report) and for the model (the optimizer prompt): where the slowest call sits,
    and what the compiler made of each kernel."""
    parts = []
    timed = [c for c in calls if c.ms]
    if timed:
        slowest = max(timed, key=lambda c: c.ms or 0)
        parts.append(f"{slowest.signature}: {slowest.why}")
    parts += [f"{k.kernel}: {line}" for k in kernels if (line := kernel_line(k))]
    return "; ".join(parts)
