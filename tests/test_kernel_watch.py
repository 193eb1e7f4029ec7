"""A check whose GPU kernels stop finishing ends its job within seconds (``job.kernel_watch``): the watch's rule on
the CPU, the whole path on a GPU (skipped without one)."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from fixture_check import FIXTURES

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.job import kernel_watch
from geak.evaluator.job.kernel_watch import MAX_STEP_S, KernelWatch
from geak.evaluator.pool import _stuck_of
from geak.evaluator.shared.probe_rules import KERNEL_STUCK_FLOOR_S, TESTS_KERNEL_STUCK_S, kernel_stuck_s


class Event:
    """A launch's event: done once `done` is set."""

    def __init__(self) -> None:
        self.done = False

    def query(self) -> bool:
        return self.done


def watch(stuck_s: float = 10.0) -> tuple[KernelWatch, list[float]]:
    said: list[float] = []
    return KernelWatch(said.append, stuck_s), said


def polled(w: KernelWatch, seconds: float, step_s: float = 0.25) -> bool:
    stuck = False
    for _ in range(round(seconds / step_s)):
        stuck = w.poll(step_s)
    return stuck


def test_a_kernel_that_never_finishes_is_told_once_after_the_stuck_time():
    w, said = watch(10.0)
    w.launched(Event())
    assert not polled(w, 9.5) and not said
    assert polled(w, 0.75) and said == [10.0]
    assert polled(w, 5.0) and said == [10.0]  # told once


def test_kernels_that_keep_finishing_are_never_stuck_however_long_the_queue():
    w, said = watch(10.0)
    queue = [Event() for _ in range(40)]
    for e in queue:
        w.launched(e)
    for e in queue:  # one finishes every 8 s: 320 s of work in all
        assert not polled(w, 8.0)
        e.done = True
    assert not polled(w, 30.0) and not said and not w.pending  # nothing pending: nothing to wait for


def test_a_kernel_launched_after_a_quiet_while_is_timed_from_its_launch():
    w, said = watch(10.0)
    assert not polled(w, 60.0)  # compiling: no kernel pending
    w.launched(Event())
    assert not polled(w, 9.5) and not said
    assert polled(w, 0.75)


def test_time_while_the_process_was_stopped_does_not_count():
    w, said = watch(10.0)
    w.launched(Event())
    assert not w.poll(3600.0) and not said  # a poll an hour after the last: the pool had stopped the job for a timing
    assert w.awake == MAX_STEP_S
    assert not polled(w, 8.5) and polled(w, 1.0)


def test_the_thread_tells_a_stuck_kernel_once_and_stops(monkeypatch):
    monkeypatch.setattr(kernel_watch, "_relaxed_capture_mode", lambda hip: True)
    w, said = watch(0.5)
    assert w.start(hip=False)
    w.launched(Event())
    deadline = time.monotonic() + 10
    while not said and time.monotonic() < deadline:
        time.sleep(0.05)
    w.stop()
    assert said == [0.5] and not w.pending


def test_without_the_relaxed_capture_mode_nothing_is_watched_and_nothing_waits(monkeypatch):
    w, said = watch(0.5)
    monkeypatch.setattr(kernel_watch, "_relaxed_capture_mode", lambda hip: False)
    assert not w.start(hip=False)
    monkeypatch.setattr(kernel_watch, "_relaxed_capture_mode", lambda hip: 1 / 0)  # an unforeseen failure
    assert not w.start(hip=False)
    w.stop()
    assert not said


def test_the_rule_floor_and_what_the_pool_accepts():
    assert kernel_stuck_s(0.5) == KERNEL_STUCK_FLOOR_S
    assert kernel_stuck_s(30.0) == 60.0  # twice the tests' own run
    assert kernel_stuck_s(None) == TESTS_KERNEL_STUCK_S  # in the tests themselves
    assert _stuck_of({"event": "progress", "test": "fresh inputs #1 f(f32[8])", "stuck_s": 10.0}) == 10.0
    for bad in (True, 0, -1.0, float("inf"), float("nan"), "10", None):
        assert _stuck_of({"event": "progress", "stuck_s": bad}) is None, bad
    assert _stuck_of({"event": "progress", "test": "test_f"}) is None


def gpu_check(name: str, against: str, progress, **options):
    async def go():
        opts = EvalOptions(backend="gpu", timeout_s=120, spares=0, **options)
        async with Evaluator(opts) as ev:
            return await ev.check(FIXTURES / name, against=FIXTURES / against, progress=progress)

    return asyncio.run(go())


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@needs_gpu
def test_a_probe_whose_kernel_spins_on_the_gpu_is_ended_as_hung_long_before_its_silence_limit():
    """Its own test passes; the fresh probe's kernel spins on the device. The watch ends the reference's job after
    the floor (not the 60 s silence limit), and the reference runs again without that probe."""
    said: list[str] = []
    fixture = "probes/sub_spins_on_the_device_off_its_inputs.py"
    r = gpu_check(fixture, fixture, said.append, probe_stall_s=60.0)
    assert r.ok, r.message
    hung = [m for m in said if "hung in fresh inputs #1 sub(" in m]
    assert hung and f"none of its GPU kernels finished for {KERNEL_STUCK_FLOOR_S:g} s" in hung[0], said
    assert any("hung on these inputs in an earlier run" in n for n in r.comparison.notes), r.comparison.notes


@needs_gpu
def test_a_wrapper_that_captures_a_cuda_graph_while_its_launches_are_watched_is_undisturbed():
    said: list[str] = []
    fixture = "probes/sub_captured_in_a_graph.py"
    r = gpu_check(fixture, fixture, said.append)
    assert r.ok, r.message
    assert any(m.startswith("running fresh inputs #1 ") for m in said), said  # its probes ran, watched
    assert not [m for m in said if "hung" in m], said


@needs_gpu
def test_a_candidate_whose_kernel_spins_in_the_test_fails_as_hung_long_before_its_time_limit():
    said: list[str] = []
    r = gpu_check("probes/sub_spins_on_the_device.py", "probes/sub.py", said.append)
    assert not r.ok and r.tests[0].kind == "timeout", r.message
    assert f"hung: test_sub: none of its GPU kernels finished for {TESTS_KERNEL_STUCK_S:g} s" in r.message, r.message
