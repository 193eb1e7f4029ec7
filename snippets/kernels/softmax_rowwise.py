# geak-family: softmax
"""Row-wise softmax over the last dimension, one program per row with the whole row held in registers.

Input is a 2-D ``x[M, N]`` with unit column stride (any row stride) or any contiguous N-D tensor, fp16/bf16/fp32.
Each program loads its row once (padded to BLOCK_N = next_power_of_2(N) with -inf so padding contributes
``exp(-inf) = 0``), computes max, ``exp(x - max)`` and the sum in fp32, and writes the normalised row: one HBM read
and one write per element, which is the bandwidth minimum. The warp count grows with the row length so each
thread keeps at most ~64 fp32 values live; rows longer than 32768 elements should use the streaming
(online) softmax instead.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def _softmax_rowwise_kernel(x_ptr, out_ptr, n_cols, stride_x_row, stride_out_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    inv_denominator = 1.0 / tl.sum(numerator, axis=0)
    out = numerator * inv_denominator
    tl.store(out_ptr + row * stride_out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def _as_rows(x: torch.Tensor, op: str) -> torch.Tensor:
    """View ``x`` as [rows, last_dim] without copying, or raise a clear error."""
    if x.dim() == 0:
        raise ValueError(f"{op}: input must have at least one dimension")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"{op}: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if x.dim() == 2 and x.stride(1) == 1:
        return x
    if not x.is_contiguous():
        raise ValueError(f"{op}: input must be contiguous (2-D inputs may have any row stride); call .contiguous()")
    return x.view(-1, x.shape[-1])


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension; the result has ``x``'s shape and dtype."""
    rows = _as_rows(x, "softmax")
    n_rows, n_cols = rows.shape
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"softmax: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit; use the online softmax")
    out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out
    out_rows = out.view(n_rows, n_cols)
    block_n = triton.next_power_of_2(n_cols)
    num_warps = min(max(block_n // 512, 4), 16)
    _softmax_rowwise_kernel[(n_rows,)](
        rows, out_rows, n_cols, rows.stride(0), out_rows.stride(0), BLOCK_N=block_n, num_warps=num_warps
    )
    return out


def test_softmax_rowwise():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(37, 781, device="cuda", dtype=torch.float32) * 5.0
    x[3, :100] = -float("inf")
    out = softmax(x)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1), atol=1e-6, rtol=1e-5)
    results["fp32"] = out

    x16 = torch.randn(4, 6, 1000, device="cuda", dtype=torch.float16) * 4.0
    out16 = softmax(x16)
    torch.testing.assert_close(out16, torch.softmax(x16.float(), dim=-1).to(torch.float16), atol=1e-3, rtol=2e-3)
    results["fp16_3d"] = out16

    wide = torch.randn(20, 3000, device="cuda", dtype=torch.float32)[:, 7:2967]
    out_wide = softmax(wide)
    torch.testing.assert_close(out_wide, torch.softmax(wide, dim=-1), atol=1e-6, rtol=1e-5)
    results["row_strided"] = out_wide
    return results


def bench_softmax_rowwise():
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.float32)
    softmax(x)
