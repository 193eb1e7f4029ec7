# geak-family: normalization
"""RMSNorm forward over the last dimension: ``y = x * rstd * weight`` with ``rstd = 1 / sqrt(mean(x^2) + eps)``.

``x`` is 2-D with unit column stride (any row stride) or contiguous N-D, fp16/bf16/fp32; ``weight`` is ``[N]``.
One program per row holds the row in registers (BLOCK_N = next_power_of_2(N) <= 32768, masked), reduces the sum
of squares in fp32 and writes ``y`` in the input dtype plus the fp32 ``rstd`` per row that the backward pass
reuses. Each element is read once and written once; the weight vector stays in L2 across rows. The warp count
grows with N (4 warps up to 1024 columns, 16 from 4096 on) to keep the per-thread register footprint small.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def rms_norm_fwd_kernel(
    x_ptr, weight_ptr, y_ptr, rstd_ptr, n_cols, stride_x_row, stride_y_row, eps, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * weight
    tl.store(y_ptr + row * stride_y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(rstd_ptr + row, rstd)


def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(y, rstd)``: ``y`` like ``x``; ``rstd`` fp32 with shape ``x.shape[:-1]``."""
    if x.dim() == 0:
        raise ValueError("rms_norm_fwd: x must have at least one dimension")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,) or not weight.is_contiguous():
        raise ValueError(f"rms_norm_fwd: weight must be a contiguous ({n_cols},) tensor, got {tuple(weight.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"rms_norm_fwd: expected a float16/bfloat16/float32 input, got {x.dtype}")
    if weight.device != x.device:
        raise ValueError("rms_norm_fwd: x and weight must be on the same device")
    if x.dim() == 2 and x.stride(1) == 1:
        rows = x
    elif x.is_contiguous():
        rows = x.view(-1, n_cols)
    else:
        raise ValueError("rms_norm_fwd: x must be contiguous (2-D inputs may have any row stride)")
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"rms_norm_fwd: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit in registers")
    n_rows = rows.shape[0]
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    rstd = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
    if y.numel() == 0:
        return y, rstd
    y_rows = y.view(n_rows, n_cols)
    block_n = triton.next_power_of_2(n_cols)
    num_warps = min(max(block_n // 256, 4), 16)
    rms_norm_fwd_kernel[(n_rows,)](
        rows, weight, y_rows, rstd, n_cols, rows.stride(0), y_rows.stride(0), eps, BLOCK_N=block_n, num_warps=num_warps
    )
    return y, rstd
##################################################################################################################################################
import torch


def _rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x32 = x.float()
    rstd = torch.rsqrt(x32.pow(2).mean(dim=-1) + eps)
    return (x32 * rstd[..., None] * weight.float()).to(x.dtype), rstd


def test_rms_norm_fwd():
    torch.manual_seed(0)
    results = {}

    x = torch.randn(67, 1000, device="cuda", dtype=torch.float32)
    weight = torch.randn(1000, device="cuda", dtype=torch.float32)
    y, rstd = rms_norm_fwd(x, weight, eps=1e-6)
    y_ref, rstd_ref = _rms_norm_reference(x, weight, 1e-6)
    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rstd, rstd_ref, atol=1e-6, rtol=1e-5)
    results["test_case_1"] = y

    x16 = torch.randn(2, 17, 2048, device="cuda", dtype=torch.float16)
    w16 = torch.randn(2048, device="cuda", dtype=torch.float16)
    y16, rstd16 = rms_norm_fwd(x16, w16, eps=1e-5)
    y16_ref, rstd16_ref = _rms_norm_reference(x16, w16, 1e-5)
    torch.testing.assert_close(y16, y16_ref, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(rstd16, rstd16_ref, atol=1e-5, rtol=1e-5)
    results["test_case_2"] = y16

    wide = torch.randn(40, 600, device="cuda", dtype=torch.float32)[:, 50:563]
    w_wide = torch.rand(513, device="cuda", dtype=torch.float32)
    y_wide, _ = rms_norm_fwd(wide, w_wide)
    torch.testing.assert_close(y_wide, _rms_norm_reference(wide, w_wide, 1e-6)[0], atol=1e-5, rtol=1e-5)
    results["test_case_3"] = y_wide

    results["test_case_4"] = rstd
    return results


def bench_rms_norm_fwd():
    x = torch.randn(16384, 8192, device="cuda", dtype=torch.float16)
    weight = torch.randn(8192, device="cuda", dtype=torch.float16)
    rms_norm_fwd(x, weight)


result_gold = test_rms_norm_fwd()
