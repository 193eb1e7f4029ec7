"""RuntimeFacts reads exactly what a fork server reports of its runtime, and writes it back as plain data."""

import json

import pytest

from geak.evaluator.runtime_facts import RuntimeFacts

READY = {  # a "ready" message's facts, as the pool keeps them (``zygote.ZygoteLauncher.start``)
    "backend": "cuda",
    "device": "NVIDIA H100 80GB HBM3",
    "arch": "90",
    "units": 132,
    "memory_bytes": 85_045_231_616,
    "torch_version": "2.9.0",
    "triton_version": "3.5.0",
    "isolation": "namespaces",
    "isolation_reason": "",
    "grants": True,
}


def test_the_facts_a_worker_reports_round_trip():
    facts = RuntimeFacts.from_dict(READY)
    assert facts.backend == "cuda" and facts.grants is True
    assert facts.to_dict() == READY
    assert RuntimeFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts


def test_facts_not_reported_are_none():
    assert RuntimeFacts.from_dict({}) == RuntimeFacts()
    assert RuntimeFacts.from_dict({"backend": "interpreter"}).device is None


def test_an_unknown_fact_is_a_value_error():
    with pytest.raises(ValueError, match="unknown runtime fact"):
        RuntimeFacts.from_dict({**READY, "gpu": "0"})
