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
    assert {"bench", "peaks"} == TIMED_KINDS


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
