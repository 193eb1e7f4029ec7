"""Worker-side GPU timing of captured calls (CUDA and ROCm through `torch.cuda`).

* Calls over ``GRAPH_BELOW_MS`` are timed with ``triton.testing.do_bench`` (median, L2 flushed before each call).
* Shorter calls are timed by replaying a CUDA/HIP graph of many calls (hot L2; launch gaps removed), which is far
  steadier for small kernels; if the call cannot be captured (host syncs, side streams) do_bench is used.
* A guard re-times the call with a device-wide synchronize: work that escapes the timed stream (side streams,
  threads) shows up there and the timing is rejected.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

GRAPH_BELOW_MS = 0.05
GRAPH_TARGET_MS = 2.0


class TimingFooled(RuntimeError):
    """The measured time cannot be right (work escaped the timed stream, or a thread outlived the call)."""


@dataclass
class Timer:
    """Measures one call repeatedly with a fixed method; each `sample()` is a median over a short burst."""

    fn: Callable[[], object]
    method: str  # "cuda-graph" | "do_bench"
    rep_ms: float
    _graph: torch.cuda.CUDAGraph | None = None
    _per_graph: int = 1

    def sample(self) -> float:
        if self._graph is None:
            import triton.testing

            return float(triton.testing.do_bench(self.fn, warmup=1, rep=self.rep_ms, return_mode="median"))
        times = []
        for _ in range(max(3, int(self.rep_ms / GRAPH_TARGET_MS))):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self._graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / self._per_graph)
        return statistics.median(times)


def estimate_ms(fn: Callable[[], object]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=5, rep=20, return_mode="median"))


def make_timer(fn: Callable[[], object], estimate: float, rep_ms: float, prefer_graph: bool) -> Timer:
    """A graph timer for short calls when the call can be captured, else do_bench."""
    if prefer_graph:
        try:
            per_graph = max(1, min(1000, int(GRAPH_TARGET_MS / max(estimate, 1e-4))))
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fn()
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(per_graph):
                    fn()
            graph.replay()
            torch.cuda.synchronize()
            return Timer(fn, "cuda-graph", rep_ms, graph, per_graph)
        except Exception:  # capture refused: host sync, allocation pattern, side stream...
            torch.cuda.synchronize()
    return Timer(fn, "do_bench", rep_ms)


def guard(fn: Callable[[], object], median_ms: float, iters: int = 5) -> None:
    """Reject timings that miss work: compare with a host-clock time that waits for the whole device."""
    threads_before = {t.ident for t in threading.enumerate()}
    synced, host = [], []
    for _ in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        synced.append((t2 - t0) * 1e3)
    new_threads = {t.ident for t in threading.enumerate() if t.is_alive()} - threads_before
    if new_threads:
        raise TimingFooled(f"the call left {len(new_threads)} thread(s) running: its work cannot be timed")
    s, h = statistics.median(synced), statistics.median(host)
    if s > 2.0 * max(h, median_ms) + 0.05:
        raise TimingFooled(
            f"timed {median_ms:.4f} ms on the stream but the device was busy {s:.4f} ms per call "
            "(work escaped the timed stream, e.g. a side stream): timing rejected"
        )


def interleaved(timers: dict[str, list[Timer]], rounds: int, seed: int = 0) -> dict[str, list[list[float]]]:
    """Time every variant's calls in `rounds` rounds, variants in random order each round.

    Returns variant -> round -> per-call sample (ms)."""
    rng = random.Random(seed)
    out: dict[str, list[list[float]]] = {name: [] for name in timers}
    names = list(timers)
    for _ in range(rounds):
        rng.shuffle(names)
        for name in names:
            out[name].append([t.sample() for t in timers[name]])
    return out


def kernel_times(fn: Callable[[], object], kernel_names: set[str], iters: int = 5) -> dict[str, float]:
    """Device time per call of each of the file's Triton kernels, from the profiler (empty if unavailable)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
        totals: dict[str, float] = {}
        for evt in prof.key_averages():
            name = _match_kernel(evt.key, kernel_names)
            if name is None:
                continue
            us = getattr(evt, "self_device_time_total", None)
            if us is None:
                us = getattr(evt, "self_cuda_time_total", 0.0)
            totals[name] = totals.get(name, 0.0) + float(us) / 1e3 / iters
        return totals
    except Exception:
        return {}


def _match_kernel(symbol: str, kernel_names: set[str]) -> str | None:
    if symbol in kernel_names:
        return symbol
    for name in kernel_names:
        if symbol.startswith(name + "_") or symbol.startswith(name + "("):
            return name
    return None
