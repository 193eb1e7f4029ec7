"""The fork server's description of the visible GPU, as the job side builds it from torch's device properties
(faked here: CI has no GPU), reaches the caller's ``RuntimeFacts`` whole. A field the probe reports that the
description lacks stopped every GPU worker from starting (`GpuDescription.__init__() got an unexpected keyword
argument 'units'`), which no CPU test saw."""

from __future__ import annotations

from dataclasses import asdict
from types import SimpleNamespace

from geak.evaluator.job import sandbox
from geak.evaluator.runtime_facts import RuntimeFacts

H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                       total_memory=85_520_809_984)  # fmt: skip


def test_the_probe_s_fields_make_a_description_and_reach_the_runtime_facts(monkeypatch):
    monkeypatch.setattr(sandbox.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(sandbox.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(sandbox.torch.cuda, "get_device_properties", lambda _: H100)
    monkeypatch.setattr(sandbox.torch.version, "hip", None)
    gpu = sandbox.GpuDescription(**sandbox._describe_gpu())
    assert (gpu.backend, gpu.device, gpu.arch, gpu.units, gpu.memory_bytes) == (
        "cuda", H100.name, "sm_90", 132, 85_520_809_984)  # fmt: skip
    info = sandbox.RuntimeInfo(gpu.backend, gpu.device, gpu.arch, "2.11", "3.6", gpu.units, gpu.memory_bytes)
    facts = RuntimeFacts.from_dict(asdict(info))  # strict: every field the worker reports is a known fact
    assert (facts.units, facts.memory_bytes) == (132, 85_520_809_984)
