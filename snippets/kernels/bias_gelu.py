# geak-family: activation
"""Fused bias-add + GELU: ``out = gelu(x + bias)`` for ``x[M, N]`` and ``bias[N]`` (exact erf or tanh form).

This is the epilogue that follows an MLP up-projection GEMM when the GEMM cannot fuse it. Programs own
BLOCK_M x BLOCK_N tiles: the bias slice is loaded once per tile and broadcast over its BLOCK_M rows, so bias
traffic is negligible and ``x`` is read once and ``out`` written once. The add and the GELU are done in fp32 and
rounded once to the output dtype, which is slightly more accurate than PyTorch's unfused ``gelu(x + b)`` in half
precision (that rounds ``x + b`` first). The tanh form uses ``0.5 * (1 + tanh(u)) == sigmoid(2u)`` with a clamped
exp, which needs no tanh intrinsic and is portable to AMD.
"""
import torch
import triton
import triton.language as tl

_SQRT_HALF = tl.constexpr(0.7071067811865476)
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_GELU_TANH_CUBIC = tl.constexpr(0.044715)
_EXP_ARG_MAX = tl.constexpr(88.0)


@triton.jit
def _bias_gelu_kernel(
    x_ptr,
    bias_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_x_row,
    stride_out_row,
    APPROXIMATE_TANH: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows[:, None] < n_rows) & col_mask[None, :]
    bias = tl.load(bias_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + rows[:, None] * stride_x_row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    h = x + bias[None, :]
    if APPROXIMATE_TANH:
        u = _SQRT_2_OVER_PI * (h + _GELU_TANH_CUBIC * h * h * h)
        y = h / (1.0 + tl.exp(tl.minimum(-2.0 * u, _EXP_ARG_MAX)))
    else:
        y = 0.5 * h * (1.0 + tl.math.erf(h * _SQRT_HALF))
    tl.store(out_ptr + rows[:, None] * stride_out_row + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """``gelu(x + bias)`` for a 2-D ``x[M, N]`` with unit column stride and a contiguous ``bias[N]``."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"bias_gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if x.dim() != 2 or bias.dim() != 1 or bias.shape[0] != x.shape[1]:
        raise ValueError(f"bias_gelu: expected x[M, N] and bias[N], got {tuple(x.shape)} and {tuple(bias.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"bias_gelu: expected a float16/bfloat16/float32 input, got {x.dtype}")
    if bias.device != x.device:
        raise ValueError("bias_gelu: x and bias must be on the same device")
    if x.stride(1) != 1 or not bias.is_contiguous():
        raise ValueError("bias_gelu: x needs unit column stride and bias must be contiguous")
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out
    block_n = min(triton.next_power_of_2(n_cols), 1024)
    block_m = max(1, 4096 // block_n)
    grid = (triton.cdiv(n_rows, block_m), triton.cdiv(n_cols, block_n))
    _bias_gelu_kernel[grid](
        x,
        bias,
        out,
        n_rows,
        n_cols,
        x.stride(0),
        out.stride(0),
        APPROXIMATE_TANH=approximate == "tanh",
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        num_warps=8,
    )
    return out


def test_bias_gelu():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(45, 700, device="cuda", dtype=torch.float32) * 3.0
    bias = torch.randn(700, device="cuda", dtype=torch.float32)
    for approximate in ("none", "tanh"):
        out = bias_gelu(x, bias, approximate=approximate)
        ref = torch.nn.functional.gelu(x + bias, approximate=approximate)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        results[f"fp32_{approximate}"] = out

    x16 = torch.randn(130, 2500, device="cuda", dtype=torch.float16)[:, 100:2148]
    b16 = torch.randn(2048, device="cuda", dtype=torch.float16)
    for approximate in ("none", "tanh"):
        out = bias_gelu(x16, b16, approximate=approximate)
        ref = torch.nn.functional.gelu(x16.float() + b16.float(), approximate=approximate).to(torch.float16)
        torch.testing.assert_close(out, ref, atol=1e-3, rtol=1e-3)
        results[f"fp16_strided_{approximate}"] = out
    return results


def bench_bias_gelu():
    x = torch.randn(8192, 16384, device="cuda", dtype=torch.float16)
    bias = torch.randn(16384, device="cuda", dtype=torch.float16)
    bias_gelu(x, bias, approximate="tanh")
