"""GPU ids of batch runs count among the GPUs this process sees, and each slot names the machine's GPU it uses."""

from __future__ import annotations

import asyncio

from geak.agent.batch.eval_slots import EvalSlot, visible_gpu_ids
from geak.evaluator import pool
from geak.evaluator.options import EvalOptions


class FakeEvaluator:
    async def runtime(self) -> dict:
        return {"device": "NVIDIA H100 80GB HBM3", "backend": "cuda", "arch": "sm_90"}


def test_visible_ids_are_counted_like_torch_counts_them(monkeypatch):
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpu_ids() == [0, 1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5a1c")
    assert visible_gpu_ids() == [0]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpu_ids() == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(pool, "_hip_build", lambda: False)
    assert visible_gpu_ids() == [0, 1, 2]  # a CUDA build reads only CUDA_VISIBLE_DEVICES
    monkeypatch.setattr(pool, "_hip_build", lambda: True)
    assert visible_gpu_ids() == [0]  # ROCm reads both: a worker's id must be visible under each


def test_each_slot_says_which_gpu_of_the_machine_it_uses(monkeypatch):
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    said = asyncio.run(EvalSlot("gpu 1", FakeEvaluator(), gpu="1").describe())
    assert said == "gpu 1: NVIDIA H100 80GB HBM3 (cuda, sm_90), CUDA_VISIBLE_DEVICES=3"


def test_each_gpu_evaluator_runs_jobs_per_gpu_jobs_at_once(monkeypatch):
    from geak.agent.batch.eval_slots import local_slots
    from geak.agent.batch.run_config import RunConfig
    from geak.agent.config import AgentConfig

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    run = RunConfig.model_construct(backend="auto", gpu_ids=[0, 1], workers=1, jobs_per_gpu=3)
    slots = local_slots(run, AgentConfig())
    assert [(s.name, s.gpu, s.evaluator.pool.max_concurrent) for s in slots] == [("gpu 0", "0", 3), ("gpu 1", "1", 3)]
    assert [s.evaluator.pool.host_jobs for s in slots] == [6, 6]  # their jobs' thread pools share the host's cores
    assert [s.evaluator.pool.spares for s in slots] == [3, 3]  # all start with the first

    async def close() -> None:
        await asyncio.gather(*(s.evaluator.aclose() for s in slots))

    asyncio.run(close())
    assert RunConfig.model_fields["jobs_per_gpu"].default == 2


def test_a_gpu_id_that_is_not_visible_is_a_configuration_error(monkeypatch):
    import pytest

    from geak.agent.batch.eval_slots import SlotError, local_slots
    from geak.agent.batch.run_config import RunConfig
    from geak.agent.config import AgentConfig

    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    run = RunConfig.model_construct(backend="auto", gpu_ids=[0, 3], workers=1, jobs_per_gpu=2)
    with pytest.raises(SlotError, match="gpu_ids: GPU 3 is not visible: CUDA_VISIBLE_DEVICES=0 shows 1 GPU"):
        local_slots(run, AgentConfig())


def test_batch_evaluators_skip_the_per_kernel_profile_no_record_reads():
    from geak.agent.batch.eval_slots import batch_eval_options
    from geak.agent.config import AgentConfig

    options = batch_eval_options(AgentConfig(), "gpu", 1)
    assert options.gpu_id == 1 and options.backend == "gpu" and not options.profile_kernels
    assert options.rep_ms < EvalOptions.rep_ms and options.max_bench_calls < EvalOptions.max_bench_calls
    assert options.max_bench_rounds < EvalOptions.max_bench_rounds and options.bench_rounds is None


def test_geak_eval_checks_as_many_at_once_as_the_cores_allow(monkeypatch):
    import os

    from geak.agent.batch.eval_slots import EVAL_JOBS_CAP, eval_jobs_per_gpu

    for cores, gpus, jobs in ((16, 1, 14), (32, 2, 15), (64, 1, EVAL_JOBS_CAP), (64, 8, 7), (2, 1, 2), (4, 4, 2)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cores: set(range(n)), raising=False)
        assert eval_jobs_per_gpu(gpus) == jobs, (cores, gpus)
