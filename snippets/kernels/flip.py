# geak-family: layout
"""Reverse the last dimension: ``out[..., j] = x[..., N - 1 - j]``, like ``torch.flip(x, dims=(-1,))``.

Grid is (rows, column blocks of BLOCK_N). Program ``(r, j)`` writes output columns ``[j * B, (j + 1) * B)`` in
ascending order and gathers them from the mirrored source columns ``N - 1 - col``. Within a warp the source
addresses are one contiguous (descending) range, so the loads still touch exactly the same memory sectors as a
forward copy and stay fully coalesced; only per-thread vector width is lost on the load side, which a
bandwidth-bound kernel with enough warps in flight hides. Works for any dtype, bit-exact (NaN payloads, -0.0).
One read and one write per element; the last block of a ragged row is masked.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _flip_last_dim_kernel(x_ptr, out_ptr, n_cols, stride_x_row, stride_out_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    out_cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = out_cols < n_cols
    values = tl.load(x_ptr + row * stride_x_row + (n_cols - 1 - out_cols), mask=mask)
    tl.store(out_ptr + row * stride_out_row + out_cols, values, mask=mask)


def flip_last_dim(x: torch.Tensor) -> torch.Tensor:
    """Reverse the last dim of a 2-D (unit column stride, any row stride) or contiguous N-D tensor."""
    if x.dim() == 0:
        raise ValueError("flip_last_dim: input must have at least one dimension")
    if x.dtype == torch.bool or x.is_complex():
        raise TypeError(f"flip_last_dim: unsupported dtype {x.dtype}")
    if x.dim() == 2 and x.stride(1) == 1:
        rows = x
    elif x.is_contiguous():
        rows = x.view(-1, x.shape[-1])
    else:
        raise ValueError("flip_last_dim: input must be contiguous (2-D inputs may have any row stride)")
    n_rows, n_cols = rows.shape
    out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out
    out_rows = out.view(n_rows, n_cols)
    block_n = min(triton.next_power_of_2(n_cols), 1024)
    grid = (n_rows, triton.cdiv(n_cols, block_n))
    _flip_last_dim_kernel[grid](
        rows, out_rows, n_cols, rows.stride(0), out_rows.stride(0), BLOCK_N=block_n, num_warps=4
    )
    return out


def test_flip():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(23, 2500, device="cuda", dtype=torch.float32)
    x[0, :3] = torch.tensor([float("nan"), float("inf"), -0.0])
    out = flip_last_dim(x)
    torch.testing.assert_close(out, torch.flip(x, dims=(-1,)), atol=0.0, rtol=0.0, equal_nan=True)
    results["fp32_multi_block"] = out

    x16 = torch.randn(3, 5, 77, device="cuda", dtype=torch.float16)
    out16 = flip_last_dim(x16)
    torch.testing.assert_close(out16, torch.flip(x16, dims=(-1,)), atol=0.0, rtol=0.0)
    results["fp16_3d"] = out16

    xi = torch.arange(40 * 1030, device="cuda", dtype=torch.int64).view(40, 1030)[:, 3:1027]
    out_i = flip_last_dim(xi)
    torch.testing.assert_close(out_i, torch.flip(xi, dims=(-1,)), atol=0, rtol=0)
    results["int64_row_strided"] = out_i
    return results


def bench_flip():
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.float32)
    flip_last_dim(x)
