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


def against_base(bench: BenchResult, rev: str) -> str | None:
    """`1.21× faster than HEAD [1.18, 1.24]`, `1.25× slower than HEAD [1.22, 1.28]` (the interval as a slowdown),
    `within noise of HEAD [0.99, 1.01]` or `undecided against HEAD [0.93, 1.05]`: a paired timing's speedup, as the
    inlay hint says it. None: no speedup was measured."""
    s = bench.speedup
    if s is None:
        return None
    if s.significant and s.ratio >= 1:
        return f"{s.ratio:.2f}× faster than {rev} [{s.low:.2f}, {s.high:.2f}]"
    if s.significant:
        return f"{1 / s.ratio:.2f}× slower than {rev} [{1 / s.high:.2f}, {1 / s.low:.2f}]"
    if s.decided:
        return f"within noise of {rev} [{s.low:.2f}, {s.high:.2f}]"
    return f"undecided against {rev} [{s.low:.2f}, {s.high:.2f}]"


def slower_kernels(bench: BenchResult, kernels: list[str]) -> list[str]:
    """Of a file measured significantly slower than its base, the kernels whose own device time grew (summed over
    the captured calls of each side); the first kernel where the calls say nothing per kernel."""

    def total(calls: tuple[CallTiming, ...], kernel: str) -> float:
        return sum(c.kernel_ms.get(kernel, 0.0) for c in calls)

    grew = [
        k
        for k in kernels
        if total(bench.reference_calls, k) and total(bench.calls, k) > total(bench.reference_calls, k)
    ]
    return grew or kernels[:1]
