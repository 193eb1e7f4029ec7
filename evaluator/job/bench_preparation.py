"""A timing's calls made ready to time: each variant's captured call with its input sets made, compiled and tuned,
its untimed call counted, then estimated, given its timer (a CUDA graph's where the call is short) and guarded."""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..shared.protocol import BenchJob
from .bench_capture import Send

if TYPE_CHECKING:
    from ..shared.sequential import RoundPlan

_MONOTONIC = time.monotonic  # bound before any user code: a timing's time limit


class Laps:
    """Seconds spent in each named part of a timing's preparation (what the job reports in ``phases_s``)."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    @contextlib.contextmanager
    def lap(self, name: str):
        started = _MONOTONIC()
        try:
            yield
        finally:
            self.seconds[name] += _MONOTONIC() - started


@dataclass
class _Ready:
    """One variant's captured call made ready to time: its original function, its input sets, what its untimed call
    counted (the entry its timing reports), and a graph timer captured before the device was granted, if any."""

    fn: Any
    sets: Any
    entry: dict[str, Any]
    graph: Any = None

    def once(self) -> Any:
        """One untimed call on the first input set (what is estimated, guarded and profiled)."""
        return self.sets.call(self.fn, 0)


def ready_calls(job: BenchJob, variants: dict[str, Any], labels: list[str], send: Send, laps: Laps) -> dict[str, Any]:
    """Per captured call, each variant's `_Ready` (its input sets made, compiled and tuned, its untimed call
    counted): {"calls": [{label: _Ready}]}, or an error result. The seconds go to `laps`."""
    import torch

    from . import timing

    n_calls = len(variants[labels[0]]["calls"])
    budget = int(torch.cuda.mem_get_info()[0] * 0.4) // (n_calls * len(labels))
    calls: list[dict[str, _Ready]] = []
    for i in range(n_calls):
        base_call = variants[labels[0]]["calls"][i]  # every variant times the same input values
        base = (base_call.args, base_call.kwargs)
        count = timing.set_count(timing.tensor_bytes(base), budget)
        calls.append({})
        for label in labels:
            v = variants[label]
            send({"event": "progress", "bench": f"{label}:{base_call.signature}"})
            fn = v["recorder"].originals[v["calls"][i].wrapper]
            try:
                with laps.lap("calls"):
                    sets = timing.InputSets(base, count, seed=job.input_seed)
                    calls[i][label] = _Ready(fn, sets, _prepare_call(fn, sets, v["module"], base_call))
            except Exception as e:  # user code failing on the captured call's copies (a fault on other addresses)
                return _timed_call_failed(label, base_call.signature, e)
    return {"calls": calls}


def made_ready_ahead(
    job: BenchJob, variants: dict[str, Any], labels: list[str], send: Send, laps: Laps
) -> dict[str, Any] | None:
    """`ready_calls` while the device is still shared, with the graphs of calls short enough for one captured too
    (sized by each call's least time there): the preparation the device alone would otherwise wait for (graph
    captures are a large share of a timing's time alone). None, to make them ready once granted, where an autotuned
    kernel has not tuned yet (its first call tunes, with the device alone). A call that fails here is the timing's
    error at once (a fault leaves the device unusable to the job); one for lack of memory beside the sharing jobs
    runs again alone (the pool)."""
    from .launch_modes import STATE

    if STATE.deferred_tunings:
        return None
    ready = ready_calls(job, variants, labels, send, laps)
    if "error" in ready:
        return ready
    if STATE.deferred_tunings:
        return None
    with laps.lap("timers"):
        for by_label in ready["calls"]:
            failed = _graphs_ahead(by_label, job.rep_ms)
            if failed is not None:
                return failed
    return ready


def _graphs_ahead(by_label: dict[str, _Ready], sample_ms: float) -> dict[str, Any] | None:
    """Each variant's graph of a call short enough for one, sized by the call's least time on the shared device and
    `sample_ms` (``timing.graph_calls``; none where a variant's cannot be captured); the error result of a call that
    failed, else None."""
    from . import timing

    least = math.inf
    for label, r in by_label.items():
        try:
            least = min(least, timing.least_ms(r.once))
        except Exception as e:  # user code failing on the captured call's copies (a fault on other addresses)
            return _timed_call_failed(label, r.entry["signature"], e)
    if least >= timing.GRAPH_BELOW_MS:
        return None
    per_graph = timing.graph_calls(least, len(next(iter(by_label.values())).sets), sample_ms)
    for label, r in by_label.items():
        try:
            r.graph = timing.graph_timer(r.fn, r.sets, per_graph)
        except Exception as e:  # the warm-up before the capture faulted
            return _timed_call_failed(label, r.entry["signature"], e)
    if any(r.graph is None for r in by_label.values()):
        for r in by_label.values():
            r.graph = None
    return None


def prepare_timers(
    job: BenchJob, calls: list[dict[str, _Ready]], labels: list[str], plan: RoundPlan, laps: Laps
) -> dict[str, Any]:
    """Per captured call and variant (made ready: `_Ready`): estimate it and make its timer (the same method for
    every variant of a call, its samples as short as `plan`'s time limit needs; a graph captured ahead where its
    size suits the estimate), then guard it; {"timers", "calls"}, or an error result. The parts' seconds go to
    `laps`."""
    from . import timing

    # each variant's call's share of the rounds' time limit up to the first look (None: no limit)
    rounds_ms = plan.max_s * 1e3 / (plan.min_rounds * len(labels) * len(calls)) if plan.max_s else None
    timers: dict[str, list[Any]] = {label: [] for label in labels}
    per_call: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for by_label in calls:
        estimates = {}
        for label, r in by_label.items():
            per_call[label].append(r.entry)
            try:
                with laps.lap("estimates"):
                    estimates[label] = timing.estimate_ms(r.once)
            except Exception as e:  # user code failing on the captured call's copies (a fault on other addresses)
                return _timed_call_failed(label, r.entry["signature"], e)
        count = len(next(iter(by_label.values())).sets)
        fastest = min(estimates.values())
        per_graph = timing.graph_calls(fastest, count, job.rep_ms) if fastest < timing.GRAPH_BELOW_MS else None
        min_reps = timing.fewest_reps(max(estimates.values()), rounds_ms)
        with laps.lap("timers"):
            made = _made_ahead(by_label, per_graph)
            if made is None:
                made = {}
                for label, r in by_label.items():
                    try:
                        made[label] = timing.make_timer(r.fn, r.sets, estimates[label], job.rep_ms, per_graph, min_reps)
                    except Exception as e:  # the warm-up before a graph capture faulted
                        return _timed_call_failed(label, r.entry["signature"], e)
            if len({timer.method for timer in made.values()}) > 1:  # one in a graph, another not: time alike
                made = {label: timing.make_timer(r.fn, r.sets, estimates[label], job.rep_ms, None, min_reps)
                        for label, r in by_label.items()}  # fmt: skip
        nodes = max(timer.graph_nodes for timer in made.values())  # the band covers the variant that replays more
        for label, r in by_label.items():
            timer = made[label]
            try:
                with laps.lap("guards"):
                    timing.guard(r.once, estimates[label])
            except timing.TimingFooled as e:
                return {"error": f"{label}: {e}", "fooled": not isinstance(e, timing.DeviceBusy), "label": label}
            timers[label].append(timer)
            r.entry.update(
                method=timer.method,
                input_sets=len(r.sets),
                per_graph=timer.per_graph,
                graph_nodes=nodes,
                estimate_ms=estimates[label],
            )
            if job.profile:
                r.entry["kernel_ms"] = timing.kernel_times(r.once)
    return {"timers": timers, "calls": per_call}


def _made_ahead(by_label: dict[str, _Ready], per_graph: int | None) -> dict[str, Any] | None:
    """The graph timers captured ahead for a call, where every variant has one and their size is within a factor of
    two of `per_graph` (replays of 1-4 ms where 2 ms is asked); None: make them now. A graph not used is freed."""
    graphs = {label: r.graph for label, r in by_label.items()}
    for r in by_label.values():
        r.graph = None
    if per_graph is None or any(g is None for g in graphs.values()):
        return None
    if not all(per_graph / 2 <= g.per_graph <= per_graph * 2 for g in graphs.values()):
        return None
    return graphs


def _timed_call_failed(label: str, signature: str, e: BaseException) -> dict[str, Any]:
    from . import error_reports

    return {
        "error": f"{label}: its call {signature} failed when prepared for timing (on copies of the test's arguments)",
        "error_detail": error_reports.describe_error(e, "", None),
        "label": label,
    }


def _prepare_call(fn, sets, module, base_call) -> dict[str, Any]:
    """Compile (and autotune) outside the timed region, and count what the call moves and launches untimed."""
    import torch

    from . import launch_modes, timing
    from .capture import bytes_moved, output_bytes
    from .launch_modes import STATE
    from .screening import compiled_facts

    ret = sets.call(fn, 0)
    torch.cuda.synchronize()
    args, kwargs = sets.sets[0]
    flops = _counted(module, f"flops_{base_call.wrapper}", base_call) or base_call.flops
    declared = _counted(module, f"bytes_{base_call.wrapper}", base_call)
    entry = {
        "wrapper": base_call.wrapper,
        "signature": base_call.signature,
        "bytes": declared or bytes_moved(args, kwargs, ret),
        "flops": flops,
        "certain_bytes": declared or output_bytes(args, kwargs, ret),
        "bytes_declared": bool(declared),
        "low_precision": any(
            "float8" in str(t.dtype) or t.dtype in (torch.int8, torch.uint8) for t in timing.tensors_of(sets.base)
        ),
    }
    del ret
    before = Counter(STATE.launches)
    with launch_modes.compiled_kept():  # what the compiler made of the kernels (why a kernel is slow)
        sets.call(fn, 0)  # the untimed call whose launches every timed call must match
        torch.cuda.synchronize()
        entry["kernels"] = compiled_facts(STATE.compiled)
    entry["checked_launches"] = dict(STATE.launches - before)
    return entry


def _counted(module, name: str, call) -> int | None:
    counter = getattr(module, name, None)
    if not callable(counter):
        return None
    try:
        return int(counter(*call.args, **call.kwargs))
    except Exception:
        return None
