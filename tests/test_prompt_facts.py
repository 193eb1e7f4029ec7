"""What the prompts carry of a file: the test trimmed to what the checks and the timing run, the knowledge chosen by
the kernel's family, the contract; over the suites, within a prompt size a model reads whole."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from geak.agent import prompts
from geak.agent.knowledge import for_code, knowledge_for
from geak.agent.trimmed_test import trimmed_test
from geak.evaluator.triton_file import parse_triton_file, read_triton_file

FIXTURES = Path(__file__).parent / "fixtures"
ROCM = Path(__file__).resolve().parents[1].parent / "shared" / "suites" / "rocm" / "ROCm_v1"
needs_suites = pytest.mark.skipif(not ROCM.is_dir(), reason="the suites are not at ../shared/suites")
ROCM_DEVICE = "AMD Instinct MI300X (rocm, gfx942)"

PYTEST_FILE = '''import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def copy(x):
    y = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    return y


##################################################################################################################################################
result_gold = {}
PERF_SHAPES = [4096, 1 << 20]


def make_input(n):
    """A docstring the model does not need."""
    # and a comment
    return torch.randn(n, device="cuda")


def parse_args():
    import argparse
    return argparse.ArgumentParser().parse_args()


@pytest.mark.parametrize("n", [7, 300])
def test_copy(n, request):
    x = make_input(n)
    result_gold[request.node.name] = copy(x)


@pytest.mark.parametrize("n", PERF_SHAPES)
def test_performance(n, request):
    x = make_input(n)
    for _ in range(100):
        copy(x)


if __name__ == "__main__":
    parse_args()
'''


def test_the_test_is_trimmed_to_what_the_checks_and_the_timing_run():
    excerpt = trimmed_test(parse_triton_file(PYTEST_FILE, "copy.py"))
    assert "def test_copy(n, request):\n    x = make_input(n)" in excerpt  # the test, whole
    assert "def make_input(n):\n    return torch.randn" in excerpt  # what it uses, without docstring and comments
    assert "result_gold = {}" in excerpt
    assert "PERF_SHAPES = [4096, 1 << 20]" in excerpt
    assert '@pytest.mark.parametrize("n", PERF_SHAPES)\ndef test_performance(n, request):\n    ...' in excerpt
    assert "range(100)" not in excerpt and "body omitted" in excerpt  # the timed shapes, not the harness
    assert "parse_args" not in excerpt and "__main__" not in excerpt
    assert excerpt.startswith("# (2 statements of harness the checks do not run are omitted")


def test_a_rocm_fixture_keeps_its_test_and_drops_the_result_saver():
    original = read_triton_file(FIXTURES / "suites" / "rocm" / "ROCm_v1" / "naive_softmax.py")
    excerpt = trimmed_test(original)
    assert "@pytest.mark.parametrize('M,N', [(8, 100), (3, 257)])\ndef test_softmax(M, N, request):" in excerpt
    assert "test_save_results" not in excerpt


def test_knowledge_is_chosen_by_the_kernels_family():
    knowledge = knowledge_for("rocm", "gfx942")
    softmax = "m = tl.max(x, axis=0)\ny = tl.exp(x - m)\ntl.store(out, y / tl.sum(y, axis=0))"
    matmul = "acc += tl.dot(a, b)"
    assert "## Reductions and scans" in for_code(knowledge, softmax)
    for absent in ("## Matrix multiply", "## Matrix cores (MFMA)", "## Atomics", "## Random numbers"):
        assert absent not in for_code(knowledge, softmax)
    for present in ("## Matrix multiply", "## Matrix cores (MFMA)", "## Correctness rules", "## Execution model"):
        assert present in for_code(knowledge, matmul)
    assert "## Reductions and scans" not in for_code(knowledge, matmul)


@needs_suites
def test_rocm_generate_prompts_keep_the_contract_within_a_readable_size():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from prompt_sizes import sizes

    after = []
    for path in sorted(ROCM.glob("*.py")):
        original = read_triton_file(path)
        ctx = prompts.Context(original, ROCM_DEVICE, "", True, search_after=True)
        system, user = (m["content"] for m in prompts.generate(ctx, original.kernel_section, None))
        assert ctx.contract.signatures and "(none)" not in system, path.name
        for signature in ctx.contract.signatures:
            assert f"`{signature.line}`" in system, (path.name, signature.line)
        for test in original.tests:
            assert f"def {test.split('::')[-1]}(" in user, (path.name, test)
        before, size = sizes(path, ROCM_DEVICE, "rocm", "gfx942")
        assert size < before, path.name
        after.append(size)
    assert statistics.median(after) <= 20_000
