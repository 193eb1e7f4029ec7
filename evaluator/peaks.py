"""The device's ceilings, for "% of peak": measured once per device and cached, else a table per GPU model.

Measured: device-to-device copy bandwidth (bytes read + written) and dense matmul rates (16-bit and fp32) through
torch. The table holds datasheet figures and is used only when measuring is impossible or turned off.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import torch

from .results import Peaks

# Datasheet figures: (bandwidth GB/s, dense 16-bit TFLOP/s, fp32 TFLOP/s). Leads, not measurements.
DATASHEET = {
    "H200": (4800.0, 989.0, 67.0),
    "H100": (3350.0, 989.0, 67.0),
    "A100": (2039.0, 312.0, 19.5),
    "L40S": (864.0, 362.0, 91.6),
    "MI300X": (5300.0, 1307.0, 163.4),
    "MI325X": (6000.0, 1307.0, 163.4),
    "MI250X": (3277.0, 383.0, 47.9),
    "MI250": (3277.0, 362.0, 45.3),
}


def cache_file() -> Path:
    root = os.environ.get("GEAK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "geak")
    return Path(root) / "peaks.json"


def device_peaks(measure: bool = True) -> Peaks:
    """Peaks of the current GPU: cached measurement, fresh measurement, or the datasheet table."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    key = f"v2|{props.name}|torch {torch.__version__}|{getattr(torch.version, 'hip', None) or torch.version.cuda}"
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    cache = cache_file()
    cached = _read_cache(cache)
    if key in cached:
        return Peaks(**cached[key])
    if measure:
        peaks = Peaks(
            props.name,
            _copy_gbps(),
            max(_matmul_tflops(torch.bfloat16), _matmul_tflops(torch.float16)),
            _matmul_tflops(torch.float32),
            "measured",
            l2,
        )
        cached[key] = asdict(peaks)
        _write_cache(cache, cached)
        return peaks
    return datasheet_peaks(props.name, l2)


def datasheet_peaks(name: str, l2: int = 0) -> Peaks:
    for model, (bw, t16, t32) in DATASHEET.items():
        if model.lower() in name.lower():
            return Peaks(name, bw, t16, t32, f"datasheet ({model})", l2)
    return Peaks(name, 0.0, 0.0, 0.0, "unknown device", l2)


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home only costs a re-measurement next time


def _copy_gbps() -> float:
    import triton.testing

    n = 256 * 1024 * 1024  # 1 GiB of fp32: far beyond any L2
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def _matmul_tflops(dtype: torch.dtype) -> float:
    """Dense matmul rate through torch (cuBLAS / hipBLASLt): graph replay, so no launch gaps, allocation or
    cache flush get in the way of a ceiling."""
    import triton.testing

    n = 8192 if dtype != torch.float32 else 4096
    a = torch.randn(n, n, device="cuda", dtype=dtype)  # random data: zeros run faster than real inputs
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for _ in range(20):  # let the clocks ramp up
            torch.matmul(a, b, out=c)
        ms = triton.testing.do_bench_cudagraph(lambda: torch.matmul(a, b, out=c), rep=300, return_mode="median")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return 2 * n**3 / (ms * 1e-3) / 1e12
