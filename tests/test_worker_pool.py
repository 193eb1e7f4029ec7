"""The fork-server worker pool (CPU interpreter): failure modes and recovery on one pool, isolation between jobs,
cancellation, a dying fork server, clean shutdown. Its throughput against a fresh interpreter per check is measured,
not asserted (no test asserts a timing): `benchmarks/gpu_evaluator_report.py`, `docs/results.md`."""

import asyncio
import os
import signal
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.check import check_job
from geak.evaluator.pool import WorkerPool, cpu_threads_per_job
from geak.evaluator.triton_file import read_triton_file
from geak.evaluator.zygote import THREAD_VARIABLES, WorkerStartError, Zygote

FIXTURES = Path(__file__).parent / "fixtures"
ADD = FIXTURES / "add_native.py"
KERNEL_PART = ADD.read_text().split("def test_add")[0]


def interpreter_options(timeout_s: float = 60.0) -> EvalOptions:
    return EvalOptions(backend="interpreter", timeout_s=timeout_s, fresh_inputs=False)


def job_for(path: Path, tmp_path: Path, name: str) -> dict:
    """A check job for a copy of `path` in its own job directory (a sandboxed job sees nothing else)."""
    job_dir = tmp_path / name
    (job_dir / "outputs").mkdir(parents=True)
    copy = job_dir / path.name
    copy.write_text(path.read_text())
    return check_job(copy, f"geak_pool_test_{name}", read_triton_file(copy), job_dir, interpreter_options(), None)


def torch_sees_a_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_until_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not is_gone(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def the_zygote_pid(pool: WorkerPool) -> int:
    """The fork server's own process (under bubblewrap, the pool's child is bubblewrap's)."""
    (zygote,) = pool._idle
    return zygote.pid


def test_failures_are_reported_and_the_same_zygote_serves_the_next_check():
    async def scenario():
        async with Evaluator(interpreter_options(timeout_s=4)) as ev:
            first = await ev.check(ADD)
            assert first.ok, first.message
            zygote = the_zygote_pid(ev.pool)
            failures = {
                "hang.py": "timed out after 4 s (the worker was killed) in test_add",
                "crash.py": "the worker process crashed (SIGSEGV) in test_add",
                "exit_zero.py": "the worker exited with status 0 without reporting a result in test_add",
            }
            for fixture, message in failures.items():
                failed = await ev.check(FIXTURES / fixture)
                assert not failed.ok and failed.stage == "call"
                assert failed.message.startswith(message)  # (the interpreter adds what a crash there means)
                again = await ev.check(ADD)
                assert again.ok, f"after {fixture}: {again.message}"
                assert the_zygote_pid(ev.pool) == zygote, f"the zygote was replaced after {fixture}"
            assert ev.pool.jobs_run == 7

    asyncio.run(scenario())


def test_user_output_never_reaches_the_protocol(tmp_path):
    source = KERNEL_PART + (
        "import os, sys\n"
        'print(\'{"event": "result", "tests": []}\')\n'
        "\n\n"
        "def test_add():\n"
        '    print(\'{"event": "exited", "code": 0}\')\n'
        '    os.write(1, b\'{"event": "progress", "test": "fake"}\\n\')\n'
        '    sys.__stdout__.write("no newline at the end")\n'
        '    sys.stderr.write("to stderr\\n")\n'
        "    x = torch.randn(100, device='cuda')\n"
        "    out = add(x, x)\n"
        "    torch.testing.assert_close(out, 2 * x)\n"
        "    return out\n"
    )

    async def scenario():
        async with Evaluator(interpreter_options()) as ev:
            result = await ev.check(source=source)
            assert result.ok, result.message
            assert [t.name for t in result.tests] == ["test_add"]
            for printed in ('{"event": "result"', '{"event": "exited"', '"test": "fake"', "to stderr"):
                assert printed in result.output_tail
            assert (await ev.check(ADD)).ok

    asyncio.run(scenario())


def test_state_does_not_leak_from_one_job_into_the_next():
    sandbox = "sandbox = next(m for n, m in sys.modules.items() if n.endswith('.job.sandbox'))\n"  # the job's own
    leaker = KERNEL_PART + (
        "import os, sys, types\n"
        + sandbox
        + "\n\n"
        "def test_add():\n"
        "    torch.allclose = lambda *args, **kwargs: True\n"
        "    sandbox.LEAKED = True\n"
        "    os.environ['GEAK_LEAKED'] = '1'\n"
        "    sys.modules['leaked_module'] = types.ModuleType('leaked_module')\n"
        "    assert torch.allclose(torch.zeros(1), torch.ones(1))\n"
        "    x = torch.randn(10, device='cuda')\n"
        "    return add(x, x)\n"
    )
    victim = KERNEL_PART + (
        "import os, sys\n"
        + sandbox
        + "\n\n"
        "def test_add():\n"
        "    assert not torch.allclose(torch.zeros(1), torch.ones(1)), 'torch.allclose is still patched'\n"
        "    assert not hasattr(sandbox, 'LEAKED'), 'a module global leaked'\n"
        "    assert 'GEAK_LEAKED' not in os.environ, 'an environment variable leaked'\n"
        "    assert 'leaked_module' not in sys.modules, 'a module of an earlier job leaked'\n"
        "    x = torch.randn(10, device='cuda')\n"
        "    return add(x, x)\n"
    )

    async def scenario():
        async with Evaluator(interpreter_options()) as ev:
            assert (await ev.check(source=leaker)).ok
            result = await ev.check(source=victim)
            assert result.ok, result.message

    asyncio.run(scenario())


def test_a_timeout_kills_the_job_process_and_reuses_the_zygote(tmp_path):
    async def scenario():
        async with WorkerPool(backend="interpreter") as pool:
            started: list[int] = []
            outcome = await pool.run(
                job_for(FIXTURES / "hang.py", tmp_path, "hang"),
                timeout_s=2,
                on_event=lambda e: started.append(e["pid"]) if e["event"] == "started" else None,
            )
            assert outcome.status == "timeout"
            assert outcome.last_progress == {"event": "progress", "test": "test_add"}
            assert is_gone(started[0]), "the killed job process was not reaped"
            zygote = the_zygote_pid(pool)
            assert not is_gone(zygote)
            passed = await pool.run(job_for(ADD, tmp_path, "add"), timeout_s=60)
            assert passed.status == "ok" and passed.result["tests"][0]["kind"] == "pass"
            assert the_zygote_pid(pool) == zygote

    asyncio.run(scenario())


def test_cancelling_the_task_kills_the_job_process_not_the_zygote(tmp_path):
    async def scenario():
        async with WorkerPool(backend="interpreter") as pool:
            events: list[dict] = []
            task = asyncio.ensure_future(
                pool.run(job_for(FIXTURES / "hang.py", tmp_path, "hang"), timeout_s=120, on_event=events.append)
            )
            while not any(e["event"] == "progress" for e in events):
                await asyncio.sleep(0.02)
            child = events[0]["pid"]
            zygote = parent_pid(child)
            await asyncio.sleep(0.3)  # well inside the endless loop
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await wait_until_gone(child), "the job process survived the cancellation"
            assert not is_gone(zygote)

            seen: list[dict] = []
            passed = await pool.run(job_for(ADD, tmp_path, "add"), timeout_s=60, on_event=seen.append)
            assert passed.status == "ok", passed.message
            assert seen[0]["event"] == "started" and seen[0]["pid"] != child
            assert the_zygote_pid(pool) == zygote

    asyncio.run(scenario())


def test_a_cancellation_that_lands_as_a_message_arrives_is_not_swallowed(tmp_path):
    """Ctrl-C must stop a run even when it comes just as the worker's next line arrives (`asyncio.wait_for` on
    Python 3.11 returned the line and dropped the cancellation: the run went on and exited 0)."""

    class Proc:
        returncode = None

        def __init__(self) -> None:
            self.stdout = asyncio.StreamReader()

    async def scenario():
        zygote = Zygote(Proc(), tmp_path)  # type: ignore[arg-type]
        task = asyncio.ensure_future(zygote.receive(asyncio.get_running_loop().time() + 60))
        await asyncio.sleep(0)  # the task now waits for a line
        zygote.proc.stdout.feed_data(b'{"event": "progress"}\n')  # the line arrives...
        task.cancel()  # ...and the cancellation, in the same turn of the loop
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())


def test_a_zygote_that_dies_is_replaced(tmp_path):
    async def scenario():
        async with WorkerPool(backend="interpreter", spares=1) as pool:
            started: list[int] = []

            def kill_the_zygote(event: dict) -> None:
                if event["event"] == "started":
                    started.append(event["pid"])
                elif event["event"] == "progress":
                    os.kill(parent_pid(started[0]), signal.SIGKILL)

            outcome = await pool.run(
                job_for(FIXTURES / "hang.py", tmp_path, "hang"), timeout_s=60, on_event=kill_the_zygote
            )
            assert outcome.status == "crashed"
            assert "the worker's fork server died (killed by SIGKILL) while running the job" in outcome.message
            assert await wait_until_gone(started[0]), "the job process outlived its zygote"
            passed = await pool.run(job_for(ADD, tmp_path, "add"), timeout_s=60)
            assert passed.status == "ok", passed.message

    asyncio.run(scenario())


def test_closing_the_pool_leaves_no_process_or_directory(tmp_path):
    async def scenario():
        pool = WorkerPool(backend="interpreter", spares=2, max_concurrent=2)
        info = await pool.runtime_info()
        assert info["backend"] == "interpreter" and info["arch"] is None
        assert len(pool._idle) + len(pool._starting) == 2  # the spare started beside the first
        outcomes = await asyncio.gather(
            pool.run(job_for(ADD, tmp_path, "a"), timeout_s=60),
            pool.run(job_for(ADD, tmp_path, "b"), timeout_s=60),
        )
        assert [o.status for o in outcomes] == ["ok", "ok"]
        zygotes = [(z.proc.pid, z.pid, z.workdir) for z in pool._idle]
        assert len(zygotes) == 2
        await pool.aclose()
        for pid, own_pid, workdir in zygotes:
            assert is_gone(pid) and await wait_until_gone(own_pid), "a zygote was left running or unreaped"
            assert not workdir.exists(), "a zygote's directory was left behind"
        with pytest.raises(RuntimeError, match="closed"):
            await pool.run(job_for(ADD, tmp_path, "c"), timeout_s=60)

    asyncio.run(scenario())


@pytest.mark.skipif(torch_sees_a_gpu(), reason="this machine has a GPU")
def test_the_backend_is_probed_in_a_forked_process_and_a_missing_gpu_is_a_clear_start_error(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # other runs on this machine make worker dirs too

    def worker_dirs() -> set[str]:
        return {p.name for p in Path(tempfile.gettempdir()).iterdir()}

    async def scenario():
        before = worker_dirs()
        async with WorkerPool(backend="auto") as pool:
            assert (await pool.runtime_info())["backend"] == "interpreter"
        async with WorkerPool(backend="gpu") as pool:
            with pytest.raises(WorkerStartError, match="a GPU backend was requested but torch sees no CUDA/ROCm"):
                await pool.runtime_info()
        assert worker_dirs() <= before

    asyncio.run(scenario())


def test_processes_a_job_leaves_running_are_killed_and_reaped():
    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"  # a sleep time no other process uses
    source = KERNEL_PART + (
        "import subprocess\n"
        "\n\n"
        "def test_add():\n"
        f"    subprocess.Popen(['sleep', {marker!r}])\n"
        f"    subprocess.Popen(['sleep', {marker!r}], start_new_session=True)\n"
        "    x = torch.randn(10, device='cuda')\n"
        "    return add(x, x)\n"
    )

    def still_running() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    async def scenario():
        for isolation in ("auto", "process"):
            async with Evaluator(replace(interpreter_options(), isolation=isolation)) as ev:
                result = await ev.check(source=source)
                assert result.ok, result.message
                assert still_running() == [], f"processes started by the job are still there ({isolation})"

    asyncio.run(scenario())


def threads_source(omp: str | None, mkl: str | None, most: int) -> str:
    """A file whose test passes only where its job's environment sets these thread counts and torch runs at most
    `most` threads."""
    return KERNEL_PART + (
        "import os\n"
        "\n\n"
        "def test_add():\n"
        f"    assert os.environ.get('OMP_NUM_THREADS') == {omp!r}, os.environ.get('OMP_NUM_THREADS')\n"
        f"    assert os.environ.get('MKL_NUM_THREADS') == {mkl!r}, os.environ.get('MKL_NUM_THREADS')\n"
        f"    assert torch.get_num_threads() <= {most}, torch.get_num_threads()\n"
        "    x = torch.randn(10, device='cuda')\n"
        "    return add(x, x)\n"
    )


def test_jobs_run_at_once_share_the_cores_unless_the_user_chose_their_threads(monkeypatch):
    assert cpu_threads_per_job(1, cores=16) is None
    assert [cpu_threads_per_job(n, cores=16) for n in (2, 4, 12, 32)] == [8, 4, 1, 1]
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    async def scenario():
        share = cpu_threads_per_job(2)
        alone_here = replace(interpreter_options(), max_concurrent=1, host_jobs=2)  # one of two evaluators, say
        async with Evaluator(alone_here) as ev:
            result = await ev.check(source=threads_source(str(share), str(share), share))
            assert result.ok, result.message
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the user's choice: nothing else is set beside it
        async with Evaluator(replace(interpreter_options(), max_concurrent=2)) as ev:
            result = await ev.check(source=threads_source("1", None, os.cpu_count() or 1))
            assert result.ok, result.message

    asyncio.run(scenario())


@pytest.mark.skipif(not torch_sees_a_gpu() or torch.version.hip is not None, reason="needs a CUDA GPU")
def test_a_check_job_waits_for_the_gpu_asleep_on_one_work_queue_and_a_timing_job_on_one_unless_streams_are_named():
    users_queues = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")

    def flags(timing_queues: str | None, extra: str = "") -> str:
        return KERNEL_PART + extra + (
            "import ctypes\n"
            "import os\n"
            "\n\n"
            "def context_flags():\n"
            "    torch.cuda.synchronize()\n"
            "    driver = ctypes.CDLL('libcuda.so.1')\n"
            "    flags = ctypes.c_uint()\n"
            "    assert driver.cuCtxGetFlags(ctypes.byref(flags)) == 0\n"
            "    return flags.value\n"
            "\n\n"
            "def test_add():\n"
            "    assert context_flags() & 0x7 == 0x4, hex(context_flags())  # CU_CTX_SCHED_BLOCKING_SYNC\n"
            "    assert os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS') == '1'\n"
            "    x = torch.randn(10, device='cuda')\n"
            "    return add(x, x)\n"
            "\n\n"
            "def bench_add():\n"
            "    assert context_flags() & 0x7 != 0x4, hex(context_flags())\n"
            f"    assert os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS') == {timing_queues!r}\n"
            "    x = torch.randn(1 << 20, device='cuda')\n"
            "    add(x, x)\n"
        )

    async def scenario():
        async with Evaluator(EvalOptions(backend="gpu", fresh_inputs=False, measure_peaks=False)) as ev:
            for source in (flags("1"), flags(users_queues, "SIDE = torch.cuda.Stream  # names a stream\n")):
                checked = await ev.check(source=source)
                assert checked.ok, checked.message
                timed = await ev.bench(source=source, check_first=False, rounds=2)
                assert timed.ok, timed.message

    asyncio.run(scenario())


def test_a_timing_job_has_one_work_queue_only_where_no_file_it_times_names_a_stream(tmp_path):
    from geak.evaluator.job.device_wait import one_work_queue_serves

    plain, streams, hidden = tmp_path / "plain.py", tmp_path / "streams.py", tmp_path / "hidden.py"
    plain.write_text("import torch\n\ndef f(x):\n    return x + 1\n")
    streams.write_text("import torch\n\nside = torch.cuda.Stream()\n")
    hidden.write_text("s = triton.runtime.driver.active.get_current_STREAM()\n")
    assert one_work_queue_serves([])  # a check, or the device's peaks
    assert one_work_queue_serves([str(plain), str(plain)])
    assert not one_work_queue_serves([str(plain), str(streams)])
    assert not one_work_queue_serves([str(hidden)])
    assert not one_work_queue_serves([str(plain), str(tmp_path / "gone.py")])  # unreadable: as if it named one


@pytest.mark.skipif(torch_sees_a_gpu(), reason="this machine has a GPU")
def test_without_a_gpu_runtime_a_job_keeps_the_default_wait_and_says_so():
    from geak.evaluator.job import device_wait

    assert device_wait.sleep_while_waiting(hip=False) is False
    assert device_wait.sleep_while_waiting(hip=True) is False
