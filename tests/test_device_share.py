"""A timing has the device alone: it waits for running checks, and checks that arrive meanwhile wait for it."""

from __future__ import annotations

import asyncio

from geak.evaluator.device_share import TIMED_KINDS, DeviceShare


def test_a_timing_waits_for_running_checks_and_goes_before_later_ones():
    async def go() -> list[str]:
        share, log = DeviceShare(), []

        async def job(name: str, alone: bool, start_after: float, hold: float) -> None:
            await asyncio.sleep(start_after)
            async with share.use(alone=alone):
                log.append(f"+{name}")
                await asyncio.sleep(hold)
                log.append(f"-{name}")

        await asyncio.gather(
            job("check1", False, 0.0, 0.05),
            job("check2", False, 0.0, 0.10),
            job("bench", True, 0.02, 0.05),
            job("check3", False, 0.04, 0.01),  # arrives while the timing waits: goes after it
        )
        return log

    log = asyncio.run(go())
    assert log.index("+bench") > max(log.index("-check1"), log.index("-check2"))
    assert log.index("+check3") > log.index("-bench")
    assert log.index("-bench") == log.index("+bench") + 1  # nothing ran during the timing


def test_checks_share_the_device():
    async def go() -> int:
        share, inside, most = DeviceShare(), [0], [0]

        async def check() -> None:
            async with share.use(alone=False):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                await asyncio.sleep(0.02)
                inside[0] -= 1

        await asyncio.gather(*(check() for _ in range(4)))
        return most[0]

    assert asyncio.run(go()) == 4
    assert {"bench", "screen", "peaks"} == TIMED_KINDS


def test_out_of_device_memory_is_read_from_tests_probes_and_the_import():
    from geak.evaluator.device_share import out_of_device_memory

    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB"
    assert out_of_device_memory({"tests": [{"name": "t", "kind": "error", "message": oom}]})
    assert out_of_device_memory({"tests": [], "fresh": [{"status": "error", "message": oom}]})
    assert out_of_device_memory({"import_error": {"message": "HIP out of memory"}})
    assert not out_of_device_memory({"tests": [{"name": "t", "kind": "assert", "message": "3 != 4"}]})
    assert not out_of_device_memory(None)


def test_a_job_out_of_device_memory_runs_once_more_alone_only_where_jobs_share_the_device():
    from pathlib import Path

    from geak.evaluator.api import EvalOptions, Evaluator

    async def jobs_for(max_concurrent: int) -> tuple[int, str]:
        options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, max_concurrent=max_concurrent)
        async with Evaluator(options) as ev:
            result = await ev.check(Path(__file__).parent / "fixtures" / "out_of_device_memory.py")
            return ev.pool.jobs_run, result.message

    shared, message = asyncio.run(jobs_for(2))
    alone, _ = asyncio.run(jobs_for(1))
    assert "out of memory" in message
    assert shared == 2 * alone


def test_a_gpu_id_counts_among_the_gpus_the_caller_sees(monkeypatch):
    import pytest

    from geak.evaluator.pool import WorkerPool, WorkerStartError, pin_device

    assert pin_device({}, 1) == {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"}
    assert pin_device({"CUDA_VISIBLE_DEVICES": "2,3"}, 0) == {"CUDA_VISIBLE_DEVICES": "2"}
    assert pin_device({"CUDA_VISIBLE_DEVICES": "2, 3"}, 1) == {"CUDA_VISIBLE_DEVICES": "3"}
    assert pin_device({"HIP_VISIBLE_DEVICES": "1,0"}, 0, hip=True) == {"HIP_VISIBLE_DEVICES": "1"}
    # a CUDA build does not read HIP_VISIBLE_DEVICES: one left over from a ROCm setup hides nothing
    both = {"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    assert pin_device({"HIP_VISIBLE_DEVICES": ""}, 0, hip=False) == both
    assert pin_device({"CUDA_VISIBLE_DEVICES": "GPU-5a1c,GPU-77b2"}, 1) == {"CUDA_VISIBLE_DEVICES": "GPU-77b2"}
    with pytest.raises(WorkerStartError, match="GPU 2 is not visible: CUDA_VISIBLE_DEVICES=3 shows 1 GPU"):
        pin_device({"CUDA_VISIBLE_DEVICES": "3"}, 2)
    with pytest.raises(WorkerStartError, match="GPU 0 is not visible: CUDA_VISIBLE_DEVICES= shows 0 GPU"):
        pin_device({"CUDA_VISIBLE_DEVICES": ""}, 0)  # set but empty: CUDA shows no GPU, so neither does GEAK
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(WorkerStartError, match="not visible"):
        WorkerPool(gpu_id=5, spares=0)


def test_a_sharer_that_goes_alone_waits_for_the_others_and_holds_newcomers_back():
    async def go() -> list[str]:
        share, log = DeviceShare(), []

        async def check(name: str, start_after: float, hold: float) -> None:
            await asyncio.sleep(start_after)
            async with share.use(alone=False):
                log.append(f"+{name}")
                await asyncio.sleep(hold)
                log.append(f"-{name}")

        async def timing() -> None:
            async with share.use(alone=False) as hold:
                log.append("+capture")  # shares the device while it captures its calls
                await asyncio.sleep(0.02)
                await hold.go_alone()
                log.append("+timed")
                await asyncio.sleep(0.03)
                log.append("-timed")

        await asyncio.gather(check("check1", 0.0, 0.08), timing(), check("check2", 0.04, 0.01))
        return log

    log = asyncio.run(go())
    assert log.index("+capture") < log.index("-check1")  # captured beside a running check
    assert log.index("+timed") > log.index("-check1")  # measured only once it was gone
    assert log.index("+check2") > log.index("-timed")  # a check that arrived meanwhile waited
    assert log.index("-timed") == log.index("+timed") + 1


def test_a_timing_job_captures_beside_checks_and_measures_alone(tmp_path):
    """Through the real pool and worker: the timing job's capture overlaps a slow check, and it is granted the device
    only once the check is done (on the CPU the job then says timing needs a GPU, after the grant)."""
    import time
    from pathlib import Path

    from interrupts import slow_add_native

    from geak.evaluator.api import EvalOptions, Evaluator
    from geak.evaluator.bench import bench_job
    from geak.evaluator.check import check_job
    from geak.evaluator.shared.sequential import RoundPlan
    from geak.evaluator.triton_file import read_triton_file

    async def go() -> dict[str, float]:
        options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, max_concurrent=2, fresh_inputs=False)
        marks: dict[str, float] = {}
        async with Evaluator(options) as ev:
            slow = slow_add_native(tmp_path, seconds=3.0)
            check_dir, bench_dir = tmp_path / "check", tmp_path / "bench"
            for d in (check_dir, bench_dir):
                (d / "outputs").mkdir(parents=True)
            owner = read_triton_file(slow)
            (check_dir / "add_native.py").write_text(slow.read_text())
            plain = (Path(__file__).parent / "fixtures" / "add_native.py").read_text()
            (bench_dir / "candidate.py").write_text(plain.split("def bench_add")[0])  # the test's calls are timed
            check = check_job(check_dir / "add_native.py", "m_check", owner, check_dir, options, None)
            module = {"label": "candidate", "path": str(bench_dir / "candidate.py"), "module_name": "m_bench",
                      "wrappers": list(owner.entry_points), "kernels": [k.name for k in owner.kernels]}  # fmt: skip
            timed = read_triton_file(bench_dir / "candidate.py")
            bench = bench_job([module], timed, options, bench_dir / "outputs", RoundPlan.fixed(6))

            def on_bench(event: dict) -> None:
                if event.get("bench") == "waiting for the device alone":
                    marks["bench asks"] = time.monotonic()

            async def run_check() -> None:
                await ev.pool.run(check, timeout_s=60)
                marks["check done"] = time.monotonic()

            async def run_bench() -> None:
                await asyncio.sleep(0.5)  # the check is under way
                outcome = await ev.pool.run(bench, timeout_s=60, on_event=on_bench)
                marks["bench done"] = time.monotonic()
                marks["bench said"] = outcome.result.get("error", "") if outcome.result else outcome.message

            await asyncio.gather(run_check(), run_bench())
        return marks

    marks = asyncio.run(go())
    assert "timing needs a GPU" in marks["bench said"]
    assert marks["bench asks"] < marks["check done"] < marks["bench done"]
