"""Finding and rewriting the tunable launch parameters of Triton modules (pure source analysis)."""

import os
import subprocess
import sys
import textwrap

import pytest

from geak.agent.tuning.launch_params import (
    NUM_STAGES_CHOICES,
    NUM_WARPS_CHOICES,
    apply_params,
    autotuned_kernels,
    find_tunable_params,
)

VECTOR_ADD = '''\
"""Vector addition."""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # one program per block
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    return out


def test_add():
    x = torch.rand(3000, device="cuda")
    y = torch.rand(3000, device="cuda")
    out = add(x, y)
    torch.testing.assert_close(out, x + y)
    return out
'''

SOFTMAX = """\
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_warps = 8  # wide rows need more warps
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](
        y,
        x,
        x.stride(0),
        y.stride(0),
        n_cols,
        BLOCK_SIZE=BLOCK_SIZE,
        num_warps=num_warps,
    )
    return y
"""

AUTOTUNED_MATMUL = """\
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=2),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pass


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K)
    scale_kernel[(triton.cdiv(M * N, 512),)](c, M * N, BLOCK=512, num_warps=4)
    return c
"""

LAUNCHED_TWICE = """\
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n"])
def fill_kernel(ptr, value, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, value, mask=offs < n)


def fill_small(x):
    fill_kernel[(triton.cdiv(x.numel(), 256),)](x, 1.0, x.numel(), BLOCK=256, num_warps=2)


def fill_large(x):
    BLOCK = 4096
    fill_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, 2.0, x.numel(), BLOCK=BLOCK, num_stages=2)
"""


def by_key(source):
    return {p.key: p for p in find_tunable_params(source)}


def test_vector_add_literal_block_and_default_launch_options():
    params = by_key(VECTOR_ADD)
    assert set(params) == {
        "add_kernel:BLOCK_SIZE@L21",
        "add_kernel:num_warps@L21",
        "add_kernel:num_stages@L21",
    }
    block = params["add_kernel:BLOCK_SIZE@L21"]
    assert (block.kind, block.current, block.default) == ("constexpr", 1024, False)
    assert block.choices == (256, 512, 1024, 2048, 4096)
    warps = params["add_kernel:num_warps@L21"]
    assert (warps.kind, warps.current, warps.default, warps.choices) == (
        "num_warps",
        4,
        True,
        NUM_WARPS_CHOICES,
    )
    stages = params["add_kernel:num_stages@L21"]
    assert (stages.current, stages.default, stages.choices) == (3, True, NUM_STAGES_CHOICES)


def test_vector_add_rewrite_changes_only_the_launch_line():
    new = apply_params(
        VECTOR_ADD,
        {"add_kernel:BLOCK_SIZE@L21": 2048, "add_kernel:num_warps@L21": 8, "add_kernel:num_stages@L21": 3},
    )
    expected = VECTOR_ADD.replace(
        "add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)",
        "add_kernel[grid](x, y, out, n, BLOCK_SIZE=2048, num_warps=8)",
    )
    assert new == expected
    rewritten = by_key(new)
    assert set(rewritten) == set(by_key(VECTOR_ADD))  # keys are stable
    assert rewritten["add_kernel:num_warps@L21"].current == 8
    assert not rewritten["add_kernel:num_warps@L21"].default
    assert rewritten["add_kernel:BLOCK_SIZE@L21"].current == 2048


def test_unchanged_values_return_the_source_itself():
    values = {key: p.current for key, p in by_key(VECTOR_ADD).items()}
    assert apply_params(VECTOR_ADD, values) == VECTOR_ADD
    assert apply_params(VECTOR_ADD, {}) == VECTOR_ADD


def test_softmax_computed_block_is_not_tunable_but_named_num_warps_is():
    params = by_key(SOFTMAX)
    assert sorted(params) == ["softmax_kernel:num_stages@L29", "softmax_kernel:num_warps@L20"]
    warps = params["softmax_kernel:num_warps@L20"]
    assert (warps.current, warps.default, warps.line) == (8, False, 20)
    new = apply_params(SOFTMAX, {"softmax_kernel:num_warps@L20": 16, "softmax_kernel:num_stages@L29": 1})
    assert new == SOFTMAX.replace("num_warps = 8  #", "num_warps = 16  #").replace(
        "        num_warps=num_warps,\n", "        num_warps=num_warps, num_stages=1,\n"
    )


def test_each_branch_of_an_if_is_its_own_param_but_a_loop_or_augmented_name_is_not_tunable():
    conditional = SOFTMAX.replace(
        "    num_warps = 8  # wide rows need more warps\n",
        "    num_warps = 4\n    if BLOCK_SIZE >= 2048:\n        num_warps = 8\n",
    )
    found = [(p.key, p.current) for p in find_tunable_params(conditional)]
    assert found == [("softmax_kernel:num_warps@L20", 4), ("softmax_kernel:num_warps@L22", 8),
                     ("softmax_kernel:num_stages@L31", 3)]  # fmt: skip
    new = apply_params(conditional, {"softmax_kernel:num_warps@L22": 16})
    assert new == conditional.replace("        num_warps = 8\n", "        num_warps = 16\n")
    augmented = conditional.replace("        num_warps = 8\n", "        num_warps *= 2\n")
    assert [p.name for p in find_tunable_params(augmented)] == ["num_stages"]
    no_default = VECTOR_ADD.replace("def add(x: torch.Tensor, y: torch.Tensor)", "def add(x, y, block)")
    no_default = no_default.replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=block)")
    assert [p.name for p in find_tunable_params(no_default)] == ["num_warps", "num_stages"]
    looped = VECTOR_ADD.replace(
        "    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)\n",
        "    for BLOCK in (512, 1024):\n        add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK)\n",
    )
    assert [p.name for p in find_tunable_params(looped)] == ["num_warps", "num_stages"]


def test_autotuned_kernels_are_reported_and_not_tuned():
    assert autotuned_kernels(AUTOTUNED_MATMUL) == ["matmul_kernel"]
    assert autotuned_kernels(VECTOR_ADD) == []
    params = find_tunable_params(AUTOTUNED_MATMUL)
    assert {p.kernel for p in params} == {"scale_kernel"}
    assert [(p.name, p.current, p.default) for p in params] == [
        ("BLOCK", 512, False),
        ("num_warps", 4, False),
        ("num_stages", 3, True),
    ]


def test_kernel_launched_twice_gives_separate_params():
    params = by_key(LAUNCHED_TWICE)
    assert sorted(params) == [
        "fill_kernel:BLOCK@L12",
        "fill_kernel:BLOCK@L16",
        "fill_kernel:num_stages@L12",
        "fill_kernel:num_stages@L17",
        "fill_kernel:num_warps@L12",
        "fill_kernel:num_warps@L17",
    ]
    assert params["fill_kernel:BLOCK@L16"].current == 4096
    assert params["fill_kernel:BLOCK@L16"].choices == (1024, 2048, 4096, 8192, 16384)
    assert params["fill_kernel:num_stages@L17"].current == 2
    new = apply_params(LAUNCHED_TWICE, {"fill_kernel:BLOCK@L16": 1024})
    # the assignment is rewritten; the grid, which uses the same name, follows automatically
    assert new == LAUNCHED_TWICE.replace("    BLOCK = 4096\n", "    BLOCK = 1024\n")
    new = apply_params(LAUNCHED_TWICE, {"fill_kernel:BLOCK@L12": 512, "fill_kernel:num_warps@L17": 8})
    assert "BLOCK=512, num_warps=2)" in new
    assert "BLOCK=BLOCK, num_stages=2, num_warps=8)" in new
    assert "BLOCK = 4096" in new


def test_decorator_spellings_and_positional_constexpr():
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl
        from triton import jit


        @jit
        def a_kernel(p, BLOCK: tl.constexpr):
            pass


        @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
        @triton.jit(do_not_specialize=["n"])
        def b_kernel(p, n, BLOCK: "tl.constexpr", EVEN: tl.constexpr):
            pass


        def not_a_kernel(p, BLOCK):
            pass


        def run(p, n):
            a_kernel[(1,)](p, 128)
            b_kernel[(1,)](p, n, 64, num_warps=1)
        """
    )
    params = find_tunable_params(source)
    assert [(p.kernel, p.name, p.current, p.line) for p in params if p.kind == "constexpr"] == [
        ("a_kernel", "BLOCK", 128, 22),
        ("b_kernel", "BLOCK", 64, 23),
    ]
    new = apply_params(source, {"a_kernel:BLOCK@L22": 256, "b_kernel:num_warps@L23": 2})
    assert "a_kernel[(1,)](p, 256)" in new
    assert "b_kernel[(1,)](p, n, 64, num_warps=2)" in new


def test_shared_module_constant_is_one_param():
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl

        BLOCK = 1024  # shared by both launches


        @triton.jit
        def k1(p, BLOCK: tl.constexpr):
            pass


        @triton.jit
        def k2(p, BLOCK: tl.constexpr):
            pass


        def run(p):
            k1[(1,)](p, BLOCK=BLOCK, num_warps=4, num_stages=2)
            k2[(1,)](p, BLOCK=BLOCK, num_warps=4, num_stages=2)
        """
    )
    constexprs = [p for p in find_tunable_params(source) if p.kind == "constexpr"]
    assert [(p.key, p.current) for p in constexprs] == [("k1:BLOCK@L4", 1024)]
    new = apply_params(source, {"k1:BLOCK@L4": 4096})
    assert new == source.replace("BLOCK = 1024  #", "BLOCK = 4096  #")


def test_min_bound_literal_is_tunable():
    source = VECTOR_ADD.replace(
        "    n = out.numel()\n", "    n = out.numel()\n    BLOCK = min(4096, triton.next_power_of_2(n))\n"
    ).replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=BLOCK)")
    params = by_key(source)
    block = params["add_kernel:BLOCK_SIZE@L20"]
    assert (block.current, block.choices) == (4096, (1024, 2048, 4096, 8192, 16384))
    new = apply_params(source, {"add_kernel:BLOCK_SIZE@L20": 2048})
    assert new == source.replace("min(4096,", "min(2048,")


def test_wrapper_parameter_default_is_tunable():
    source = VECTOR_ADD.replace(
        "def add(x: torch.Tensor, y: torch.Tensor)", "def add(x, y, *, block_size: int = 1024, warps=4)"
    ).replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=block_size, num_warps=warps)")
    params = by_key(source)
    assert sorted(params) == [
        "add_kernel:BLOCK_SIZE@L17",
        "add_kernel:num_stages@L21",
        "add_kernel:num_warps@L17",
    ]
    new = apply_params(source, {"add_kernel:BLOCK_SIZE@L17": 4096, "add_kernel:num_warps@L17": 8})
    assert new == source.replace("block_size: int = 1024, warps=4)", "block_size: int = 4096, warps=8)")


def test_non_power_of_two_small_and_computed_values_are_not_tunable():
    source = VECTOR_ADD.replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=1000, num_warps=2 * 4)")
    assert [p.name for p in find_tunable_params(source)] == ["num_stages"]
    source = VECTOR_ADD.replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=8)")
    assert [p.name for p in find_tunable_params(source)] == ["num_warps", "num_stages"]
    computed = VECTOR_ADD.replace(
        "    n = out.numel()\n",
        "    n = out.numel()\n    rows = max(1, 4096 // n)\n    warps = min(max(n // 512, 4), 16)\n",
    ).replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=rows, num_warps=warps)")
    assert [p.name for p in find_tunable_params(computed)] == ["num_stages"]


def test_kwargs_splat_hides_launch_options():
    source = VECTOR_ADD.replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=1024, **launch_options)")
    assert [p.name for p in find_tunable_params(source)] == ["BLOCK_SIZE"]


def test_insertion_into_empty_and_multiline_calls():
    source = textwrap.dedent(
        """\
        import triton


        @triton.jit
        def noop_kernel():
            pass


        def run(x):
            noop_kernel[(1,)]()
            noop_kernel[(2,)](
            )
        """
    )
    new = apply_params(source, {"noop_kernel:num_warps@L10": 1, "noop_kernel:num_stages@L10": 2})
    assert "noop_kernel[(1,)](num_warps=1, num_stages=2)" in new
    new = apply_params(source, {"noop_kernel:num_warps@L12": 8})
    assert "noop_kernel[(2,)](\n    num_warps=8)" in new


def test_byte_preservation_with_unicode_and_crlf():
    source = VECTOR_ADD.replace(
        "add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)",
        "add_kernel[grid](x, y, out, n,  # größe → Blöcke\n        BLOCK_SIZE = 0x400 ,  # hex\n    )",
    ).replace("\n", "\r\n")
    params = by_key(source)
    key = next(k for k, p in params.items() if p.name == "BLOCK_SIZE")
    warps = next(k for k, p in params.items() if p.name == "num_warps")
    new = apply_params(source, {key: 512, warps: 16})
    assert new == source.replace("BLOCK_SIZE = 0x400 ,", "BLOCK_SIZE = 512, num_warps=16 ,")
    assert apply_params(new, {key: 1024, warps: 4}) == source.replace("0x400 ,", "1024, num_warps=4 ,")


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match=r"unknown launch parameter.*nope.*tunable here: add_kernel:BLOCK_SIZE"):
        apply_params(VECTOR_ADD, {"nope": 4})
    with pytest.raises(ValueError, match=r"value 3 is not one of the choices \(1, 2, 4, 8, 16\)"):
        apply_params(VECTOR_ADD, {"add_kernel:num_warps@L21": 3})
    with pytest.raises(ValueError, match="not one of the choices"):
        apply_params(VECTOR_ADD, {"add_kernel:BLOCK_SIZE@L21": True})
    with pytest.raises(ValueError, match="not valid Python"):
        find_tunable_params("def broken(:\n")
    assert find_tunable_params("x = 1\n") == []


def test_rewritten_kernel_runs_under_the_interpreter():
    new = apply_params(VECTOR_ADD, {"add_kernel:BLOCK_SIZE@L21": 256, "add_kernel:num_warps@L21": 2})
    program = new.replace('device="cuda"', 'device="cpu"') + "\nprint(float(test_add().sum()) > 0)\n"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_two_launches_on_one_line_are_numbered_stably():
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl


        @triton.jit
        def k(p, BLOCK: tl.constexpr):
            pass


        def run(p):
            k[(1,)](p, BLOCK=64, num_warps=4, num_stages=2); k[(1,)](p, BLOCK=64, num_warps=4, num_stages=2)
        """
    )
    keys = [p.key for p in find_tunable_params(source) if p.name == "BLOCK"]
    assert keys == ["k:BLOCK@L11", "k:BLOCK@L11#2"]
    new = apply_params(source, {"k:BLOCK@L11": 256, "k:BLOCK@L11#2": 16})
    assert "k[(1,)](p, BLOCK=256, num_warps=4, num_stages=2); k[(1,)](p, BLOCK=16, num_warps=4" in new
    assert [p.key for p in find_tunable_params(new) if p.name == "BLOCK"] == keys
    assert apply_params(new, {"k:BLOCK@L11#2": 32}).count("BLOCK=32") == 1


def test_block_size_literal_in_the_grid_changes_with_it():
    src = (
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, n, BLOCK: tl.constexpr):\n    pass\n\n"
        "def op(x, n):\n    k[(triton.cdiv(n, 256),)](x, n, BLOCK=256, num_warps=4)\n"
    )
    (block,) = [p for p in find_tunable_params(src) if p.name == "BLOCK"]
    out = apply_params(src, {block.key: 1024})
    assert "k[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024, num_warps=4)" in out


ATTENTION_LIKE = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit
    def attn(q, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pass


    def run(q, n):
        BLOCK = 128
        grid = (triton.cdiv(n, BLOCK),)
        attn[grid](q, n, BLOCK_M=BLOCK, BLOCK_N=BLOCK, num_warps=4)
    """
)


def test_a_name_passed_to_two_meta_parameters_of_one_launch_is_split():
    params = by_key(ATTENTION_LIKE)
    owner, tied = params["attn:BLOCK_M@L11"], params["attn:BLOCK_N@L13"]
    assert (owner.current, owner.tied_to, tied.current, tied.tied_to) == (128, "", 128, "attn:BLOCK_M@L11")
    assert tied.group == owner.group
    # the tied keyword alone: its own literal in place of the name; the grid and BLOCK_M keep the name
    alone = apply_params(ATTENTION_LIKE, {tied.key: 64})
    assert alone == ATTENTION_LIKE.replace("BLOCK_N=BLOCK", "BLOCK_N=64")
    # the owner alone moves the name (the grid with it) and the tied keyword keeps its value
    moved = apply_params(ATTENTION_LIKE, {owner.key: 64, tied.key: 128})
    assert moved == ATTENTION_LIKE.replace("BLOCK = 128", "BLOCK = 64").replace("BLOCK_N=BLOCK", "BLOCK_N=128")
    # both to one value: the name carries it, the smallest diff
    both = apply_params(ATTENTION_LIKE, {owner.key: 64, tied.key: 64})
    assert both == ATTENTION_LIKE.replace("BLOCK = 128", "BLOCK = 64")
    assert {p.key: p.current for p in find_tunable_params(moved)}[tied.key] == 128


def test_a_name_shared_by_two_launches_is_not_split():
    second = "    attn[grid](q, n, BLOCK_M=BLOCK, BLOCK_N=32)\n"
    source = ATTENTION_LIKE.replace("BLOCK_N=BLOCK, ", "BLOCK_N=64, ") + second
    assert [p.key for p in find_tunable_params(source) if p.name == "BLOCK_M"] == ["attn:BLOCK_M@L11"]
    assert not any(p.tied_to for p in find_tunable_params(source))


def test_a_tied_keyword_follows_its_own_launchs_owner_under_its_numbered_key():
    source = textwrap.dedent(
        """\
        import triton
        import triton.language as tl


        @triton.jit
        def attn(q, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
            pass


        def run(q):
            A = 64; B = 32  # noqa: E702
            attn[(1,)](q, BLOCK_M=A, BLOCK_N=A); attn[(1,)](q, BLOCK_M=B, BLOCK_N=B)  # noqa: E702
        """
    )
    params = by_key(source)
    assert [(p.key, p.current, p.tied_to) for p in params.values() if p.kind == "constexpr"] == [
        ("attn:BLOCK_M@L11", 64, ""),
        ("attn:BLOCK_N@L12", 64, "attn:BLOCK_M@L11"),
        ("attn:BLOCK_M@L11#2", 32, ""),
        ("attn:BLOCK_N@L12#2", 32, "attn:BLOCK_M@L11#2"),
    ]
    moved = apply_params(source, {"attn:BLOCK_M@L11#2": 16, "attn:BLOCK_N@L12#2": 16})
    assert moved == source.replace("B = 32", "B = 16")
