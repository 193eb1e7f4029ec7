# geak-family: scan
"""Row-wise inclusive prefix sum over the last dimension, ``out[r, j] = sum(x[r, :j + 1])``, like ``torch.cumsum``.

One program per row walks the row in BLOCK_N-wide blocks: ``tl.cumsum`` scans the block in registers (a
warp-shuffle / shared-memory tree built by the compiler) and a scalar carry holding the sum of all previous
blocks is added before the block is stored; the carry then grows by the block total. Each element is read once
and written once. Floating inputs accumulate in fp32 and are stored in the input dtype; int32/int64 inputs
accumulate in int64 and return int64, as PyTorch does. Rows are processed sequentially inside a program, so this
design wants many rows (M >= a few hundred) to fill the GPU; a handful of very long rows would need a
decoupled look-back scan across programs.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum_kernel(
    x_ptr, out_ptr, n_cols, stride_x_row, stride_out_row, ACC_DTYPE: tl.constexpr, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x_row
    out_row = out_ptr + row * stride_out_row
    offsets = tl.arange(0, BLOCK_N)
    carry = tl.zeros([], dtype=ACC_DTYPE)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0).to(ACC_DTYPE)
        scanned = tl.cumsum(x, axis=0) + carry
        tl.store(out_row + cols, scanned.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


_ACCUMULATOR = {
    torch.float16: tl.float32,
    torch.bfloat16: tl.float32,
    torch.float32: tl.float32,
    torch.int32: tl.int64,
    torch.int64: tl.int64,
}


def cumsum(x: torch.Tensor, block_n: int = 1024) -> torch.Tensor:
    """Inclusive prefix sum over the last dim of a 2-D ``x`` with unit column stride."""
    if x.dim() != 2:
        raise ValueError(f"cumsum: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in _ACCUMULATOR:
        raise TypeError(f"cumsum: unsupported dtype {x.dtype}; use float16/bfloat16/float32/int32/int64")
    if x.stride(1) != 1:
        raise ValueError("cumsum: the last dimension must be contiguous (stride 1)")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"cumsum: block_n must be a power of two >= 16, got {block_n}")
    n_rows, n_cols = x.shape
    out_dtype = torch.int64 if x.dtype in (torch.int32, torch.int64) else x.dtype
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=out_dtype)
    if out.numel() == 0:
        return out
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    _cumsum_kernel[(n_rows,)](
        x,
        out,
        n_cols,
        x.stride(0),
        out.stride(0),
        ACC_DTYPE=_ACCUMULATOR[x.dtype],
        BLOCK_N=block_n,
        num_warps=4,
    )
    return out


def test_cumsum():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(31, 1500, device="cuda", dtype=torch.float32)
    out = cumsum(x, block_n=256)
    torch.testing.assert_close(out, torch.cumsum(x.double(), dim=-1).float(), atol=1e-4, rtol=1e-5)
    results["fp32_multi_block"] = out

    x16 = torch.rand(12, 3000, device="cuda", dtype=torch.float16)[:, 5:2905]
    out16 = cumsum(x16)
    torch.testing.assert_close(out16, torch.cumsum(x16.float(), dim=-1).to(torch.float16), atol=1e-2, rtol=1e-3)
    results["fp16_row_strided"] = out16

    counts = torch.randint(0, 100, (17, 513), device="cuda", dtype=torch.int32)
    out_int = cumsum(counts, block_n=128)
    assert out_int.dtype == torch.int64
    torch.testing.assert_close(out_int, torch.cumsum(counts, dim=-1), atol=0, rtol=0)
    results["int32_to_int64"] = out_int
    return results


def bench_cumsum():
    x = torch.randn(8192, 16384, device="cuda", dtype=torch.float32)
    cumsum(x)
