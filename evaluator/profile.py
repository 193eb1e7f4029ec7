"""The profile stage, the caller's side: the profile job of one file (``job/kernel_profile`` runs the vendor's
profiler over its captured calls) and its report read back, each kernel's launches folded into one `KernelProfile`.
The job runs the user's code, so its report is bounded here: only the file's own kernels, percentages within
0-100, durations and counts that are numbers. It informs people and the model; it never decides a verdict."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .peaks import datasheet_peaks
from .pool import JobOutcome
from .results import KernelProfile, ProfileResult
from .shared.protocol import ProfileJob
from .triton_file import TritonFile

if TYPE_CHECKING:
    from .options import EvalOptions

def profile_job(module: dict[str, Any], owner: TritonFile, options: EvalOptions, job_dir: Path,
                cache: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The job for `module` (written into `job_dir`, beside the neutral copy of the job side its profiler's process
    imports)."""
    functions = owner.timed_functions
    return asdict(
        ProfileJob(
            kind="profile",
            scratch=str(job_dir),
            modules=[module],
            functions=functions,
            pytest_functions=owner.under_pytest(functions),
            seed=options.seed,
            max_calls=options.max_bench_calls,
            timeout_s=options.timeout_s,
            cache=cache,
        )
    )


def profile_result(
    outcome: JobOutcome, label: str, owner: TritonFile, device: str | None, units: int | None = None
) -> ProfileResult:
    """The job's report read back. A profiler that counts the bytes a launch moved rather than its share of the peak
    (rocprofv3) has them set against the datasheet bandwidth of `device` (its share where it shows `units` of its
    compute units), the peak Nsight Compute's percentage is of."""
    base = {"file": label, "device": device}
    if outcome.status != "ok" or outcome.result is None:
        return ProfileResult(ok=False, message=f"the profile job failed: {outcome.message}", **base)
    result = outcome.result
    if result.get("unavailable"):
        return ProfileResult(ok=False, unavailable=True, message=str(result["unavailable"])[:500], **base)
    if result.get("worker_error") or result.get("error"):
        message = str(result.get("error") or "internal evaluator error:\n" + str(result["worker_error"]))
        detail = result.get("error_detail")
        if isinstance(detail, dict) and detail.get("message"):
            message += f": {detail['message']}"
        return ProfileResult(ok=False, message=message[:4000], **base)
    known = {k.name for k in owner.kernels}
    launches: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for call in result.get("calls") or []:
        for launch in (call.get("launches") or []) if isinstance(call, dict) else []:
            if isinstance(launch, dict) and launch.get("kernel") in known:
                launches[(str(launch["kernel"]), str(launch.get("hash") or "")[:128])].append(launch)
    bandwidth = datasheet_peaks(device or "", units=units or 0).bandwidth_gbps or None
    kernels = tuple(_folded(kernel, digest, runs, bandwidth) for (kernel, digest), runs in launches.items())
    if not kernels:
        return ProfileResult(ok=False, message="the profiler measured none of the file's kernels", **base)
    profiler = str(result.get("profiler") or "the vendor's profiler")[:100]
    launched = sum(k.launches for k in kernels)
    return ProfileResult(
        ok=True,
        message=f"{profiler}: {launched} launch(es) of {len(kernels)} compiled kernel(s) profiled",
        profiler=profiler,
        kernels=kernels,
        **base,
    )


def _folded(kernel: str, digest: str, runs: list[dict[str, Any]], bandwidth: float | None) -> KernelProfile:
    """One kernel's launches as one profile: each figure weighted by the launches' durations (equally where none
    says its duration); the DRAM share from the bytes moved per second where the profiler gave those, against
    `bandwidth` (GB/s)."""
    durations = [_bounded(r.get("duration_ns"), 1e15) for r in runs]
    weights = [d if d else 1.0 for d in durations]

    def mean(key: str, top: float) -> float | None:
        pairs = [(v, w) for r, w in zip(runs, weights, strict=True) if (v := _bounded(r.get(key), top)) is not None]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    occupancy, allowed = mean("achieved_occupancy_pct", 100.0), mean("theoretical_occupancy_pct", 100.0)
    dram = mean("dram_pct", 100.0)
    moved = mean("dram_gbps", 1e6)
    if dram is None and moved is not None and bandwidth:
        dram = _bounded(100 * moved / bandwidth, 100.0)
    known_durations = [d for d in durations if d is not None]
    return KernelProfile(
        kernel=kernel,
        hash=digest,
        launches=len(runs),
        achieved_occupancy=None if occupancy is None else occupancy / 100,
        theoretical_occupancy=None if allowed is None else allowed / 100,
        dram_pct=dram,
        sm_pct=mean("sm_pct", 100.0),
        duration_us=sum(known_durations) / len(known_durations) / 1e3 if known_durations else None,
        waves=mean("waves", 1e9),
    )


def _bounded(value: Any, top: float) -> float | None:
    """A number the job reported, within [0, `top`]; None otherwise."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value) if 0 <= value <= top else None
