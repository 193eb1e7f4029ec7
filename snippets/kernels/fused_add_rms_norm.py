# geak-family: normalization
"""Fused residual add + RMSNorm: ``h = x + residual``; ``y = h * rstd(h) * weight``; returns ``(y, h)``.

This is the pre-norm transformer step between sub-layers: the updated residual stream ``h`` is needed by the next
residual add and its normalisation feeds the next sub-layer. One program per row (BLOCK_N =
next_power_of_2(N) <= 32768, masked) loads ``x`` and ``residual`` once, adds in fp32, rounds ``h`` to the storage
dtype and normalises *that rounded value*, so ``y`` matches ``rms_norm(x + residual)`` computed in the storage
dtype. Fusing reads two tensors and writes two (4 passes over [M, N]) where separate add and norm kernels need 5.
Inputs are 2-D with unit column stride or contiguous N-D; fp16/bf16/fp32 with fp32 statistics.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def _fused_add_rms_norm_kernel(
    x_ptr,
    residual_ptr,
    weight_ptr,
    y_ptr,
    h_ptr,
    n_cols,
    stride_x_row,
    stride_residual_row,
    stride_y_row,
    stride_h_row,
    eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0).to(tl.float32)
    residual = tl.load(residual_ptr + row * stride_residual_row + cols, mask=mask, other=0.0).to(tl.float32)
    h = (x + residual).to(h_ptr.dtype.element_ty)
    tl.store(h_ptr + row * stride_h_row + cols, h, mask=mask)
    h = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / n_cols + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = h * rstd * weight
    tl.store(y_ptr + row * stride_y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _as_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dim() == 2 and t.stride(1) == 1:
        return t
    if not t.is_contiguous():
        raise ValueError(f"fused_add_rms_norm: {name} must be contiguous (2-D inputs may have any row stride)")
    return t.view(-1, t.shape[-1])


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(rms_norm(x + residual) * weight, x + residual)``, both with ``x``'s shape and dtype."""
    if x.dim() == 0 or residual.shape != x.shape:
        raise ValueError(
            f"fused_add_rms_norm: x and residual must share a non-scalar shape, got {tuple(x.shape)}, {tuple(residual.shape)}"
        )
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,) or not weight.is_contiguous():
        raise ValueError(f"fused_add_rms_norm: weight must be a contiguous ({n_cols},) tensor, got {tuple(weight.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32) or residual.dtype != x.dtype:
        raise TypeError(f"fused_add_rms_norm: x and residual must share a float dtype, got {x.dtype}, {residual.dtype}")
    if len({t.device for t in (x, residual, weight)}) != 1:
        raise ValueError("fused_add_rms_norm: all inputs must be on the same device")
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"fused_add_rms_norm: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit in registers")
    x_rows, residual_rows = _as_rows(x, "x"), _as_rows(residual, "residual")
    n_rows = x_rows.shape[0]
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    h = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y, h
    y_rows, h_rows = y.view(n_rows, n_cols), h.view(n_rows, n_cols)
    block_n = triton.next_power_of_2(n_cols)
    _fused_add_rms_norm_kernel[(n_rows,)](
        x_rows,
        residual_rows,
        weight,
        y_rows,
        h_rows,
        n_cols,
        x_rows.stride(0),
        residual_rows.stride(0),
        y_rows.stride(0),
        h_rows.stride(0),
        eps,
        BLOCK_N=block_n,
        num_warps=min(max(block_n // 512, 4), 16),
    )
    return y, h


def _reference(x, residual, weight, eps):
    h = x + residual
    h32 = h.float()
    y = h32 * torch.rsqrt(h32.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.float()
    return y.to(x.dtype), h


def test_fused_add_rms_norm():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(57, 1200, device="cuda", dtype=torch.float32)
    residual = torch.randn(57, 1200, device="cuda", dtype=torch.float32) * 4.0
    weight = torch.randn(1200, device="cuda", dtype=torch.float32)
    y, h = fused_add_rms_norm(x, residual, weight)
    y_ref, h_ref = _reference(x, residual, weight, 1e-6)
    torch.testing.assert_close(h, h_ref, atol=0.0, rtol=0.0)
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)
    results.update(y_fp32=y, h_fp32=h)

    x16 = torch.randn(3, 11, 2560, device="cuda", dtype=torch.float16)
    r16 = torch.randn(3, 11, 2560, device="cuda", dtype=torch.float16) * 8.0
    w16 = torch.randn(2560, device="cuda", dtype=torch.float16)
    y16, h16 = fused_add_rms_norm(x16, r16, w16, eps=1e-5)
    y16_ref, h16_ref = _reference(x16, r16, w16, 1e-5)
    torch.testing.assert_close(h16, h16_ref, atol=0.0, rtol=0.0)
    torch.testing.assert_close(y16, y16_ref, atol=2e-3, rtol=2e-3)
    results.update(y_fp16=y16, h_fp16=h16)
    return results


def bench_fused_add_rms_norm():
    x = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
    residual = torch.randn(16384, 8192, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    fused_add_rms_norm(x, residual, weight)
