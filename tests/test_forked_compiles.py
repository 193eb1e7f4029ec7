"""The screening's compiles in forked processes: each queued compile runs in a child first (which fills Triton's
cache on disk), then in the job process; failures and the deadline stay the variant's; a real Triton compile for a
GPU target runs in a child without a GPU, and one already in the cache is read with no child."""

import inspect
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from geak.evaluator.job.compile.forked import ForkedCompiles, NotCompiledInTime


def recorder(log: Path, value):
    def compile_():
        with log.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return value

    return compile_


def test_each_compile_runs_in_a_child_then_here_in_the_order_submitted(tmp_path):
    executor = ForkedCompiles(2)
    futures = [executor.submit(recorder(tmp_path / f"{i}.log", i * 10)) for i in range(5)]
    report = executor.run(time.monotonic() + 60)
    assert [f.result() for f in futures] == [0, 10, 20, 30, 40]
    for i in range(5):
        child, here = (tmp_path / f"{i}.log").read_text().split()
        assert int(child) != os.getpid() and int(here) == os.getpid()
    assert (report.submitted, report.compiled, report.failed, report.not_in_time) == (5, 5, 0, set())
    assert executor.queued == []


def test_a_pumped_compile_starts_in_a_child_before_the_run(tmp_path):
    executor = ForkedCompiles(2)
    future = executor.submit(recorder(tmp_path / "early.log", 1))
    executor.pump()  # what the screening calls between two variants' submissions
    early, waited = tmp_path / "early.log", time.monotonic() + 30
    while not (early.exists() and early.read_text().endswith("\n")) and time.monotonic() < waited:  # its whole line
        time.sleep(0.01)
    assert int(early.read_text().split()[0]) != os.getpid()
    assert executor.run(time.monotonic() + 60).compiled == 1 and future.result() == 1


def test_a_compile_that_fails_in_its_child_fails_and_the_others_go_on(tmp_path):
    def broken():
        raise ValueError("bad tile")

    def crashes():
        os.kill(os.getpid(), signal.SIGKILL)

    executor = ForkedCompiles(4)
    bad, good = executor.submit(broken), executor.submit(recorder(tmp_path / "ok.log", "ok"))
    crashed = executor.submit(crashes)
    report = executor.run(time.monotonic() + 60)
    for failed in (bad, crashed):
        with pytest.raises(RuntimeError, match="failed in a forked process"):
            failed.result()
    assert good.result() == "ok" and (report.compiled, report.failed) == (1, 2)
    assert report.failed_at == {0}  # the compile that raised, not the child that was killed


def test_the_deadline_kills_a_slow_compile_and_what_never_started(tmp_path):
    executor = ForkedCompiles(1)
    slow = executor.submit(time.sleep, 30)
    never = executor.submit(recorder(tmp_path / "never.log", 1))
    report = executor.run(time.monotonic() + 1.0)
    for future in (slow, never):  # neither ran to its end: the slow one would have, in 30 s
        with pytest.raises(NotCompiledInTime):
            future.result()
    assert report.not_in_time == {0, 1} and not (tmp_path / "never.log").exists()


def test_without_a_process_to_fork_each_compile_fails_as_its_own_and_none_is_left_waiting(tmp_path, monkeypatch):
    from geak.evaluator.job import process_ties

    def refused():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(process_ties, "fork_process", refused)
    executor = ForkedCompiles(2)
    futures = [executor.submit(recorder(tmp_path / f"{i}.log", i)) for i in range(3)]
    report = executor.run(time.monotonic() + 60)
    assert all(f.done() for f in futures) and (report.compiled, report.failed) == (0, 3)
    with pytest.raises(RuntimeError, match="no process to compile in"):
        futures[0].result()


def test_a_result_asked_for_before_the_run_compiles_here_at_once(tmp_path):
    executor = ForkedCompiles(2)
    future = executor.submit(recorder(tmp_path / "now.log", 7))
    assert future.result() == 7  # no wait for a run this very thread would have to start
    assert executor.run(time.monotonic() + 60).compiled == 1
    assert (tmp_path / "now.log").read_text().split() == [str(os.getpid())]


def compilable_kernel(tmp_path: Path, monkeypatch) -> tuple[Any, Any, Any]:
    """(triton, an ASTSource of a small kernel, an H100/H200 target), Triton's cache in `tmp_path`; skips where this
    Triton cannot compile for an NVIDIA GPU."""
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip("this Triton has no NVIDIA compiler (ptxas) to compile for a GPU target")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))

    @triton.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    source = ASTSource(double, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 256})
    return triton, source, GPUTarget("cuda", 90, 32)


def test_a_real_triton_compile_for_a_gpu_target_runs_in_a_child_without_a_gpu(tmp_path, monkeypatch):
    triton, source, target = compilable_kernel(tmp_path, monkeypatch)
    executor = ForkedCompiles(2)
    future = executor.submit(triton.compile, source, target=target, options={"num_warps": 4})
    report = executor.run(time.monotonic() + 120)
    assert report.compiled == 1, future.exception()
    kernel = future.result()
    assert kernel.hash and list((tmp_path / "cache").rglob("*.cubin"))  # the child's binary, read back here


def keyed_compile(tmp_path: Path, monkeypatch) -> tuple[Any, Any, list[int]]:
    """(Triton's key of a small kernel's compile, that compile, the processes forked from now on) — skips where this
    Triton cannot say the key its JIT submits a compile under."""
    triton, source, target = compilable_kernel(tmp_path, monkeypatch)
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.compiler.compiler import make_backend

    try:
        from triton.runtime.cache import get_cache_key  # the key Triton's JIT submits a compile under
    except ImportError:
        pytest.skip("this Triton does not name its compile keys with get_cache_key")
    from geak.evaluator.job import process_ties

    backend = make_backend(target)
    options = backend.parse_options({"num_warps": 4})
    key = get_cache_key(source, backend, options, get_cache_invalidating_env_vars())
    forks: list[int] = []
    real_fork = process_ties.fork_process
    monkeypatch.setattr(process_ties, "fork_process", lambda: forks.append(1) or real_fork())
    return key, lambda: triton.compile(source, target=target, options=options.__dict__), forks


def submit_callbacks() -> list[Any]:
    """What Triton's ``AsyncCompileMode.submit`` takes after the key and the compile (finalize, and cleanup)."""
    from triton.runtime._async_compile import AsyncCompileMode

    return [lambda *_: None] * (len(inspect.signature(AsyncCompileMode.submit).parameters) - 3)


def test_a_compile_already_in_the_cache_is_read_here_and_no_process_is_forked_for_it(tmp_path, monkeypatch):
    from geak.evaluator.job.compile.forked import compile_mode, in_triton_cache

    key, compile_, forks = keyed_compile(tmp_path, monkeypatch)

    def submitted() -> Any:
        executor = ForkedCompiles(2)
        with compile_mode(executor) as mode:
            future = mode.submit(key, compile_, *submit_callbacks())
            report = executor.run(time.monotonic() + 120)
        return future.result(), report

    assert not in_triton_cache(key)
    first, report = submitted()  # compiled in a child, as before
    assert report.compiled == 1 and forks == [1] and in_triton_cache(key)
    again, report = submitted()  # read here: no process forked for it
    assert report.compiled == 1 and forks == [1] and again.hash == first.hash


def test_a_compile_another_process_put_in_the_cache_meanwhile_is_read_at_its_turn(tmp_path, monkeypatch):
    """A check compiles a kernel itself while its dry pass (``compile.dry_pass``) still has it queued: the dry pass
    reads it at its turn, with no process forked for it."""
    from geak.evaluator.job.compile.forked import compile_mode, in_triton_cache

    key, compile_, forks = keyed_compile(tmp_path, monkeypatch)
    executor = ForkedCompiles(2)
    with compile_mode(executor) as mode:
        future = mode.submit(key, compile_, *submit_callbacks())
        assert not in_triton_cache(key)
        compile_()  # meanwhile, the job's own compile of the same kernel
        report = executor.run(time.monotonic() + 120)
    assert report.compiled == 1 and forks == [] and future.result().hash


def test_a_launch_that_reuses_a_pending_compile_is_told_apart_from_one_that_submits_it():
    """Two variants with one kernel: Triton's mode hands the second the first's pending compile, and the screening
    must know that the second needs it too (else, not compiled in the time, it compiles at its run, unbounded)."""
    from geak.evaluator.job.compile.forked import compile_mode

    executor = ForkedCompiles(2)
    callbacks = submit_callbacks()
    with compile_mode(executor) as mode:
        slow = mode.submit("geak-test-slow-kernel", lambda: time.sleep(30), *callbacks)
        again = mode.submit("geak-test-slow-kernel", lambda: time.sleep(30), *callbacks)
        other = mode.submit("geak-test-quick-kernel", lambda: "compiled", *callbacks)
        asked = list(executor.asked)
        report = executor.run(time.monotonic() + 1.0)
    assert again is slow and asked == [0, 0, 1] and report.not_in_time == {0}
    assert other.result() == "compiled"


def test_idle_cores_are_the_cores_less_the_load_and_none_where_the_load_cannot_be_read(monkeypatch):
    from geak.evaluator.job.compile import forked

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.6, 2.0, 1.0))
    assert forked.idle_cores() == 12

    def unreadable():
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unreadable)
    assert forked.idle_cores() == 0
