"""What running a vendor's profiler over a profile job takes, whichever profiler it is (Nsight Compute:
``kernel_profile``; rocprofv3: ``rocprof``): the target process it starts (``profile_target``), the run itself with
the device alone, and its rows matched with the launches the target recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..shared.protocol import ProfileJob

MAX_PROFILED = 64  # launches profiled at most in one job (each is replayed for its counters)
SPEC_FILE, LAUNCHES_FILE = "profile_spec.json", "profile_launches.json"
OUTPUT_TAIL = 2000  # characters of the profiler's output kept for an error message


def target_command(job: ProfileJob) -> list[str]:
    """The profiled process: ``profile_target`` over the job's spec, written into its scratch directory."""
    spec = Path(job.scratch) / SPEC_FILE
    spec.write_text(json.dumps(asdict(job)))
    return [sys.executable, "-m", f"{__package__}.profile_target", str(spec)]


def run_profiler(command: list[str], job: ProfileJob, send, stage: str) -> dict[str, Any]:
    """Run a profiler's `command` with the device alone: {"calls" (the target's record of each call's launches),
    "status", "output" (its tail)}, or {"error": ...}."""
    from . import device_grant

    scratch = Path(job.scratch)
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    send({"event": "progress", "stage": stage})
    device_grant.DEVICE_GRANTS.wait_alone()
    try:
        done = subprocess.run(
            command, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=job.timeout_s, text=True, errors="replace",
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"the profiler's run took over its limit of {job.timeout_s:g} s"}
    finally:
        device_grant.DEVICE_GRANTS.release()
    output = done.stdout[-OUTPUT_TAIL:]
    try:
        launched = json.loads((scratch / LAUNCHES_FILE).read_text())
    except (OSError, ValueError):
        return {"error": f"the profiled run did not finish (exit status {done.returncode}):\n{output}"}
    if launched.get("error"):
        return {"error": f"the profiled run failed: {launched['error']}", "error_detail": launched.get("detail")}
    return {"calls": launched.get("calls") or [], "status": done.returncode, "output": output}


def joined(calls: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call's launches (the target's record: kernel names and compiled hashes, in launch order) with the
    profiler's rows, matched in order: the profiler saw exactly these launches, up to its `MAX_PROFILED`."""
    remaining = iter(rows)
    out, in_step = [], True
    for call in calls:
        launches = []
        for launch in call.get("launches") or []:
            row = next(remaining, None) if in_step else None
            if row is None or row["kernel"] != launch.get("kernel"):
                in_step = False  # past the profiler's cap, or out of step: nothing more is matched
                break
            launches.append({**row, "hash": str(launch.get("hash") or "")})
        out.append({"signature": str(call.get("signature") or ""), "launches": launches})
    return out
