# geak-family: softmax
"""Softmax backward over the last dimension: ``dx = y * (dy - sum(dy * y))`` from the forward output ``y``.

Using the saved output ``y`` (not the input) avoids recomputing exp. One program per row loads the ``y`` and
``dy`` rows once (BLOCK_N = next_power_of_2(N), masked), reduces ``sum(dy * y)`` in fp32, and writes ``dx``: two
reads and one write per element, the bandwidth minimum. Inputs are 2-D with unit column stride (any row stride) or
contiguous N-D, fp16/bf16/fp32; rows up to 32768 elements fit in registers with up to 16 warps.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def _softmax_bwd_kernel(
    y_ptr, dy_ptr, dx_ptr, n_cols, stride_y_row, stride_dy_row, stride_dx_row, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride_y_row + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride_dy_row + cols, mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=0)
    dx = y * (dy - dot)
    tl.store(dx_ptr + row * stride_dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def _as_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dim() == 2 and t.stride(1) == 1:
        return t
    if not t.is_contiguous():
        raise ValueError(f"softmax_backward: {name} must be contiguous (2-D inputs may have any row stride)")
    return t.view(-1, t.shape[-1])


def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """Gradient w.r.t. the softmax input, given the softmax output ``y`` and upstream gradient ``dy``."""
    if y.shape != dy.shape:
        raise ValueError(f"softmax_backward: y and dy shapes differ: {tuple(y.shape)} vs {tuple(dy.shape)}")
    if y.dtype != dy.dtype or y.device != dy.device:
        raise TypeError("softmax_backward: y and dy must share dtype and device")
    if y.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"softmax_backward: expected float16/bfloat16/float32 tensors, got {y.dtype}")
    if y.dim() == 0:
        raise ValueError("softmax_backward: inputs must have at least one dimension")
    y_rows, dy_rows = _as_rows(y, "y"), _as_rows(dy, "dy")
    n_rows, n_cols = y_rows.shape
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"softmax_backward: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit in registers")
    dx = torch.empty(y.shape, device=y.device, dtype=y.dtype)
    if dx.numel() == 0:
        return dx
    dx_rows = dx.view(n_rows, n_cols)
    block_n = triton.next_power_of_2(n_cols)
    num_warps = min(max(block_n // 512, 4), 16)
    _softmax_bwd_kernel[(n_rows,)](
        y_rows,
        dy_rows,
        dx_rows,
        n_cols,
        y_rows.stride(0),
        dy_rows.stride(0),
        dx_rows.stride(0),
        BLOCK_N=block_n,
        num_warps=num_warps,
    )
    return dx


def _autograd_reference(x: torch.Tensor, dy: torch.Tensor) -> tuple:
    x = x.detach().float().requires_grad_(True)
    y = torch.softmax(x, dim=-1)
    y.backward(dy.float())
    return y.detach(), x.grad


def test_softmax_backward():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(53, 777, device="cuda", dtype=torch.float32) * 3.0
    dy = torch.randn(53, 777, device="cuda", dtype=torch.float32)
    y, dx_ref = _autograd_reference(x, dy)
    dx = softmax_backward(y, dy)
    torch.testing.assert_close(dx, dx_ref, atol=1e-6, rtol=1e-5)
    results["fp32"] = dx

    x16 = torch.randn(3, 9, 1500, device="cuda", dtype=torch.float16)
    dy16 = torch.randn(3, 9, 1500, device="cuda", dtype=torch.float16)
    y16 = torch.softmax(x16.float(), dim=-1).to(torch.float16)
    ref16 = y16.float() * (dy16.float() - (y16.float() * dy16.float()).sum(-1, keepdim=True))
    dx16 = softmax_backward(y16, dy16)
    torch.testing.assert_close(dx16, ref16.to(torch.float16), atol=1e-4, rtol=2e-3)
    results["fp16_3d"] = dx16
    return results


def bench_softmax_backward():
    y = torch.softmax(torch.randn(16384, 4096, device="cuda", dtype=torch.float32), dim=-1).to(torch.float16)
    dy = torch.randn(16384, 4096, device="cuda", dtype=torch.float16)
    softmax_backward(y, dy)
