"""Worker-side GPU timing of captured calls (CUDA and ROCm through `torch.cuda`), built so it cannot be gamed.

* Each timed call gets one of several input sets (copies of the call's arguments at distinct addresses), and its
  floating-point inputs get new values before every timed call (the captured values times a factor unique to the
  call, outside the timed region): an output cached by input address or content is stale when it is checked.
* Calls over ``GRAPH_BELOW_MS`` are timed one by one with the L2 flushed before each (median; ``triton.testing.
  do_bench``'s method, with the input refresh between calls), the device kept busy after the flush for as long as the
  wrapper's host code takes (``host_cover_cycles``), so that a call's time is its device work and never the host's
  launch of it. Shorter calls are timed by replaying a CUDA/HIP graph
  of many calls cycling over the input sets (hot L2, launch gaps removed); the sets get new values between
  replays. If the call cannot be captured (host syncs, side streams), it is timed flushed.
* Kernel launches are counted during the timed calls (graph: during capture); the caller compares them with the
  launches of an untimed call, and the outputs of late timed calls with the reference's on identical inputs.
* Every timer adds up the device time it measured, for the caller's wall-clock cross-check.
* Work that escapes the timed stream is rejected: a flushed timing records, for a Triton launch on another stream,
  an event there after the call, which must not end after the timer stops; and a guard re-times the call with a
  device-wide synchronize (side streams, threads). A graph cannot capture unjoined side-stream work at all.
"""

from __future__ import annotations

import ctypes
import functools
import math
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..shared.amd_devices import flush_bytes, last_level_cache
from ..shared.sequential import RoundPlan
from . import device_grant, launch_modes
from .launch_modes import STATE

GRAPH_BELOW_MS = 0.05
GRAPH_TARGET_MS = 2.0
GRAPH_REPLAYS = 5  # replays of ~GRAPH_TARGET_MS whose median is one graph sample
ESTIMATE_CALLS = 5
ESTIMATE_ENOUGH_MS = 40.0  # an estimate stops sooner once its calls took this long (at least two calls)
LONG_CALL_MS = 20.0  # a call this long (a host-bound wrapper: weights packed in Python) is guarded with fewer calls
MIN_REPS = 5  # calls a flushed sample's median is over, unless the rounds' time limit says fewer (``fewest_reps``)
ESTIMATE_SPIN_CYCLES = 2_000_000  # ~1 ms of device clock before each estimated call, for its host code to hide in
HOST_COVER = 2.0  # a flushed call's device is kept busy this many times its wrapper's host time (flush included)
HOST_CALLS = 3  # calls whose host time (median) sizes that cover
MAX_COVER_MS = 2.0  # at most: a host-bound wrapper (tens of ms a call) would spend the rounds' time spinning
TUNING_CALLS = 7  # timed calls per config when an autotuned kernel tunes in a job (``tuning_bench``)
MAX_INPUT_SETS = 4
BUSY_GRACE_MS = 0.5  # an empty kernel's round trip beyond this: the device serves other work (time slices ~2 ms)
GUARD_RETRY = 3  # a lagging guard measures again over this many times its round trips before it rejects
ESCAPE_TOLERANCE_MS = 0.002  # side-stream work may end this long after the timed stream's end event
CHECK_STEP = 1 << 20  # value steps used to check outputs, beyond any step a timing reaches
_SCALED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_GOLDEN = (math.sqrt(5) - 1) / 2

# The timer's clocks, bound when the worker starts, before any user code is imported: a file that replaces
# torch.cuda.Event, its methods or time.perf_counter (a forged clock) does not reach these. On CUDA and ROCm builds
# the event base is a C type, whose methods cannot be reassigned.
_Event = torch.cuda.Event
_EventBase = torch._C._CudaEventBase  # without CUDA or ROCm, a placeholder without methods (nothing is timed there)
_record_on = getattr(_EventBase, "record", None)  # (event, stream)
_elapsed_ms = getattr(_EventBase, "elapsed_time", None)  # (start, end)
_wait_for = getattr(_EventBase, "synchronize", None)  # (event)
_current_stream = torch.cuda.current_stream
_synchronize = torch.cuda.synchronize
_device_properties = torch.cuda.get_device_properties  # sizes the flush: a forged one could shrink it
_current_device = torch.cuda.current_device
_host_clock = time.perf_counter
_zero = torch.Tensor.zero_  # the L2 flush before each flushed call, and the busy-device control (``guard``)
_spin = torch.cuda._sleep  # a kernel that keeps the device busy for a number of its clock cycles
_equal, _mul = torch.equal, torch.mul  # which inputs a call left as they were (``InputSets.untouched``)
UNTOUCHED = "untouched input"  # saved in place of an input a checked call left as it was


def _timing_event() -> torch.cuda.Event:
    return _Event(enable_timing=True)


def _record(event: torch.cuda.Event, stream: torch.cuda.Stream | None = None) -> None:
    _record_on(event, stream if stream is not None else _current_stream())


class TimingFooled(RuntimeError):
    """The measured time cannot be right (work escaped the timed stream, or a thread outlived the call)."""


class DeviceBusy(TimingFooled):
    """Even an empty kernel waits long for the device: other work (another process) holds the GPU, so no timing
    taken now can be trusted, whoever's code is timed."""


# ----------------------------------------------------------------------------------------- input sets


def factor(step: int, seed: int = 0) -> float:
    """The value factor of refresh `step`: in [0.5, 1), distinct for distinct steps (low-discrepancy). Below 1, so
    no value leaves the captured range (a kernel that turns values in [0, 1) into indices stays in bounds, fp16
    cannot overflow)."""
    return 0.5 + 0.5 * (((step + seed * 7919) * _GOLDEN) % 1.0)


class InputSets:
    """`count` copies of a call's arguments at distinct addresses, built from `base` (args, kwargs).

    ``refresh(k, step)`` writes set k's values: floating tensors get the base values times ``factor(step)``,
    other tensors the base values (index tensors keep their structure). Two InputSets built from the same base
    hold identical values after the same refreshes, so reference and candidate see the same inputs."""

    def __init__(self, base: tuple[tuple, dict], count: int, seed: int = 0):
        self.base = base
        self.seed = seed
        self.sets = [_clone(base) for _ in range(max(1, count))]
        self.calls = 0  # refresh steps handed out so far

    def __len__(self) -> int:
        return len(self.sets)

    def refresh(self, k: int, step: int) -> None:
        f = factor(step, self.seed)
        for dst, src in zip(tensors_of(self.sets[k]), tensors_of(self.base), strict=True):
            if dst.dtype in _SCALED:
                torch.mul(src, f, out=dst)
            else:
                dst.copy_(src)

    def untouched(self, k: int, step: int) -> set[int]:
        """Positions (args, then kwargs) of set k's top-level tensor arguments that still hold what refresh `step`
        wrote: the call only read them. Their outputs need not be saved: the input set says what they hold."""
        args, kwargs = self.sets[k]
        base_args, base_kwargs = self.base
        f = factor(step, self.seed)
        same = set()
        pairs = [*zip(args, base_args, strict=True), *((kwargs[key], base_kwargs[key]) for key in kwargs)]
        for i, (dst, src) in enumerate(pairs):
            if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                expected = _mul(src, f) if dst.dtype in _SCALED else src
                if _equal(dst, expected):
                    same.add(i)
        return same

    def next_step(self) -> int:
        self.calls += 1
        return self.calls

    def call(self, fn: Callable, k: int) -> Any:
        args, kwargs = self.sets[k]
        return fn(*args, **kwargs)


def set_count(arg_bytes: int, budget_bytes: int) -> int:
    """How many input sets fit a memory budget (at least 1, at most MAX_INPUT_SETS)."""
    if arg_bytes <= 0:
        return MAX_INPUT_SETS
    return max(1, min(MAX_INPUT_SETS, budget_bytes // arg_bytes))


def tensor_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_of(value))


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def tensors_of(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_of(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_of(v)


# ----------------------------------------------------------------------------------------- timers


@dataclass
class Timer:
    """Times one call (`fn` on `sets`) with a fixed method; each `sample()` is a median over a short burst.

    Accumulates what the caller checks: `device_ms` (all device time measured), `timed_calls`, and `launches`
    (kernel launches of the timed calls; for a graph, those captured times the replays)."""

    fn: Callable
    sets: InputSets
    method: str  # "cuda-graph" | "flushed"
    reps: int
    per_graph: int = 1
    device_ms: float = 0.0
    timed_calls: int = 0
    launches: Counter[str] = field(default_factory=Counter)
    graph_nodes: int = 0  # nodes one call replays in the graph (kernels, copies, sets; 0: not in a graph)
    cover_cycles: int = 0  # a flushed call's spin after the flush, which its wrapper's host code runs under
    _graph: torch.cuda.CUDAGraph | None = None
    _graph_outputs: dict[int, Any] = field(default_factory=dict)  # set -> return value of its last captured call
    _captured: Counter[str] = field(default_factory=Counter)  # launches of one replay (all its calls)

    def sample(self) -> float:
        return self._sample_graph() if self._graph is not None else self._sample_flushed()

    def _sample_flushed(self) -> float:
        flush = _flush_buffer()
        starts = [_timing_event() for _ in range(self.reps)]
        ends = [_timing_event() for _ in range(self.reps)]
        side: list[tuple[int, torch.cuda.Event]] = []  # (call, an event after its work on another stream)
        before = Counter(STATE.launches)
        timed_stream = _current_stream().cuda_stream
        with launch_modes.streams_tracked():
            for i in range(self.reps):
                step = self.sets.next_step()
                k = step % len(self.sets)
                self.sets.refresh(k, step)
                _zero(flush)
                if self.cover_cycles:
                    _spin(self.cover_cycles)
                STATE.launch_streams.clear()
                _record(starts[i])
                self.sets.call(self.fn, k)
                _record(ends[i])
                for handle in set(STATE.launch_streams) - {timed_stream}:
                    done = _timing_event()
                    _record(done, torch.cuda.ExternalStream(handle))
                    side.append((i, done))
        _synchronize()
        self.launches.update(STATE.launches - before)
        escaped = [i for i, done in side if _elapsed_ms(ends[i], done) > ESCAPE_TOLERANCE_MS]
        if escaped:
            raise TimingFooled(
                f"{len(escaped)} timed call(s) launched kernels on a side stream that the timed stream does not "
                "wait for (their work ends after the timer stops): timing rejected"
            )
        times = [_elapsed_ms(s, e) for s, e in zip(starts, ends, strict=True)]
        self.device_ms += sum(times)
        self.timed_calls += self.reps
        return statistics.median(times)

    def _sample_graph(self) -> float:
        assert self._graph is not None
        times = []
        for _ in range(self.reps):
            self._refresh_all(self.sets.next_step())
            start, end = _timing_event(), _timing_event()
            _record(start)
            self._graph.replay()
            _record(end)
            _wait_for(end)
            ms = _elapsed_ms(start, end)
            times.append(ms / self.per_graph)
            self.device_ms += ms
        self.timed_calls += self.reps * self.per_graph
        for name, count in self._captured.items():
            self.launches[name] += count * self.reps
        return statistics.median(times)

    def _refresh_all(self, step: int) -> None:
        for k in range(len(self.sets)):
            self.sets.refresh(k, step * len(self.sets) + k)

    def launches_per_call(self) -> dict[str, float]:
        calls = max(self.timed_calls, 1)
        return {name: count / calls for name, count in self.launches.items()}

    def check_outputs(self, sets: list[int], step: int) -> dict[int, Any]:
        """Outputs of timed-like calls on fresh values (refresh `step`, the same for every variant), after all
        the timed calls: for a graph, one more replay (its last call on each set); else one eager call per set.
        Returns set -> (return value, args, kwargs) after the call, with ``UNTOUCHED`` in place of each top-level
        tensor argument the call left as it was (an input it only read: gigabytes that need no saving)."""
        if self._graph is not None:
            self._refresh_all(step)
            self._graph.replay()
            _synchronize()
            found = {k: self._graph_outputs[k] for k in sets if k in self._graph_outputs}
        else:
            found = {}
            for k in sets:
                self.sets.refresh(k, step * len(self.sets) + k)
                found[k] = self.sets.call(self.fn, k)
                _synchronize()
        out = {}
        for k, ret in found.items():
            args, kwargs = self.sets.sets[k]
            same = self.sets.untouched(k, step * len(self.sets) + k)
            args = tuple(UNTOUCHED if i in same else a for i, a in enumerate(args))
            kwargs = {key: UNTOUCHED if len(args) + j in same else v for j, (key, v) in enumerate(kwargs.items())}
            out[k] = (ret, args, kwargs)
        return out


def estimate_ms(fn: Callable[[], object], calls: int = ESTIMATE_CALLS) -> float:
    """A first time of a warm call's device work (ms): the median of a few calls, each with the L2 flushed before it
    (what the timing method, the graph size and the burst length are chosen by; ~1 ms of work for a small call, where
    `do_bench`'s fixed 25 ms budget was most of a timing job's preparation). The device spins before each, so that
    the wrapper's host code (a device guard, reshapes, allocations: tens of µs) runs while the device is still busy:
    otherwise the flush could end first, the estimate took in the host's time, and a µs-scale call could be timed by
    graph replay in one run and one call at a time in the next (a file against itself then timed "faster"). Calls of
    tens of ms or more stop at two once ``ESTIMATE_ENOUGH_MS`` is spent: a host-bound call of a second would hold the
    device alone for seconds to be estimated, for a choice (one call at a time) that one such call already makes."""
    return statistics.median(_spun_times(fn, calls, ESTIMATE_ENOUGH_MS))


def _spun_times(fn: Callable[[], object], calls: int, enough_ms: float | None = None) -> list[float]:
    """Device times (ms) of `calls` calls, each after an L2 flush and a spin that hides its host code; fewer (at
    least two) once they took `enough_ms` in all."""
    flush = _flush_buffer()
    times: list[float] = []
    for _ in range(calls):
        if enough_ms is not None and len(times) >= 2 and sum(times) >= enough_ms:
            break
        _zero(flush)
        _spin(ESTIMATE_SPIN_CYCLES)
        times.append(_device_ms(fn))
    return times


def _device_ms(fn: Callable[[], object]) -> float:
    """The device time (ms) of one run of `fn`, between events around it."""
    start, end = _timing_event(), _timing_event()
    _record(start)
    fn()
    _record(end)
    _wait_for(end)
    return _elapsed_ms(start, end)


def least_ms(fn: Callable[[], object], calls: int = ESTIMATE_CALLS) -> float:
    """The shortest of a few calls timed as ``estimate_ms`` times them: on a device other jobs share, the call least
    slowed by them (what a graph's size is chosen by before the device is granted: ``worker``)."""
    return min(_spun_times(fn, calls, ESTIMATE_ENOUGH_MS))


def tuning_bench(kernel_call: Callable[[], object], quantiles: tuple[float, ...] | None = None) -> Any:
    """What `@triton.autotune` kernels are tuned with in timing jobs (the device alone) and in checks on a GPU
    (``launch_modes.tuned_with``): each config's median over ``TUNING_CALLS`` calls timed as ``estimate_ms`` times them,
    instead of Triton's ``do_bench`` of 125 ms a config (for a file of dozens of configs, seconds a tuning key: most
    of its timing). Only which config runs depends on it: a timing measures that config like any other. The values
    at `quantiles` when asked (as ``do_bench`` returns them), else the median."""
    kernel_call()  # compiled and warm before any call is timed
    times = sorted(_spun_times(kernel_call, TUNING_CALLS))
    if quantiles is None:
        return statistics.median(times)
    return [times[min(len(times) - 1, int(q * len(times)))] for q in quantiles]


def graph_calls(estimate_ms_: float, sets: int, sample_ms: float = GRAPH_TARGET_MS * GRAPH_REPLAYS) -> int:
    """Calls per graph replay: about GRAPH_TARGET_MS of work, or less where a sample is to take less than
    ``GRAPH_REPLAYS`` such replays (`sample_ms`: a flushed sample's `rep_ms`), a multiple of the number of input
    sets."""
    target = min(GRAPH_TARGET_MS, sample_ms / GRAPH_REPLAYS)
    per = max(1, min(1000, int(target / max(estimate_ms_, 1e-4))))
    return max(sets, per - per % sets)


def fewest_reps(estimate_ms_: float, rounds_ms: float | None) -> int:
    """The fewest calls a flushed sample of this call may take: ``MIN_REPS``, or fewer (at least one) where that many
    would make this call alone outlast `rounds_ms`, its share of the rounds' time limit up to the first look (None: no
    limit). In a batch run the limit is 10 s of rounds; a host-bound call of a second, five calls a sample, would
    otherwise hold the device alone for a minute before its first look."""
    if rounds_ms is None:
        return MIN_REPS
    return max(1, min(MIN_REPS, int(rounds_ms / max(estimate_ms_, 1e-3))))


def make_timer(
    fn: Callable, sets: InputSets, estimate: float, rep_ms: float, per_graph: int | None, min_reps: int = MIN_REPS
) -> Timer:
    """A graph timer of `per_graph` calls when given and the call can be captured, else a flushed timer whose
    samples take about `rep_ms` of calls, at least `min_reps` (``fewest_reps``)."""
    if per_graph:
        timer = graph_timer(fn, sets, per_graph)
        if timer is not None:
            return timer
    reps = max(min_reps, min(1000, int(rep_ms / max(estimate, 1e-3))))
    return Timer(fn, sets, "flushed", reps, cover_cycles=host_cover_cycles(lambda: sets.call(fn, 0)))


def host_cover_cycles(fn: Callable[[], object]) -> int:
    """The spin (device clock cycles) that keeps the device busy after the L2 flush while a flushed call's wrapper
    runs its host code: ``HOST_COVER`` times the host's time to launch the call, less what the flush itself covers,
    at most ``MAX_COVER_MS``. Without it a wrapper whose host code outlasts the flush (several launches of many
    arguments each, a launch's host time a good part of the flush's) is timed with the device waiting for its
    launches, the host's time and jitter in the call's, as graph replays never are."""
    host: list[float] = []
    for _ in range(HOST_CALLS):
        _spin(ESTIMATE_SPIN_CYCLES)  # the device busy: the host's time alone, not a wait for the device
        started = _host_clock()
        fn()
        host.append((_host_clock() - started) * 1e3)
    _synchronize()
    cover_ms = min(MAX_COVER_MS, HOST_COVER * statistics.median(host) - _flush_ms())
    return int(cover_ms * _cycles_per_ms()) if cover_ms > 0 else 0


@functools.cache
def _cycles_per_ms() -> float:
    """The device clock's cycles per ms, as the spin kernel counts them (measured once)."""
    return ESTIMATE_SPIN_CYCLES / max(1e-3, statistics.median(_device_times(lambda: _spin(ESTIMATE_SPIN_CYCLES))))


@functools.cache
def _flush_ms() -> float:
    """How long the L2 flush keeps the device busy (measured once)."""
    flush = _flush_buffer()
    return statistics.median(_device_times(lambda: _zero(flush)))


def _device_times(fn: Callable[[], object], calls: int = 3) -> list[float]:
    """Device times (ms) of `calls` runs of `fn`, after a warm-up run."""
    fn()
    return [_device_ms(fn) for _ in range(calls)]


def graph_timer(fn: Callable, sets: InputSets, per_graph: int) -> Timer | None:
    """A timer replaying a graph of `per_graph` calls cycling over `sets` (every set warmed up first); None where
    the call cannot be captured."""
    timer = Timer(fn, sets, "cuda-graph", GRAPH_REPLAYS, per_graph)
    try:
        timer._refresh_all(0)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for k in range(len(sets)):  # warm up: every set is seen once before the capture
                sets.call(fn, k)
        torch.cuda.current_stream().wait_stream(stream)
        _synchronize()
        graph = _kept_graph()
        before = Counter(STATE.launches)
        with torch.cuda.graph(graph):
            for j in range(per_graph):
                k = j % len(sets)
                timer._graph_outputs[k] = sets.call(fn, k)
        captured = STATE.launches - before
        nodes = graph_node_count(graph) or sum(captured.values())  # Triton's launches where the graph is not kept
        graph.replay()  # (a kept graph is instantiated here)
        _synchronize()
    except Exception as refused:  # capture refused: host sync, allocation pattern, side stream...
        try:
            _synchronize()
        except Exception as fault:  # the device is in error: the call itself faulted, not only its capture
            raise fault from refused
        return None
    timer._graph = graph
    timer._captured = captured
    timer.graph_nodes = max(1, math.ceil(nodes / per_graph))
    return timer


def _kept_graph() -> torch.cuda.CUDAGraph:
    """A graph whose captured form is kept after its capture, so that its nodes can be counted (a torch without
    ``keep_graph``: one that is not)."""
    try:
        return torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:
        return torch.cuda.CUDAGraph()


def graph_node_count(graph: torch.cuda.CUDAGraph) -> int | None:
    """The nodes of a captured graph (every kernel, torch's as well as Triton's, copy and set it replays), as the
    CUDA or HIP runtime counts them; None where the graph was not kept or the runtime cannot be asked."""
    get_nodes = _graph_get_nodes()
    if get_nodes is None:
        return None
    try:
        handle = graph.raw_cuda_graph()
    except (AttributeError, RuntimeError):
        return None
    count = ctypes.c_size_t(0)
    if get_nodes(ctypes.c_void_p(handle), None, ctypes.byref(count)) != 0:
        return None
    return count.value


@functools.cache
def _graph_get_nodes() -> Any:
    """The runtime's ``cudaGraphGetNodes`` (ROCm: ``hipGraphGetNodes``) from the library torch loaded; None where
    it cannot be found."""
    names = ("libamdhip64.so",) if torch.version.hip else ("libcudart.so", "libcudart.so.13", "libcudart.so.12")
    for name in names:
        try:
            function = getattr(ctypes.CDLL(name), "hipGraphGetNodes" if torch.version.hip else "cudaGraphGetNodes")
        except (OSError, AttributeError):
            continue
        function.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t))
        function.restype = ctypes.c_int
        return function
    return None


@functools.cache
def _flush_buffer() -> torch.Tensor:
    size = device_flush_bytes(_device_properties(_current_device()))
    return torch.empty(size // 4, dtype=torch.int32, device="cuda")


def device_flush_bytes(props: Any) -> int:
    """What is zeroed before a flushed call: twice the device's last-level cache, at least do_bench's 256 MB (an
    MI300X's 256 MB Infinity Cache would keep part of the inputs a buffer of its own size was to evict)."""
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    return flush_bytes(last_level_cache(l2, getattr(props, "gcnArchName", None)))


@functools.cache
def _probe_buffer() -> torch.Tensor:
    return torch.zeros(1, device="cuda")


def _round_trips(fn: Callable[[], object], iters: int) -> tuple[float, float]:
    """Medians (ms) of a call's time until the whole device is done with it, and of its host time alone."""
    synced, host = [], []
    for _ in range(iters):
        _synchronize()
        t0 = _host_clock()
        fn()
        t1 = _host_clock()
        _synchronize()
        t2 = _host_clock()
        host.append((t1 - t0) * 1e3)
        synced.append((t2 - t0) * 1e3)
    return statistics.median(synced), statistics.median(host)


def _device_lags(synced_ms: float, host_ms: float, device_ms: float, grace_ms: float = 0.05) -> bool:
    return synced_ms > 2.0 * max(host_ms, device_ms) + grace_ms


def device_lag_ms(iters: int = 5) -> float:
    """How long an empty kernel waits for the device beyond its own host time (ms): near 0 on a device of one's own,
    a time slice where another process holds the GPU."""
    probe = _probe_buffer()
    synced, host = _round_trips(lambda: _zero(probe), iters)
    return max(0.0, synced - host)


QUIET_LAG_MS = 0.1  # an empty kernel's lag below this, twice in a row: the device serves this job alone
QUIET_WITHIN_S = 3.0  # how long a timing granted the device waits for the paused jobs' queued work to drain


def wait_until_quiet(within_s: float = QUIET_WITHIN_S) -> None:
    """Once granted the device (``DeviceGrant``): wait until an empty kernel no longer lags, twice in a row,
    since the jobs paused for this timing may have left work queued on the device. DeviceStillBusy after `within_s`
    (a paused job's kernel that runs on: the pool then times once more, once the sharing jobs have ended)."""
    end = _host_clock() + within_s
    quiet = 0
    while quiet < 2:
        lag = device_lag_ms()
        quiet = quiet + 1 if lag < QUIET_LAG_MS else 0
        if quiet < 2 and _host_clock() > end:
            raise device_grant.DeviceStillBusy(
                f"the GPU stayed busy with other work for {within_s:g} s after the jobs sharing it were paused (an "
                f"empty kernel lagged {lag:.3f} ms)"
            )


def guard(fn: Callable[[], object], median_ms: float, iters: int | None = None) -> None:
    """Reject timings that miss work: compare with a host-clock time that waits for the whole device (the median of
    `iters` round trips, five, three for calls of ``LONG_CALL_MS`` or more: a timed median is fooled only where most
    calls escape, and so is this). A lag is measured once more, over ``GUARD_RETRY`` times the round trips, before
    it counts: on a host busy compiling, an honest call can lag once, this process stalled in some of its round
    trips. When the device lags even behind an empty kernel, it is busy with other work (``DeviceBusy``), not fooled
    by the code."""
    if iters is None:
        iters = 3 if median_ms >= LONG_CALL_MS else 5
    threads_before = {t.ident for t in threading.enumerate()}
    s, h = _round_trips(fn, iters)
    new_threads = {t.ident for t in threading.enumerate() if t.is_alive()} - threads_before
    if new_threads:
        raise TimingFooled(f"the call left {len(new_threads)} thread(s) running: its work cannot be timed")
    if not _device_lags(s, h, median_ms):
        return
    s, h = _round_trips(fn, iters * GUARD_RETRY)
    if not _device_lags(s, h, median_ms):
        return
    probe = _probe_buffer()
    empty_s, empty_h = _round_trips(lambda: _zero(probe), iters)
    if _device_lags(empty_s, empty_h, 0.0, BUSY_GRACE_MS):
        raise DeviceBusy(
            f"the GPU is busy with other work (another process?): even an empty kernel took {empty_s:.3f} ms to "
            "finish, so no timing can be trusted now: timing rejected; time again when the GPU is free"
        )
    raise TimingFooled(
        f"timed {median_ms:.4f} ms on the stream but the device was busy {s:.4f} ms per call "
        "(work escaped the timed stream, e.g. a side stream): timing rejected"
    )


def interleaved(
    timers: dict[str, list[Timer]],
    plan: RoundPlan,
    seed: int = 0,
    stop: Callable[[dict[str, list[list[float]]]], bool] | None = None,
) -> dict[str, list[list[float]]]:
    """Time every variant's calls in rounds, in pairs: a random order, then the same order reversed (A B | B A). A
    variant's place in a round (the GPU's clock still ramping up, the caches the variant before it warmed) then
    weighs on every variant alike within each pair (``shared.sequential.paired_ratios``). At each of the plan's
    looks, `stop(rounds so far)` may end the timing (the sequential rule, ``shared.sequential``); it always ends at the
    plan's maximum.

    Returns variant -> round -> per-call sample (ms)."""
    rng = random.Random(seed)
    out: dict[str, list[list[float]]] = {name: [] for name in timers}
    names = list(timers)
    looks = set(plan.looks())
    for r in range(plan.max_rounds):
        if r % 2 == 0:
            rng.shuffle(names)
        else:
            names.reverse()
        for name in names:
            out[name].append([t.sample() for t in timers[name]])
        done = r + 1
        if done in looks and (done >= plan.max_rounds or (stop is not None and stop(out))):
            break
    return out


def kernel_times(fn: Callable[[], object], iters: int = 5) -> dict[str, float]:
    """Device time per call of each Triton kernel the call launches, from events around its launches (no profiler,
    so it costs a few calls, not a profiler's start-up)."""
    fn()  # any tuning or compiling happens outside the measured calls
    _synchronize()
    with launch_modes.kernels_timed():
        for _ in range(iters):
            fn()
        _synchronize()
        totals: dict[str, float] = {}
        for name, start, end in STATE.kernel_events:
            totals[name] = totals.get(name, 0.0) + _elapsed_ms(start, end) / iters
    return totals
