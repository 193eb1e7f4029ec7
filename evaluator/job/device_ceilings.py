"""Worker-side measurement of the device's ceilings and noise floor, in a job process that runs no user code
(the caller turns it into `Peaks`, judges the A/A rounds and caches the result: ``peaks.py``).

* copy bandwidth (bytes read + written) of a 1 GiB device-to-device copy, L2 flushed by its size;
* copy bandwidth of data resident in the last-level cache (graph replay of copies of a buffer a quarter of its size:
  the L2, or on AMD Instinct GPUs the Infinity Cache behind it, ``shared/amd_devices``): the ceiling of hot-cache
  timings;
* dense matmul rates through torch (16-bit: the better of fp16 and bf16; fp32 without TF32);
* the A/A rounds: two identical, separately compiled Triton kernels timed against each other through the
  evaluator's own timing path at a small (graph) and a large (flushed) size; the caller's equivalence margin is a
  multiple of the largest departure from 1 of their speedup intervals (``peaks.noise_margin``).

Its kernels are compiled and loaded first, while the device is still shared (``warm_up``): the pool pauses every other
job while it measures, and compiling within that pause would lengthen it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import triton
import triton.language as tl

from ..shared.amd_devices import last_level_cache
from ..shared.sequential import RoundPlan
from . import timing

AA_ROUNDS = 15
AA_SIZES = (1 << 16, 1 << 26)


def measure(measure: bool = True) -> dict[str, Any]:
    """The current device's name, last-level cache size and compute units and, when `measure`, its ceilings and A/A
    rounds, as the caller reads them (``peaks.measured_peaks``)."""
    found = device_facts(torch.cuda.get_device_properties(torch.cuda.current_device()))
    l2 = found["l2_bytes"]
    if not measure:
        return found
    return {
        **found,
        "bandwidth_gbps": copy_gbps(),
        "tflops_16bit": max(matmul_tflops(torch.bfloat16), matmul_tflops(torch.float16)),
        "tflops_fp32": matmul_tflops(torch.float32),
        "l2_gbps": l2_copy_gbps(l2),
        "aa_rounds": aa_rounds(),
    }


def device_facts(props: Any) -> dict[str, Any]:
    """The name, the last-level cache (what a hot timing's data fits in) and the compute units of a device, from its
    torch properties."""
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    cache = last_level_cache(l2, getattr(props, "gcnArchName", None))
    return {"device": props.name, "l2_bytes": cache, "units": int(getattr(props, "multi_processor_count", 0) or 0)}


def warm_up() -> None:
    """Load what measuring runs, while the device is still shared (``job_process.run_peaks``), so that the pool pauses
    every other job for the measurements alone: the A/A kernels compiled, the random fill's and the copy's kernels
    and, per type, the BLAS handle and the product kernels of the sizes measured, each run once."""
    x = torch.randn(AA_SIZES[0], device="cuda")
    torch.empty_like(x).copy_(x)
    for kernel in (_aa_scale_a, _aa_scale_b):
        kernel[(triton.cdiv(x.numel(), 1024),)](x, torch.empty_like(x), x.numel(), BLOCK=1024)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        a, b = _matmul_operands(dtype)
        with _no_tf32():
            torch.matmul(a, b)
    torch.cuda.synchronize()


def copy_gbps() -> float:
    import triton.testing

    n = 256 * 1024 * 1024  # 1 GiB of fp32: four times the largest last-level cache (256 MB)
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def l2_copy_gbps(l2_bytes: int) -> float:
    """Copy bandwidth of a buffer that stays in the last-level cache of `l2_bytes` (0 when its size is unknown)."""
    import triton.testing

    if l2_bytes <= 0:
        return 0.0
    n = l2_probe_elements(l2_bytes)
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    repeat = 100

    def copies() -> None:
        for _ in range(repeat):
            dst.copy_(src)

    ms = triton.testing.do_bench_cudagraph(copies, rep=100, return_mode="median") / repeat
    return 2 * n * 4 / (ms * 1e-3) / 1e9


def l2_probe_elements(l2_bytes: int) -> int:
    """fp32 elements of each of the L2 probe's two buffers: together a quarter of the cache, enough bytes that a copy
    is timed by the cache's bandwidth rather than by its launch."""
    return max(1 << 16, l2_bytes // 4 // 2 // 4)


def matmul_tflops(dtype: torch.dtype) -> float:
    """Dense matmul rate through torch (cuBLAS / hipBLASLt): graph replay, so no launch gaps, allocation or
    cache flush get in the way of a ceiling."""
    import triton.testing

    a, b = _matmul_operands(dtype)
    c = torch.empty_like(a)
    with _no_tf32():
        for _ in range(20):  # let the clocks ramp up
            torch.matmul(a, b, out=c)
        # ten replays of a graph of ~100 ms of products (a longer graph would take most of the peaks' measuring time)
        ms = triton.testing.do_bench_cudagraph(lambda: torch.matmul(a, b, out=c), rep=100, return_mode="median")
    return 2 * a.shape[0] ** 3 / (ms * 1e-3) / 1e12


def _matmul_operands(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    n = 8192 if dtype != torch.float32 else 4096
    # random data: zeros run faster than real inputs
    return torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)


@contextlib.contextmanager
def _no_tf32() -> Iterator[None]:
    """fp32 products in fp32, not TF32, meanwhile."""
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


@triton.jit
def _aa_scale_a(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 1.5 + 1.0, mask=mask)


@triton.jit
def _aa_scale_b(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 1.5 + 1.0, mask=mask)


def aa_rounds(rep_ms: float = 25.0) -> list[dict[str, list[list[float]]]]:
    """Per size, the interleaved timing rounds of two identical kernels ("a" and "b"), from which the caller derives
    the equivalence margin of a speedup on this device."""
    measured = []
    for n in AA_SIZES:
        x = torch.randn(n, device="cuda")
        base = ((x, torch.empty_like(x)), {})
        prepared = {}
        for name, kernel in (("a", _aa_scale_a), ("b", _aa_scale_b)):

            def fn(x, out, kernel=kernel):
                kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)

            sets = timing.InputSets(base, 2)
            sets.call(fn, 0)  # compile
            prepared[name] = (fn, sets, timing.estimate_ms(lambda fn=fn, sets=sets: sets.call(fn, 0)))
        fastest = min(estimate for _, _, estimate in prepared.values())
        per_graph = timing.graph_calls(fastest, 2) if fastest < timing.GRAPH_BELOW_MS else None
        timers = {
            name: [timing.make_timer(fn, sets, estimate, rep_ms, per_graph)]
            for name, (fn, sets, estimate) in prepared.items()
        }
        rounds = timing.interleaved(timers, RoundPlan.fixed(AA_ROUNDS))
        measured.append({"a": rounds["a"], "b": rounds["b"]})
    return measured
