"""Every corpus kernel passes `geak check` (Triton's interpreter on CPU; kernels marked `# geak-gpu-only` are
skipped here with their reason and run on the GPU by benchmarks/gpu_evaluator_report.py)."""

from __future__ import annotations

import asyncio
import os

import pytest

from geak.agent.retrieval import KernelCorpus
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.triton_file import read_triton_file
from geak.snippets import KERNELS_DIR

ENTRIES = KernelCorpus.load().entries
FAMILIES = {"elementwise", "activation", "softmax", "normalization", "reduction", "scan", "layout", "indexing",
            "atomic", "random", "loss", "sort", "matmul", "attention", "quantization", "convolution"}  # fmt: skip


def test_corpus_size_and_headers():
    assert len(ENTRIES) >= 40
    for entry in ENTRIES:
        assert entry.family in FAMILIES, f"{entry.name}: family {entry.family!r}"
        tfile = read_triton_file(entry.path)
        assert tfile.tests, f"{entry.name}: no test"
        assert tfile.benches, f"{entry.name}: no bench_ function"
    formats = {read_triton_file(e.path).format for e in ENTRIES}
    assert formats == {"native", "tritonbench"}


@pytest.fixture(scope="module")
def verdicts():
    """All CPU-runnable corpus files, checked concurrently (one worker per core)."""
    runnable = [e for e in ENTRIES if not e.gpu_only]

    async def check_all():
        options = EvalOptions(backend="interpreter", timeout_s=240, spares=0, max_concurrent=os.cpu_count() or 2)
        async with Evaluator(options) as evaluator:
            results = await asyncio.gather(*(evaluator.check(e.path) for e in runnable))
        return {e.name: r for e, r in zip(runnable, results, strict=True)}

    return asyncio.run(check_all())


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_corpus_kernel_passes(entry, verdicts):
    if entry.gpu_only:
        pytest.skip(f"GPU only: {entry.gpu_only}")
    result = verdicts[entry.name]
    assert result.ok, f"{entry.name}: {result.message}\n{result.output_tail}"
    assert result.stage == "exec", f"{entry.name}: its tests must assert against a PyTorch reference"
    assert all(sum(t.launches.values()) > 0 for t in result.tests), f"{entry.name}: a test launched no kernel"


def test_kernels_dir_is_package_data():
    assert KERNELS_DIR.is_dir() and any(KERNELS_DIR.glob("*.py"))
