"""The profile job: each timed call's kernels measured by the vendor's profiler, inside the job's sandbox. Nsight
Compute (`ncu`) on NVIDIA, rocprofv3 on ROCm (``rocprof_profile``) starts a process of its own (``profile_target``)
that captures the file's calls as a timing does and runs each once more, profiled; every launch of one of the file's
kernels there is replayed for its counters: achieved occupancy (warps resident per active cycle over the SM's
maximum), the occupancy its resources allow, DRAM and SM throughput against their peaks (rocprofv3: the bytes the
kernel fetched and wrote, which the caller sets against the device's bandwidth, and VALU busy), its duration and its
waves of thread blocks (workgroups).

What it reports is for people and the model (the hover, the optimize report, the optimizer's prompt), never a
verdict: the caller bounds every number it reads. The profiler leaves the GPU's clocks as it finds them, and the
job has the device alone while it runs (its replays would disturb other timings, and theirs its counters)."""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..shared.protocol import ProfileJob
from .profiler_run import MAX_PROFILED, joined, run_profiler, target_command
from .rocprof import rocprof_profile

# Nsight Compute's metric -> the report's field
METRICS = {
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__time_duration.sum": "duration_ns",
    "launch__waves_per_multiprocessor": "waves",
}
CSV_FILE = "profile.csv"


def find_ncu() -> str | None:
    """Nsight Compute's command line, where this machine has it: on PATH, in the CUDA toolkit, or in a standalone
    installation under /opt/nvidia."""
    found = shutil.which("ncu")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [os.path.join(r, "bin", "ncu") for r in roots if r]
    candidates += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def run_profile(job: ProfileJob, info: Any, send) -> dict[str, Any]:
    """{"profiler", "calls": [{"signature", "launches": [{"kernel", "hash", metrics...}]}]}, {"unavailable": why}
    where no profiler can run here, or {"error": ...}."""
    kernels = sorted({k for m in job.modules for k in m["kernels"]})
    if not kernels:
        return {"error": "the file has no Triton kernel to profile"}
    if info.backend == "rocm":
        return rocprof_profile(job, kernels, send)
    if info.backend != "cuda":
        return {"unavailable": f"no vendor profiler runs on {info.backend} (Nsight Compute on NVIDIA, rocprofv3 on "
                "AMD GPUs)"}  # fmt: skip
    ncu = find_ncu()
    if ncu is None:
        return {"unavailable": "Nsight Compute (ncu) is not installed where jobs run (looked for on PATH, in "
                "CUDA_HOME/bin, /usr/local/cuda/bin and /opt/nvidia/nsight-compute)"}  # fmt: skip
    scratch = Path(job.scratch)
    command = [
        ncu,
        "--profile-from-start", "off",  # only what the target brackets: each call's profiled run
        "--clock-control", "none",  # the GPU's clocks as they are: never locked for others on the machine
        "--metrics", ",".join(METRICS),
        "--kernel-name", "regex:^(" + "|".join(re.escape(k) for k in kernels) + ")$",
        "--launch-count", str(MAX_PROFILED),
        "--csv",
        "--log-file", str(scratch / CSV_FILE),
        *target_command(job),
    ]  # fmt: skip
    ran = run_profiler(command, job, send, "profiling the kernels with Nsight Compute")
    if "error" in ran:
        return ran
    try:
        rows = profiled_launches((scratch / CSV_FILE).read_text(errors="replace"))
    except OSError:
        rows = []
    if not rows:
        return {"error": f"Nsight Compute measured no kernel (exit status {ran['status']}):\n{ran['output']}"}
    return {"profiler": _version(ncu), "calls": joined(ran["calls"], rows)}


def profiled_launches(text: str) -> list[dict[str, Any]]:
    """The launches of Nsight Compute's CSV (its "details" page: one row per launch and metric, after the lines it
    writes of itself), in profiling order: [{"kernel", metric fields...}]."""
    start = text.find('"ID","')
    if start < 0:
        return []
    launches: dict[str, dict[str, Any]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        field = METRICS.get(row.get("Metric Name") or "")
        entry = launches.setdefault(row.get("ID") or "", {"kernel": row.get("Kernel Name") or ""})
        if field is not None:
            entry[field] = _number(row.get("Metric Value"))
    return [launches[k] for k in sorted(launches, key=lambda k: int(k) if k.isdigit() else -1)]


def _number(value: str | None) -> float | None:
    try:
        return float((value or "").replace(",", ""))
    except ValueError:
        return None


def _version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "Nsight Compute"
    found = re.search(r"Version ([\w.\-() ]+)", out)
    return f"Nsight Compute {found.group(1).strip()}" if found else "Nsight Compute"
