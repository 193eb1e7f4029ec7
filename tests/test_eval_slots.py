"""GPU ids of batch runs count among the GPUs this process sees, and each slot names the machine's GPU it uses."""

from __future__ import annotations

import asyncio

from geak.agent.eval_slots import EvalSlot, visible_gpu_ids


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


def test_each_slot_says_which_gpu_of_the_machine_it_uses(monkeypatch):
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    said = asyncio.run(EvalSlot("gpu 1", FakeEvaluator(), gpu="1").describe())
    assert said == "gpu 1: NVIDIA H100 80GB HBM3 (cuda, sm_90), CUDA_VISIBLE_DEVICES=3"
