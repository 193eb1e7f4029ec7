"""The device's ceilings and noise floor, for "% of peak", the impossible-speed check and the speedup verdict.

Measured once per device in a job process that runs no user code (``job/device_ceilings.py``), turned into `Peaks` here
(the noise margin from its A/A rounds), then cached in ``peaks.json`` by the caller only. Every entry read back is
validated: a value outside what a GPU can do (a cache edited by hand or by a candidate, to switch the impossible-speed
check off) is discarded and measured again. The datasheet table is used only when measuring is turned off. No torch
here: the caller reads the cache.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from .results import DEFAULT_NOISE_MARGIN, Peaks
from .runtime_facts import RuntimeFacts
from .shared.sequential import RoundPlan
from .speedup import speedup_interval

CACHE_VERSION = "v8"  # v8: keyed by the device's compute units and memory (an MI300X partition), AMD's last-level cache
# The least margin a device's A/A measurement gives: the device's own A/A kernels can depart from 1 by a few tenths of a
# percent where a real file of short calls timed against itself departs by more than a percent, and would be called
# "slower" than itself against the narrower margin.
MIN_NOISE_MARGIN = DEFAULT_NOISE_MARGIN
MAX_NOISE_MARGIN = 0.05
AA_FACTOR = 3.0  # margin = this times the largest A/A departure from 1

# Datasheet figures: (bandwidth GB/s, dense 16-bit TFLOP/s, fp32 TFLOP/s, compute units of the whole device). Leads,
# not measurements. A device that shows fewer units (an MI300X in a CPX/DPX partition mode, an NVIDIA MIG slice) gets
# the figures in proportion. Rows are per device as torch shows it: each GCD of an MI250/MI250X is one device, with
# half of the module's figures (MI250X module: 3277 GB/s, 383 / 47.9 TFLOP/s, 220 CUs; MI250: 362 / 45.3, 208 CUs).
DATASHEET = {
    "H200": (4800.0, 989.0, 67.0, 132),
    "H100": (3350.0, 989.0, 67.0, 132),
    "A100": (2039.0, 312.0, 19.5, 108),
    "L40S": (864.0, 362.0, 91.6, 142),
    "MI355X": (8000.0, 2516.6, 157.3, 256),
    "MI350X": (8000.0, 2306.9, 144.2, 256),
    "MI300X": (5300.0, 1307.0, 163.4, 304),
    "MI325X": (6000.0, 1307.0, 163.4, 304),
    "MI250X": (1638.4, 191.5, 23.95, 110),
    "MI250": (1638.4, 181.0, 22.65, 104),
}
# Bounds for any GPU, and for a measurement against its datasheet figure (measured / datasheet).
_ABSOLUTE = {"bandwidth_gbps": (20.0, 30_000.0), "tflops_16bit": (1.0, 10_000.0), "tflops_fp32": (0.1, 2_000.0)}
_VS_DATASHEET = {"bandwidth_gbps": (0.25, 1.3), "tflops_16bit": (0.15, 1.3), "tflops_fp32": (0.1, 1.5)}


def cache_file() -> Path:
    root = os.environ.get("GEAK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "geak")
    return Path(root) / "peaks.json"


def cache_key(runtime: RuntimeFacts) -> str:
    """One entry per device model and software stack (from the pool's runtime info)."""
    return "|".join(
        [
            CACHE_VERSION,
            str(runtime.device),
            f"torch {runtime.torch_version}",
            f"triton {runtime.triton_version}",
            str(runtime.backend),
            # an MI300X partition (CPX: 38 CUs, NPS4: a quarter of the memory) is a device of its own
            f"{runtime.units} units",
            f"{runtime.memory_bytes} bytes",
        ]
    )


def read_cached(runtime: RuntimeFacts, path: Path | None = None) -> Peaks | None:
    """The cached measurement for this device, if there is one and it is believable."""
    entry = _read(path or cache_file()).get(cache_key(runtime))
    return validate(entry, str(runtime.device))


def store(runtime: RuntimeFacts, peaks: Peaks, path: Path | None = None) -> None:
    """Cache a measurement (only valid ones; a read-only home only costs a re-measurement next time)."""
    if validate(asdict(peaks), peaks.device) is None:
        return
    path = path or cache_file()
    data = _read(path)
    data[cache_key(runtime)] = asdict(peaks)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError:
        pass


def measured_peaks(found: Any, device: str) -> Peaks | None:
    """What a peaks job measured (``job/device_ceilings.measure``) as `Peaks` of `device`, with the noise margin of
    its A/A rounds; None when it measured nothing (datasheet mode) or nothing believable."""
    if not isinstance(found, dict) or "aa_rounds" not in found:
        return None
    try:
        margin = noise_margin(found["aa_rounds"])
    except (TypeError, ValueError, KeyError, ZeroDivisionError):
        return None
    entry = {f.name: found.get(f.name) for f in fields(Peaks)} | {"source": "measured", "noise_margin": margin}
    entry["units"] = found.get("units", 0)  # a job that does not say how many units the device shows
    return validate(entry, device)


def noise_margin(aa_rounds: list[dict[str, list[list[float]]]]) -> float:
    """The equivalence margin of a speedup on the device: `AA_FACTOR` times the largest departure from 1 of the
    A/A speedup intervals (two identical kernels, "a" against "b", per size), within the bounds `believable` accepts."""
    departures = []
    for rounds in aa_rounds:
        s = speedup_interval(rounds["a"], rounds["b"], RoundPlan.fixed(len(rounds["a"]), margin=0.0))
        departures.append(max(abs(s.low - 1.0), abs(s.high - 1.0), abs(s.ratio - 1.0)))
    return min(max(AA_FACTOR * max(departures), MIN_NOISE_MARGIN), MAX_NOISE_MARGIN)


def validate(entry: Any, device: str) -> Peaks | None:
    """`entry` as Peaks when it is a measurement of `device` within what a GPU can do, else None."""
    if not isinstance(entry, dict):
        return None
    names = {f.name for f in fields(Peaks)}
    if set(entry) != names or entry.get("device") != device or entry.get("source") != "measured":
        return None
    numbers = {k: v for k, v in entry.items() if k not in ("device", "source")}
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers.values()):
        return None
    peaks = Peaks(**entry)
    return peaks if believable(peaks) else None


def believable(peaks: Peaks) -> bool:
    """Whether measured ceilings are physically plausible for the named device."""
    sheet = _datasheet_row(peaks.device, peaks.units)
    for i, (name, (low, high)) in enumerate(_ABSOLUTE.items()):
        value = getattr(peaks, name)
        if not low <= value <= high:
            return False
        if sheet is not None:
            lo, hi = _VS_DATASHEET[name]
            if not lo * sheet[i] <= value <= hi * sheet[i]:
                return False
    if peaks.l2_gbps and not 0.3 * peaks.bandwidth_gbps <= peaks.l2_gbps <= 40 * peaks.bandwidth_gbps:
        return False
    if not 0 <= peaks.l2_bytes <= 1 << 30 or not 0 <= peaks.units <= 1 << 16:
        return False
    return MIN_NOISE_MARGIN <= peaks.noise_margin <= MAX_NOISE_MARGIN


def datasheet_peaks(name: str, l2: int = 0, units: int = 0) -> Peaks:
    row = _datasheet_row(name, units)
    if row is not None:
        model = next(m for m in DATASHEET if m.lower() in name.lower())
        return Peaks(name, *row, f"datasheet ({model})", l2, 0.0, DEFAULT_NOISE_MARGIN, units)
    return Peaks(name, 0.0, 0.0, 0.0, "unknown device", l2, 0.0, DEFAULT_NOISE_MARGIN, units)


def _datasheet_row(name: str, units: int = 0) -> tuple[float, float, float] | None:
    """The named model's figures, in proportion to `units` where the device shows fewer than the model has."""
    for model, (*figures, full) in DATASHEET.items():
        if model.lower() in name.lower():
            share = units / full if 0 < units < full else 1.0
            return figures[0] * share, figures[1] * share, figures[2] * share
    return None


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
