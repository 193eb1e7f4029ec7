"""What the prompts carry of a file: the test trimmed to what the checks and the timing run, the knowledge chosen by
the kernel's family, the contract; over the suites, within a prompt size a model reads whole."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from geak.agent import prompts
from geak.agent.knowledge import fit, for_code, knowledge_for
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
    assert "result_gold = {}" in excerpt  # its test's call is a store into it
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


ROCM_STYLE = PYTEST_FILE.replace(
    "    result_gold[request.node.name] = copy(x)",
    "    out = copy(x)\n    name = request.node.name\n    key = name.replace('::', '_')\n"
    "    result_gold[key] = out.clone().detach().cpu()\n    torch.testing.assert_close(out, x)",
).replace("import pytest\n", "import pytest\nimport json\nimport pytest\n")


def test_result_savers_and_unused_imports_are_left_out_but_never_a_call():
    excerpt = trimmed_test(parse_triton_file(ROCM_STYLE, "copy.py"))
    assert "result_gold" not in excerpt and "request.node.name" not in excerpt and "key =" not in excerpt
    assert "def test_copy(n, request):\n    x = make_input(n)\n    out = copy(x)\n    torch.testing" in excerpt
    saved_call = trimmed_test(parse_triton_file(PYTEST_FILE, "copy.py"))
    assert "result_gold[request.node.name] = copy(x)" in saved_call  # the store is the test's call: kept


def test_without_helper_bodies_the_helpers_keep_their_def_lines():
    excerpt = trimmed_test(parse_triton_file(PYTEST_FILE, "copy.py"), helper_bodies=False)
    omitted = "    ...  # 3 lines of input preparation (calls nothing of the kernel section); body omitted"
    assert f"def make_input(n):\n{omitted}" in excerpt
    assert "torch.randn" not in excerpt and "def test_copy(n, request):\n    x = make_input(n)" in excerpt


def test_knowledge_fits_a_room_by_priority_with_its_titles():
    knowledge = for_code(knowledge_for("rocm", "gfx942"), "acc += tl.dot(a, b)")
    fitted = fit(knowledge, 3000)
    assert len(fitted) <= 3000 and "## Correctness rules" in fitted and "## Matrix multiply" in fitted
    assert "## Good starting configurations" not in fitted and "## The hardware" not in fitted
    assert fitted.startswith("# Writing fast, correct Triton kernels") and fit(knowledge, 10) == ""
    amd = fit(knowledge, 4500)
    assert "# Target: AMD Instinct" in amd and "## Matrix cores" in amd  # a target's section comes with its title
    assert fit(knowledge, len(knowledge)) == knowledge


@needs_suites
def test_every_rocm_generate_prompt_keeps_the_contract_and_the_shapes_within_the_budget():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from prompt_sizes import sizes

    for path in sorted(ROCM.glob("*.py")):
        original = read_triton_file(path)
        knowledge = for_code(knowledge_for("rocm", "gfx942"), original.kernel_section)
        ctx = prompts.Context(original, ROCM_DEVICE, knowledge, True, search_after=True)
        messages = prompts.generate(ctx, original.kernel_section, None)
        system, user = (m["content"] for m in messages)
        assert prompts.size(messages) <= prompts.PROMPT_CHARS, path.name
        assert ctx.contract.signatures and "(none)" not in system, path.name
        for signature in ctx.contract.signatures:
            assert f"`{signature.line}`" in system, (path.name, signature.line)
        for test in original.tests:
            assert f"def {test.split('::')[-1]}(" in user, (path.name, test)
        assert original.kernel_section.rstrip() in user, path.name  # the code to rewrite, whole
        for line in ctx.trimmed_test.split("\n"):  # the timed shapes: every parametrization
            if line.startswith("@pytest.mark.parametrize"):
                assert line in user, (path.name, line)
        before, size, _, _ = sizes(path, ROCM_DEVICE, "rocm", "gfx942")
        assert size < before, path.name
