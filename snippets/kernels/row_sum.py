# geak-family: reduction
"""Sum over the last dimension of a 2-D tensor ``x[M, N]`` with fp32 accumulation, for any row length.

Stage 1 runs a (M, S) grid: program (row, s) sums columns ``[s * C, (s + 1) * C)`` of its row, looping over
BLOCK_N-wide blocks into a BLOCK_N-lane fp32 accumulator (element-wise adds in the loop, one tree reduction at the
end) and writes one fp32 partial. The split count S is chosen so that M * S fills the GPU (about 4 programs per
SM): many short rows get S = 1, a handful of very long rows are cut into many chunks, so both shapes stream at
full bandwidth. Stage 2 adds the S partials of each row in a fixed order and casts to the output dtype, so results
are deterministic (no atomics). Reads each input element once; the partials are ``M * S * 4`` bytes.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum_partial_kernel(
    x_ptr, partial_ptr, n_cols, stride_x_row, cols_per_split, n_splits, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0)
    split = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x_row
    col_start = split * cols_per_split
    col_end = tl.minimum(col_start + cols_per_split, n_cols)
    offsets = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(col_start, col_end, BLOCK_N):
        cols = start + offsets
        acc += tl.load(x_row + cols, mask=cols < col_end, other=0.0).to(tl.float32)
    tl.store(partial_ptr + row * n_splits + split, tl.sum(acc, axis=0))


@triton.jit
def _row_sum_finalize_kernel(partial_ptr, out_ptr, n_rows, n_splits, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    splits = tl.arange(0, BLOCK_S)
    mask = (rows[:, None] < n_rows) & (splits[None, :] < n_splits)
    partial = tl.load(partial_ptr + rows[:, None] * n_splits + splits[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.sum(partial, axis=1).to(out_ptr.dtype.element_ty), mask=rows < n_rows)


def _target_programs(device: torch.device) -> int:
    """About 4 resident programs per SM on a GPU; a small number under the interpreter."""
    if device.type == "cuda":
        return 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return 16


def row_sum(x: torch.Tensor, block_n: int = 2048) -> torch.Tensor:
    """Sum of each row of a 2-D ``x`` (unit column stride); returns ``[M]`` in ``x``'s dtype."""
    if x.dim() != 2:
        raise ValueError(f"row_sum: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"row_sum: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if x.stride(1) != 1:
        raise ValueError("row_sum: the last dimension must be contiguous (stride 1)")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"row_sum: block_n must be a power of two >= 16, got {block_n}")
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    if n_rows == 0:
        return out
    if n_cols == 0:
        return out.zero_()
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    n_blocks = triton.cdiv(n_cols, block_n)
    n_splits = max(1, min(n_blocks, triton.cdiv(_target_programs(x.device), n_rows)))
    cols_per_split = triton.cdiv(n_blocks, n_splits) * block_n
    n_splits = triton.cdiv(n_cols, cols_per_split)
    partial = torch.empty((n_rows, n_splits), device=x.device, dtype=torch.float32)
    _row_sum_partial_kernel[(n_rows, n_splits)](
        x, partial, n_cols, x.stride(0), cols_per_split, n_splits, BLOCK_N=block_n, num_warps=8
    )
    block_s = triton.next_power_of_2(n_splits)
    block_m = max(1, 1024 // block_s)
    _row_sum_finalize_kernel[(triton.cdiv(n_rows, block_m),)](
        partial, out, n_rows, n_splits, BLOCK_M=block_m, BLOCK_S=block_s, num_warps=4
    )
    return out


def test_row_sum():
    torch.manual_seed(0)
    results = {}
    long_rows = torch.randn(3, 20_000, device="cuda", dtype=torch.float32)
    out = row_sum(long_rows)
    torch.testing.assert_close(out, long_rows.double().sum(-1).float(), atol=1e-3, rtol=1e-5)
    results["few_long_rows_split"] = out

    many_rows = torch.randn(300, 131, device="cuda", dtype=torch.float32)
    out = row_sum(many_rows)
    torch.testing.assert_close(out, many_rows.double().sum(-1).float(), atol=1e-4, rtol=1e-5)
    results["many_short_rows"] = out

    x16 = torch.randn(40, 1500, device="cuda", dtype=torch.float16)[:, 3:1403]
    out16 = row_sum(x16, block_n=256)
    torch.testing.assert_close(out16, x16.float().sum(-1).to(torch.float16), atol=1e-2, rtol=1e-3)
    results["fp16_row_strided"] = out16
    return results


def bench_row_sum():
    x = torch.randn(16, 2**22, device="cuda", dtype=torch.float32)
    row_sum(x)
