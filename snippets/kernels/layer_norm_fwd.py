# geak-family: normalization
"""LayerNorm forward over the last dimension: ``y = (x - mean) * rstd * weight + bias``; also returns mean, rstd.

``x`` is 2-D with unit column stride (any row stride) or contiguous N-D, fp16/bf16/fp32; ``weight``/``bias`` are
``[N]``. One program per row keeps the whole row in registers (BLOCK_N = next_power_of_2(N) <= 32768), so the
mean and the variance are computed with the exact two-pass formula ``var = mean((x - mean)^2)`` from registers,
at no extra HBM cost, instead of the cancellation-prone ``E[x^2] - E[x]^2``. All statistics are fp32. ``mean``
and ``rstd`` (fp32, one per row) are what the backward pass needs. Each element of ``x`` is read once and ``y``
written once; weight and bias stay in L2 across rows.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def _layer_norm_fwd_kernel(
    x_ptr,
    weight_ptr,
    bias_ptr,
    y_ptr,
    mean_ptr,
    rstd_ptr,
    n_cols,
    stride_x_row,
    stride_y_row,
    eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = centered * rstd * weight + bias
    tl.store(y_ptr + row * stride_y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


def layer_norm_fwd(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(y, mean, rstd)``; ``y`` has ``x``'s shape/dtype, ``mean``/``rstd`` are fp32 of shape ``x.shape[:-1]``."""
    if x.dim() == 0:
        raise ValueError("layer_norm_fwd: x must have at least one dimension")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,) or bias.shape != (n_cols,):
        raise ValueError(
            f"layer_norm_fwd: weight and bias must have shape ({n_cols},), got {tuple(weight.shape)}, {tuple(bias.shape)}"
        )
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"layer_norm_fwd: expected a float16/bfloat16/float32 input, got {x.dtype}")
    if not (weight.is_contiguous() and bias.is_contiguous()):
        raise ValueError("layer_norm_fwd: weight and bias must be contiguous")
    if weight.device != x.device or bias.device != x.device:
        raise ValueError("layer_norm_fwd: x, weight and bias must be on the same device")
    if x.dim() == 2 and x.stride(1) == 1:
        rows = x
    elif x.is_contiguous():
        rows = x.view(-1, n_cols)
    else:
        raise ValueError("layer_norm_fwd: x must be contiguous (2-D inputs may have any row stride)")
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"layer_norm_fwd: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit in registers")
    n_rows = rows.shape[0]
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    mean = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
    rstd = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
    if y.numel() == 0:
        return y, mean, rstd
    y_rows = y.view(n_rows, n_cols)
    block_n = triton.next_power_of_2(n_cols)
    num_warps = min(max(block_n // 512, 4), 16)
    _layer_norm_fwd_kernel[(n_rows,)](
        rows,
        weight,
        bias,
        y_rows,
        mean,
        rstd,
        n_cols,
        rows.stride(0),
        y_rows.stride(0),
        eps,
        BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return y, mean, rstd


def test_layer_norm_fwd():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(67, 1000, device="cuda", dtype=torch.float32) * 2.0 + 5.0
    weight = torch.randn(1000, device="cuda", dtype=torch.float32)
    bias = torch.randn(1000, device="cuda", dtype=torch.float32)
    y, mean, rstd = layer_norm_fwd(x, weight, bias, eps=1e-5)
    var_ref, mean_ref = torch.var_mean(x, dim=-1, correction=0)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (1000,), weight, bias, 1e-5), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mean, mean_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rstd, torch.rsqrt(var_ref + 1e-5), atol=1e-5, rtol=1e-5)
    results.update(y_fp32=y, mean_fp32=mean, rstd_fp32=rstd)

    x16 = torch.randn(2, 13, 1536, device="cuda", dtype=torch.float16)
    w16 = torch.randn(1536, device="cuda", dtype=torch.float16)
    b16 = torch.randn(1536, device="cuda", dtype=torch.float16)
    y16, _, _ = layer_norm_fwd(x16, w16, b16, eps=1e-6)
    ref16 = torch.nn.functional.layer_norm(x16.float(), (1536,), w16.float(), b16.float(), 1e-6).to(torch.float16)
    torch.testing.assert_close(y16, ref16, atol=2e-3, rtol=2e-3)
    results["y_fp16_3d"] = y16
    return results


def bench_layer_norm_fwd():
    x = torch.randn(16384, 8192, device="cuda", dtype=torch.float16)
    weight = torch.randn(8192, device="cuda", dtype=torch.float16)
    bias = torch.randn(8192, device="cuda", dtype=torch.float16)
    layer_norm_fwd(x, weight, bias)
