"""Where a kernel steps over a dimension by a block without a mask (``shared.unmasked_steps``), the probes that try
that dimension at a multiple of the reference's block only (``job.probe_variants``), and the narrower contract a
change of such a block is said with (``input_contracts``): pure functions, on sources and recorded calls."""

from __future__ import annotations

import types
from dataclasses import dataclass
from pathlib import Path

import torch

from geak.evaluator import tightened_contracts
from geak.evaluator.job.capture import CallRecorder, draw_probe
from geak.evaluator.job.probe_variants import shape_variants
from geak.evaluator.shared.unmasked_steps import Step, source_steps

FIXTURES = Path(__file__).parent / "fixtures" / "probes"
ROW_SUM = (FIXTURES / "row_sum.py").read_text()

MATMUL_K_LOOP = """\
import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K, stride_ak, stride_bk, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr, ROWS: tl.constexpr):
    offs_k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_k * stride_ak
    b_ptrs = b_ptr + offs_k * stride_bk
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K * SPLIT_K)):
        acc += tl.load(a_ptrs) * tl.load(b_ptrs, mask=offs_k < K, other=0.0)
        a_ptrs += BLOCK_K * SPLIT_K * stride_ak
        b_ptrs += BLOCK_K * SPLIT_K * stride_bk
    for row in tl.range(tl.program_id(0), K, ROWS):
        tl.store(c_ptr + row, tl.sum(acc, axis=0))
"""


def test_a_loop_over_k_by_a_block_with_unmasked_loads_is_a_step_of_that_block():
    (step,) = source_steps(ROW_SUM)["row_sum_kernel"]
    assert step == Step(("BLOCK_K",), ("K",), 15)


def test_a_split_multiplies_the_step_and_a_loop_that_only_strides_over_rows_is_none():
    """`tl.cdiv(K, BLOCK_K * SPLIT_K)`: the kernel steps by their product; the masked load is not a step; the
    persistent loop over rows by `ROWS` stops at its bound, whatever K is."""
    assert source_steps(MATMUL_K_LOOP) == {"mm": [Step(("BLOCK_K", "SPLIT_K"), ("K",), 12)]}


def test_masked_accesses_and_block_pointers_with_a_boundary_check_are_no_step():
    masked = ROW_SUM.replace(
        "tl.load(x_ptr + row * stride + k + tl.arange(0, BLOCK_K))",
        "tl.load(x_ptr + row * stride + k + tl.arange(0, BLOCK_K), mask=k + tl.arange(0, BLOCK_K) < K, other=0.0)",
    )
    assert masked != ROW_SUM and source_steps(masked) == {}
    assert source_steps("def f(:") == {}


def test_a_grid_that_covers_a_size_with_unmasked_tiles_is_a_step_of_unknown_dimension():
    grid = (
        "import triton\nimport triton.language as tl\n\n@triton.jit\n"
        "def k(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)\n"
    )
    assert source_steps(grid) == {"k": [Step(("BLOCK",), (), 7)]}


def _recorded(fn, *args, **kwargs):
    module = types.ModuleType("m")
    module.f = fn
    recorder = CallRecorder(module, ["f"], keep_args="integers")
    recorder.recording = True
    module.f(*args, **kwargs)
    return recorder.calls[0], recorder.originals["f"]


def test_a_stepped_size_is_probed_at_the_next_odd_multiple_of_its_blocks_first():
    """K = 128 stepped by 32: 160 (5 × 32), which the reference handles and a kernel needing a multiple of 64 or 128
    does not; a size stepped by 32 and 64 (two kernels): an odd multiple of 64. Sizes no step names keep the other
    variants only, moved by whole blocks."""

    def f(x, K):
        return x

    call, fn = _recorded(f, torch.randn(8, 128), 128)
    first, *rest = shape_variants(call, fn, {(128, 32)})
    assert first.label == "multiples of the reference's unmasked blocks only (128→160)"
    args, _ = draw_probe(call, 1, first.spec)
    assert args[0].shape == (8, 160) and args[1] == 160
    # every other variant moves the stepped size by whole blocks: elsewhere the reference reads out of bounds
    assert [v.label for v in rest] == [
        "sizes one above (8→9, 128→160)", "sizes one below (8→7, 128→96)", "a wide row (8→3, 128→1056)",
        "small sizes (8→3, 128→32)",
    ]  # fmt: skip
    assert [v.label for v in shape_variants(call, fn)][:2] == ["sizes one above (8→9, 128→144)",
                                                               "sizes one below (8→7, 128→112)"]  # fmt: skip
    both = shape_variants(call, fn, {(128, 32), (128, 64)})[0]
    assert both.label.endswith("(128→192)")
    odd_already = shape_variants(*_recorded(f, torch.randn(8, 96), 96), {(96, 32)})[0]
    assert odd_already.label.endswith("(96→160)")
    assert shape_variants(call, fn, {(100, 4)})[0].label.startswith("sizes one above")  # no size of this call


@dataclass(frozen=True)
class Change:
    kernel: str
    param: str
    old: int
    new: int


def test_a_larger_block_on_unmasked_steps_is_said_as_the_narrower_contract_and_a_dividing_one_is_not():
    (said,) = tightened_contracts(ROW_SUM, [Change("row_sum_kernel", "BLOCK_K", 32, 128)])
    assert said == (
        "row_sum_kernel: BLOCK_K 32→128 narrows what it accepts: its loads or stores at line 15 step over K by "
        "BLOCK_K without a mask, so K must now be a multiple of 128, where the original takes any multiple of 32; "
        "other sizes read or write out of bounds"
    )
    assert tightened_contracts(ROW_SUM, [Change("row_sum_kernel", "BLOCK_K", 32, 16)]) == []
    assert tightened_contracts(ROW_SUM, [Change("other_kernel", "BLOCK_K", 32, 128)]) == []
    (split,) = tightened_contracts(MATMUL_K_LOOP, [Change("mm", "SPLIT_K", 1, 2)])
    assert "K must now be a multiple of BLOCK_K × 2, where the original takes any multiple of BLOCK_K × 1" in split
    both = [Change("mm", "SPLIT_K", 2, 1), Change("mm", "BLOCK_K", 32, 64)]  # the step stays 64: nothing narrower
    assert tightened_contracts(MATMUL_K_LOOP, both) == []
