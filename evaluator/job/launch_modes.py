"""The job's modes and what its Triton launches leave, in one place (``STATE``).

A mode changes what a Triton launch (``launch_counter``) or an autotuned kernel's tuning (``autotuning``) does, and
is on within its context manager below; what launches leave (counts, events, compiled kernels, tuning choices) is
read by the job. One per process: a job process inherits the zygote's, empty.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .kernel_watch import KernelWatch


@dataclass
class Modes:
    """What is on now, each within its context manager of this module."""

    ghost: bool = False  # launches are counted but run nothing (``ghost_kernels``)
    track_streams: bool = False  # each launch counts its GPU stream (``streams_tracked``)
    time_kernels: bool = False  # each launch is bracketed by device events (``kernels_timed``)
    keep_compiled: bool = False  # each launch keeps its compiled kernel (``compiled_kept``)
    compile_only: bool = False  # each launch compiles its kernel and launches nothing (``compile_only``)
    every_config: bool = False  # ...an autotuned one each of its configs (``every_config_compiled``)
    defer_tuning: bool = False  # an autotuned kernel runs a config untimed, its tuning left for later
    keep_tuning: bool = False  # an autotuned kernel runs its choice for another key at a new key (``tuning_kept``)
    share_twins: bool = False  # an autotuned kernel takes its twin's choice (``twins_tuned_alike``)
    compile_ahead: bool = False  # an autotuned kernel's configs compile at once before it tunes
    record_steps: bool = False  # each launch notes its unmasked steps' sizes and blocks (``steps_recorded``)


@dataclass
class JobState:
    """The modes, and what launches leave while they are on."""

    modes: Modes = field(default_factory=Modes)
    launches: Counter[str] = field(default_factory=Counter)  # per kernel name
    launch_streams: Counter[int] = field(default_factory=Counter)  # per GPU stream handle, within `streams_tracked`
    kernel_events: list[tuple[str, Any, Any]] = field(default_factory=list)  # (kernel, start, end), `kernels_timed`
    compiled: list[tuple[str, Any]] = field(default_factory=list)  # (kernel, CompiledKernel), within `compiled_kept`
    deferred_tunings: Counter[str] = field(default_factory=Counter)  # untuned launches by kernel, `tuning_deferred`
    twin_choices: dict[tuple[Any, ...], dict[Any, int]] = field(default_factory=dict)  # fingerprint -> key -> config
    # what autotuners time their configs with, and whether over Triton's own benchmarks too, within `tuned_with`
    tuning_bench: list[tuple[Callable[..., Any], bool]] = field(default_factory=list)
    watches: list[KernelWatch] = field(default_factory=list)  # of the tests or probes running, `kernels_watched`
    steps: set[tuple[int, int]] = field(default_factory=set)  # (dimension, block) of unmasked steps, `steps_recorded`


STATE = JobState()
MODES = STATE.modes


@contextlib.contextmanager
def streams_tracked():
    """Within it, each Triton launch also counts the GPU stream it went to (timing: work escaping to a side
    stream)."""
    MODES.track_streams = True
    try:
        yield
    finally:
        MODES.track_streams = False


@contextlib.contextmanager
def kernels_timed():
    """Within it, each Triton launch is bracketed by device events on its stream (``STATE.kernel_events``): the device
    time of each kernel, without a profiler."""
    STATE.kernel_events.clear()
    MODES.time_kernels = True
    try:
        yield
    finally:
        MODES.time_kernels = False


@contextlib.contextmanager
def steps_recorded():
    """Within it, each Triton launch notes the sizes it steps over in tiles of a block without a mask, with the
    block (``step_facts``, into ``STATE.steps``): a reference's tests, whose probes then try sizes that are multiples
    of those blocks only."""
    MODES.record_steps = True
    try:
        yield
    finally:
        MODES.record_steps = False


@contextlib.contextmanager
def tuning_deferred():
    """Within it, a `@triton.autotune` kernel runs its first config without timing the others or keeping a choice:
    a timing job captures its calls while other jobs share the device, and tunes later, with the device alone. Where
    the first config cannot run (too much shared memory for the device, say), the next that runs does. Tuning there
    would choose by a shared device's noise, and each variant of an A/A would keep its own choice."""
    MODES.defer_tuning = True
    try:
        yield
    finally:
        MODES.defer_tuning = False


@contextlib.contextmanager
def configs_compiled_ahead():
    """Within it, an autotuned kernel's launch that would tune (or, within ``tuning_deferred``, defer its tuning)
    first compiles every one of its configs for the call, in forked processes at once (``compile.forked``), and its
    tuning leaves out those that failed to compile there. A timing job's capture, while the device is shared, so that
    its tuning, with the device alone, only times them: compiled one by one while tuning, they would hold the device
    alone for seconds, every other job of its GPU paused meanwhile. A check on a GPU, whose first run of an autotuned
    file compiles every config."""
    MODES.compile_ahead = True
    try:
        yield
    finally:
        MODES.compile_ahead = False


@contextlib.contextmanager
def tuning_kept():
    """Within it, a `@triton.autotune` kernel that meets a tuning key it has not tuned (a probe's other sizes) runs the
    config it chose for a key it tuned, instead of compiling and timing every config again (seconds a probe). The
    choice is not kept. A kernel that has tuned nothing yet, or whose choice cannot run there, tunes as it would."""
    MODES.keep_tuning = True
    try:
        yield
    finally:
        MODES.keep_tuning = False


@contextlib.contextmanager
def twins_tuned_alike():
    """Within it, a `@triton.autotune` kernel of the same source, configs and tuning keys as one tuned before in this
    job takes that kernel's choice for a key instead of tuning again: identical kernels of two variants run the same
    config (an A/A's two tunings otherwise pick among near-equal configs by noise), and the second costs nothing."""
    STATE.twin_choices.clear()
    MODES.share_twins = True
    try:
        yield
    finally:
        MODES.share_twins = False


@contextlib.contextmanager
def tuned_with(bench: Callable[..., Any], over_tritons: bool = False):
    """Within it, a `@triton.autotune` kernel whose file gave it no benchmark of its own times its configs with
    `bench` (Triton's ``do_bench`` signature) instead of Triton's default. `over_tritons`: also one whose file asked
    for one of Triton's own benchmarks (`use_cuda_graph`, `warmup`, `rep`), where no choice is by speed (a check); a
    benchmark the file wrote itself (`do_bench=`) is its own everywhere."""
    entry = (bench, over_tritons)
    STATE.tuning_bench.append(entry)
    try:
        yield
    finally:
        STATE.tuning_bench.remove(entry)


@contextlib.contextmanager
def compile_only():
    """Within it, every Triton launch compiles its kernel (``warmup``) and launches nothing: under Triton's
    ``AsyncCompileMode`` the compiles of many variants then run in parallel. Launches are not counted."""
    MODES.compile_only = True
    try:
        yield
    finally:
        MODES.compile_only = False


@contextlib.contextmanager
def every_config_compiled():
    """Within ``compile_only``, an autotuned kernel's launch compiles each of its configs (a check's kernels compiled
    ahead: ``compile.dry_pass``), not only the one it would run."""
    MODES.every_config = True
    try:
        yield
    finally:
        MODES.every_config = False


@contextlib.contextmanager
def compiled_kept():
    """Within it, each Triton launch keeps what it returned (``STATE.compiled``: the compiled kernel with its registers,
    spills, shared memory, warps and stages)."""
    STATE.compiled.clear()
    MODES.keep_compiled = True
    try:
        yield
    finally:
        MODES.keep_compiled = False


@contextlib.contextmanager
def kernels_watched(watch: KernelWatch, gpu: bool):
    """Within it, `watch` is told of an event recorded after each Triton launch, and its thread watches them
    (``kernel_watch``; on a GPU only, where the thread can query in relaxed capture mode)."""
    if not gpu or not watch.start(hip=bool(torch.version.hip)):
        yield
        return
    STATE.watches.append(watch)
    try:
        yield
    finally:
        STATE.watches.remove(watch)
        watch.stop()


@contextlib.contextmanager
def ghost_kernels():
    """Within it, every Triton launch is a no-op: outputs that come out right anyway were not computed by the
    kernels."""
    MODES.ghost = True
    try:
        yield
    finally:
        MODES.ghost = False
