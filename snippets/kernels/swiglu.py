# geak-family: activation
"""Fused SwiGLU forward: ``out = silu(gate) * up`` with ``silu(g) = g * sigmoid(g)``, as in LLaMA-style MLPs.

Accepts either one tensor ``x[..., 2N]`` whose first half along the last dim is ``gate`` and second half ``up``
(the output of a fused gate/up projection), or two tensors ``gate[..., N]`` and ``up[..., N]``. Leading dims are
flattened to M rows; the kernel takes row strides, so the fused case reads the two halves of ``x`` in place
without any split copy. Grid is (rows, column blocks): each program loads BLOCK_N gate and up values, computes in
fp32 and writes one rounded result, so the op costs exactly one read of the inputs and one write of the output
(the unfused PyTorch version writes and re-reads ``silu(gate)``).
"""
from typing import Optional

import torch
import triton
import triton.language as tl


@triton.jit
def _swiglu_fwd_kernel(
    gate_ptr,
    up_ptr,
    out_ptr,
    n_cols,
    stride_gate_row,
    stride_up_row,
    stride_out_row,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    gate = tl.load(gate_ptr + row * stride_gate_row + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(up_ptr + row * stride_up_row + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * stride_out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def swiglu(x: torch.Tensor, up: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``silu(gate) * up``; pass ``x[..., 2N]`` (gate first, then up) or the two halves ``gate, up`` separately."""
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"swiglu: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if not x.is_contiguous() or (up is not None and not up.is_contiguous()):
        raise ValueError("swiglu: inputs must be contiguous; call .contiguous() first")
    if x.dim() == 0:
        raise ValueError("swiglu: input must have at least one dimension")
    if up is None:
        if x.shape[-1] % 2:
            raise ValueError(f"swiglu: fused input needs an even last dimension, got {x.shape[-1]}")
        n_cols = x.shape[-1] // 2
        rows = x.view(-1, 2 * n_cols)
        gate_rows, up_rows = rows[:, :n_cols], rows[:, n_cols:]
        out_shape = (*x.shape[:-1], n_cols)
    else:
        if up.shape != x.shape:
            raise ValueError(f"swiglu: gate and up shapes differ: {tuple(x.shape)} vs {tuple(up.shape)}")
        if up.dtype != x.dtype or up.device != x.device:
            raise TypeError("swiglu: gate and up must share dtype and device")
        n_cols = x.shape[-1]
        gate_rows, up_rows = x.view(-1, n_cols), up.view(-1, n_cols)
        out_shape = x.shape
    out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
    n_rows = gate_rows.shape[0]
    if n_rows == 0 or n_cols == 0:
        return out
    out_rows = out.view(n_rows, n_cols)
    block_n = min(triton.next_power_of_2(n_cols), 1024)
    grid = (n_rows, triton.cdiv(n_cols, block_n))
    _swiglu_fwd_kernel[grid](
        gate_rows,
        up_rows,
        out_rows,
        n_cols,
        gate_rows.stride(0),
        up_rows.stride(0),
        out_rows.stride(0),
        BLOCK_N=block_n,
        num_warps=4,
    )
    return out


def _swiglu_reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def test_swiglu():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(2, 19, 2 * 1100, device="cuda", dtype=torch.float32) * 3.0
    out = swiglu(x)
    torch.testing.assert_close(out, _swiglu_reference(x[..., :1100], x[..., 1100:]), atol=1e-5, rtol=1e-5)
    results["fused_fp32"] = out

    gate = torch.randn(61, 300, device="cuda", dtype=torch.float16) * 3.0
    up = torch.randn(61, 300, device="cuda", dtype=torch.float16)
    out = swiglu(gate, up)
    torch.testing.assert_close(out, _swiglu_reference(gate, up), atol=2e-3, rtol=2e-3)
    results["split_fp16"] = out

    x16 = torch.cat([gate, up], dim=-1)
    out_fused = swiglu(x16)
    torch.testing.assert_close(out_fused, out, atol=0.0, rtol=0.0)
    results["fused_fp16"] = out_fused
    return results


def bench_swiglu():
    x = torch.randn(8192, 2 * 14336, device="cuda", dtype=torch.float16)
    swiglu(x)
