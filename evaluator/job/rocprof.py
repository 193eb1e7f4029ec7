"""The profile job on ROCm: rocprofv3 (ROCm's rocprofiler-sdk) counts each profiled launch of the file's kernels, in
the regions ``profile_target`` brackets with ROCTx (``--selected-regions``), one pass per group of counters (each
pass runs the target again: its launches are the same). Its counter CSV (one row per dispatch and counter, with the
dispatch's grid, workgroup, registers and LDS) becomes the facts Nsight Compute gives on NVIDIA: achieved occupancy
(``OccupancyPercent``), the occupancy the kernel's resources allow and its waves of workgroups
(``amd_devices.resident_workgroups``), the bytes it moved (``FETCH_SIZE`` + ``WRITE_SIZE``, in KB, over its duration:
the caller sets them against the device's bandwidth), VALU busy in the place of SM throughput, and its duration."""

from __future__ import annotations

import csv
import glob
import math
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..shared.amd_devices import SIMDS_PER_CU, amd_arch, resident_workgroups
from ..shared.protocol import ProfileJob
from .profiler_run import MAX_PROFILED, joined, run_profiler, target_command

# one pass per line: counters that one pass may not fit together are collected in passes of their own
PASSES = (("OccupancyPercent", "VALUBusy"), ("FETCH_SIZE", "WRITE_SIZE"))
COUNTERS = {"OccupancyPercent": "achieved_occupancy_pct", "VALUBusy": "sm_pct"}
OUTPUT_DIR, INPUT_FILE = "rocprof", "rocprof_counters.txt"
WAVE_SIZE = 64


def find_rocprofv3() -> str | None:
    """rocprofv3, where this machine has it: on PATH, or in ROCm's bin folder (ROCM_PATH, /opt/rocm)."""
    found = shutil.which("rocprofv3")
    if found:
        return found
    roots = [os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"), "/opt/rocm"]
    return next((c for r in roots if r and os.access(c := os.path.join(r, "bin", "rocprofv3"), os.X_OK)), None)


def rocprof_profile(job: ProfileJob, kernels: list[str], send) -> dict[str, Any]:
    """What ``kernel_profile.run_profile`` returns for `kernels` (the file's, by name), measured by rocprofv3."""
    import torch

    rocprof = find_rocprofv3()
    if rocprof is None:
        return {"unavailable": "rocprofv3 is not installed where jobs run (looked for on PATH, in ROCM_PATH/bin, "
                "HIP_PATH/bin and /opt/rocm/bin)"}  # fmt: skip
    scratch = Path(job.scratch)
    (scratch / INPUT_FILE).write_text("".join(f"pmc: {' '.join(p)}\n" for p in PASSES))
    command = [
        rocprof,
        "-i", str(scratch / INPUT_FILE),
        "--selected-regions",  # only what the target brackets: each call's profiled run
        "--kernel-include-regex", "^(" + "|".join(re.escape(k) for k in kernels) + ")$",
        "--output-format", "csv",
        "-d", str(scratch / OUTPUT_DIR),
        "-o", "profile",
        "--", *target_command(job),
    ]  # fmt: skip
    ran = run_profiler(command, job, send, "profiling the kernels with rocprofv3")
    if "error" in ran:
        return ran
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    texts = [Path(p).read_text(errors="replace") for p in counter_files(scratch / OUTPUT_DIR)]
    rows = dispatches(texts, getattr(props, "gcnArchName", None), int(props.multi_processor_count))[:MAX_PROFILED]
    if not rows:
        return {"error": f"rocprofv3 measured no kernel (exit status {ran['status']}):\n{ran['output']}"}
    return {"profiler": _version(rocprof), "calls": joined(ran["calls"], rows)}


def counter_files(root: Path) -> list[str]:
    """The counter CSVs rocprofv3 wrote under `root`, one per pass (``pass_N/`` or ``pmc_N/`` folders, or the root
    itself where one pass ran), in pass order."""
    found = glob.glob(str(root / "**" / "*counter_collection.csv"), recursive=True)
    return sorted(found, key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p)])


def dispatches(texts: list[str], arch_name: str | None, units: int) -> list[dict[str, Any]]:
    """The launches of rocprofv3's counter CSVs (one per pass, each seeing the same launches), in dispatch order:
    [{"kernel", "achieved_occupancy_pct", "theoretical_occupancy_pct", "sm_pct", "dram_gbps", "duration_ns",
    "waves"}], each figure where its counters were measured."""
    passes = [_pass(text) for text in texts]
    passes = [p for p in passes if p]
    if not passes:
        return []
    merged = []
    for launches in zip(*passes, strict=False):  # a pass that saw fewer launches ends the matched ones
        if len({launch["kernel"] for launch in launches}) != 1:
            break
        merged.append(_facts(launches, arch_name, units))
    return merged


def _pass(text: str) -> list[dict[str, Any]]:
    """One pass's dispatches in order, each with its counters."""
    by_dispatch: dict[int, dict[str, Any]] = {}
    counters: dict[int, dict[str, float]] = defaultdict(dict)
    for row in csv.DictReader(text.splitlines()):
        dispatch = _int(row.get("Dispatch_Id"))
        value = _float(row.get("Counter_Value"))
        if dispatch is None:
            continue
        by_dispatch.setdefault(dispatch, row)
        if value is not None:
            counters[dispatch][row.get("Counter_Name") or ""] = value
    return [{"row": by_dispatch[d], "kernel": _kernel(by_dispatch[d]), "counters": counters[d]} for d in sorted(
        by_dispatch)]  # fmt: skip


def _facts(launches: tuple[dict[str, Any], ...], arch_name: str | None, units: int) -> dict[str, Any]:
    """One launch's facts from its rows in every pass (each pass timed its own run of it)."""
    row = launches[0]["row"]
    facts: dict[str, Any] = {"kernel": launches[0]["kernel"], "duration_ns": _duration(row)}
    for launch in launches:
        counters = launch["counters"]
        facts |= {ours: counters[theirs] for theirs, ours in COUNTERS.items() if theirs in counters}
        duration = _duration(launch["row"])
        if duration and "FETCH_SIZE" in counters and "WRITE_SIZE" in counters:
            facts["dram_gbps"] = (counters["FETCH_SIZE"] + counters["WRITE_SIZE"]) * 1024 / duration
    arch = amd_arch(arch_name)
    grid, group = _int(row.get("Grid_Size")), _int(row.get("Workgroup_Size"))
    if arch is None or not grid or not group or units <= 0:
        return facts
    wavefronts = math.ceil(group / WAVE_SIZE)
    vgprs = (_int(row.get("VGPR_Count")) or 0) + (_int(row.get("Accum_VGPR_Count")) or 0)
    resident = min(resident_workgroups(arch, wavefronts, vgprs or None, _int(row.get("LDS_Block_Size"))).values())
    slots = arch.max_waves_per_simd * SIMDS_PER_CU
    facts["theoretical_occupancy_pct"] = min(100.0, 100 * resident * wavefronts / slots)
    if resident > 0:
        facts["waves"] = math.ceil(grid / group) / (units * resident)
    return facts


def _duration(row: dict[str, Any]) -> int | None:
    start, end = _int(row.get("Start_Timestamp")), _int(row.get("End_Timestamp"))
    return end - start if start is not None and end is not None and end > start else None


def _kernel(row: dict[str, Any]) -> str:
    """The kernel's name as the file calls it (rocprofv3 may give a code object's symbol, name.kd)."""
    name = str(row.get("Kernel_Name") or "")
    return name.removesuffix(".kd")


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _version(rocprof: str) -> str:
    try:
        out = subprocess.run([rocprof, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "rocprofv3"
    found = re.search(r"(\d+\.\d+(?:\.\d+)?)", out)
    return f"rocprofv3 {found.group(1)}" if found else "rocprofv3"
