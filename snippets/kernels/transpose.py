# geak-family: layout
"""Out-of-place 2-D transpose ``out[j, i] = x[i, j]`` for any strided ``x[M, N]``; ``out`` is contiguous ``[N, M]``.

A naive element-wise transpose makes either the reads or the writes strided by a full row, wasting most of each
memory transaction. Here each program moves one BLOCK_M x BLOCK_N tile: it loads the tile with consecutive
threads along ``x``'s contiguous dimension, transposes it in registers with ``tl.trans`` (the compiler routes the
layout change through shared memory), and stores it with consecutive threads along ``out``'s rows. Both HBM sides
are fully coalesced and every byte is read once and written once. Tile shape and warps are autotuned; offsets are
int64 so matrices above 2**31 elements work.
"""
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32}, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128}, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=8),
    ],
    key=["n_rows", "n_cols"],
)
@triton.jit
def _transpose_kernel(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_x_row,
    stride_x_col,
    stride_out_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tile = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :] * stride_x_col, mask=mask)
    out_offsets = cols[:, None] * stride_out_row + rows[None, :]
    tl.store(out_ptr + out_offsets, tl.trans(tile), mask=tl.trans(mask))


def transpose(x: torch.Tensor) -> torch.Tensor:
    """Return a contiguous ``x.T`` for a 2-D tensor of any dtype and strides."""
    if x.dim() != 2:
        raise ValueError(f"transpose: expected a 2-D tensor, got shape {tuple(x.shape)}")
    n_rows, n_cols = x.shape
    out = torch.empty((n_cols, n_rows), device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out

    def grid(meta):
        return (triton.cdiv(n_rows, meta["BLOCK_M"]), triton.cdiv(n_cols, meta["BLOCK_N"]))

    _transpose_kernel[grid](x, out, n_rows, n_cols, x.stride(0), x.stride(1), out.stride(0))
    return out


def test_transpose():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(193, 250, device="cuda", dtype=torch.float32)
    out = transpose(x)
    torch.testing.assert_close(out, x.t().contiguous(), atol=0.0, rtol=0.0)
    results["fp32_ragged"] = out

    x16 = torch.randn(100, 300, device="cuda", dtype=torch.float16)[::2, 7:207]
    out16 = transpose(x16)
    torch.testing.assert_close(out16, x16.t().contiguous(), atol=0.0, rtol=0.0)
    results["fp16_strided_view"] = out16

    xi = torch.randint(-1000, 1000, (64, 33), device="cuda", dtype=torch.int32)
    out_i = transpose(xi)
    torch.testing.assert_close(out_i, xi.t().contiguous(), atol=0, rtol=0)
    results["int32"] = out_i
    return results


def bench_transpose():
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.float32)
    transpose(x)
