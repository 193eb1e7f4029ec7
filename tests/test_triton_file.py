"""The file contract: formats, sections, composition and line origins, and clear errors."""

import ast
from pathlib import Path

import pytest

from geak.evaluator.triton_file import (
    SEPARATOR,
    TritonFileError,
    is_config_call,
    parse_triton_file,
    read_triton_file,
)

FIXTURES = Path(__file__).parent / "fixtures"


def test_native_sections_and_kernels():
    t = read_triton_file(FIXTURES / "add_native.py")
    assert t.format == "native"
    assert [k.name for k in t.kernels] == ["add_kernel"] and t.kernels[0].constexprs == ("BLOCK",)
    assert t.wrappers == ("add",) and t.tests == ("test_add",) and t.benches == ("bench_add",)
    assert "def test_add" not in t.kernel_section and "def test_add" in t.test_section
    assert len(t.kernel_section.splitlines()) <= len(t.text.splitlines())  # test lines are blanked, not moved
    assert t.asserting_tests == ("test_add",)


def test_tritonbench_separator_with_trailing_space_and_result_gold():
    t = read_triton_file(FIXTURES / "add_tritonbench.py")
    assert t.format == "tritonbench"
    assert t.tests == ("test_add",) and t.asserting_tests == ()
    composed = t.compose()
    assert SEPARATOR in composed.text
    assert "result_gold = test_add()" not in composed.text  # GEAK calls tests itself
    sep_line = t.text.splitlines().index(next(x for x in t.text.splitlines() if x.startswith("#" * 146))) + 1
    test_line = composed.text.splitlines().index("def test_add():") + 1
    assert composed.origin(test_line) == ("test", sep_line + 1)


def test_compose_candidate_keeps_reference_test():
    ref = read_triton_file(FIXTURES / "add_native.py")
    candidate = "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    pass\n"
    composed = ref.compose(candidate)
    assert composed.text.startswith(candidate)
    assert "def test_add" in composed.text
    assert composed.origin(6) == ("kernel", 6)


def test_test_only_helpers_move_with_the_test_but_wrappers_stay():
    src = """import torch
import numpy as np
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass

def _launch(x):
    k[(1,)](x, BLOCK=16)

def op(x):
    _launch(x)
    return x

def torch_reference(x):
    return np.asarray(x)

def test_op():
    assert op(1) == torch_reference(1)
"""
    t = parse_triton_file(src)
    assert t.wrappers == ("_launch", "op")
    assert "def torch_reference" in t.test_section and "import numpy" in t.test_section
    assert "def op" in t.kernel_section and "import torch" in t.kernel_section


@pytest.mark.parametrize(
    ("text", "kind", "words"),
    [
        ("def broken(:\n", "syntax", "syntax error"),
        ("import torch\n\ndef test_x():\n    pass\n", "not_triton", "no @triton.jit kernel"),
        ("import triton\n@triton.jit\ndef k(x):\n    pass\n", "not_triton", "no test found"),
    ],
)
def test_errors_name_what_is_missing(text, kind, words):
    with pytest.raises(TritonFileError) as info:
        parse_triton_file(text, "f.py")
    assert info.value.kind == kind and words in str(info.value)


def test_syntax_error_location():
    with pytest.raises(TritonFileError) as info:
        read_triton_file(FIXTURES / "syntax_error.py")
    assert info.value.line == 11


def test_candidate_needs_no_test():
    t = parse_triton_file("import triton\n@triton.jit\ndef k(x):\n    pass\n", require_tests=False)
    assert t.tests == ()


def test_autotuned_kernel_detected():
    src = """import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"B": 16})], key=["n"])
@triton.jit
def k(x, n, B: tl.constexpr):
    pass

def test_k():
    pass
"""
    (kernel,) = parse_triton_file(src).kernels
    assert kernel.autotuned and kernel.line == 6


def test_constexpr_parameters_however_spelled_and_only_those():
    src = """import triton
import triton.language as tl
from triton.language import constexpr

@triton.jit
def k(x, n_constexpr_like: int, A: tl.constexpr, B: "tl.constexpr", /, C: constexpr = 4, *, D: tl.constexpr = 8):
    pass

def test_k():
    pass
"""
    (kernel,) = parse_triton_file(src).kernels
    assert kernel.params == ("x", "n_constexpr_like", "A", "B", "C")
    assert kernel.constexprs == ("A", "B", "C", "D")


def test_a_config_call_is_one_named_config():
    texts = ("triton.Config({})", "Config({})", "tr.Config({})", "table[0]({})", "make()({})", "Configs({})")
    calls = [ast.parse(text, mode="eval").body for text in texts]
    assert [is_config_call(call) for call in calls] == [True, True, True, False, False, False]
