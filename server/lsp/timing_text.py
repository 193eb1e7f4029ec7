"""How measured times read in the editor (inlay hints, hovers, the candidates of an optimize): durations, rates,
and the captured calls that launched one kernel."""

from __future__ import annotations

from geak.evaluator import BenchResult, CallTiming


def format_ms(ms: float) -> str:
    if ms < 1.0:
        return f"{ms * 1000:.3g} µs"
    if ms < 1000:
        return f"{ms:.3g} ms"
    return f"{ms / 1000:.3g} s"


def format_rate(gbps: float) -> str:
    return f"{gbps / 1000:.2g} TB/s" if gbps >= 1000 else f"{gbps:.3g} GB/s"


def kernel_calls(bench: BenchResult, kernel: str) -> list[CallTiming]:
    """The captured calls that launched `kernel` (all calls when the profiler attributed none)."""
    mine = [c for c in bench.calls if kernel in c.kernel_ms]
    return mine or ([] if any(c.kernel_ms for c in bench.calls) else list(bench.calls))
