# geak-family: elementwise
"""Rotary position embedding (RoPE), half-rotation / GPT-NeoX layout, on ``x[B, S, H, D]`` with ``cos/sin[P, D/2]``.

For position ``pos`` (``s``, or ``positions[b, s]`` when given) and ``x1 = x[..., :D/2]``, ``x2 = x[..., D/2:]``:
``out[..., :D/2] = x1 * cos[pos] - x2 * sin[pos]`` and ``out[..., D/2:] = x2 * cos[pos] + x1 * sin[pos]``.

One program per (b, s) token rotates all H heads at once as an ``[H, D/2]`` tile pair: the cos/sin rows are
loaded once per token and broadcast over heads, so table traffic is ``1/H`` of the activation traffic, and both
halves of every head are read and written with contiguous accesses. ``x`` may be a strided view (e.g. the q or k
slice of a fused qkv projection) as long as its last dim is contiguous; math is fp32 and the output is a new
contiguous tensor in ``x``'s dtype.
"""
from typing import Optional

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_neox_kernel(
    x_ptr,
    cos_ptr,
    sin_ptr,
    positions_ptr,
    out_ptr,
    seq_len,
    n_heads,
    half_dim,
    stride_xb,
    stride_xs,
    stride_xh,
    stride_table_row,
    stride_ob,
    stride_os,
    stride_oh,
    HAS_POSITIONS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    token = tl.program_id(0)
    b = token // seq_len
    s = token % seq_len
    if HAS_POSITIONS:
        pos = tl.load(positions_ptr + token).to(tl.int64)
    else:
        pos = s.to(tl.int64)
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_HALF)
    dim_mask = dims < half_dim
    cos = tl.load(cos_ptr + pos * stride_table_row + dims, mask=dim_mask, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(sin_ptr + pos * stride_table_row + dims, mask=dim_mask, other=0.0).to(tl.float32)[None, :]
    mask = (heads[:, None] < n_heads) & dim_mask[None, :]
    x_offsets = b.to(tl.int64) * stride_xb + s.to(tl.int64) * stride_xs + heads[:, None] * stride_xh + dims[None, :]
    x1 = tl.load(x_ptr + x_offsets, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + x_offsets + half_dim, mask=mask, other=0.0).to(tl.float32)
    o_offsets = b.to(tl.int64) * stride_ob + s.to(tl.int64) * stride_os + heads[:, None] * stride_oh + dims[None, :]
    out_dtype = out_ptr.dtype.element_ty
    tl.store(out_ptr + o_offsets, (x1 * cos - x2 * sin).to(out_dtype), mask=mask)
    tl.store(out_ptr + o_offsets + half_dim, (x2 * cos + x1 * sin).to(out_dtype), mask=mask)


def rotary_embedding(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Apply NeoX-style RoPE to ``x[B, S, H, D]``; ``cos``/``sin`` are ``[P, D/2]``; ``positions`` optional ``[B, S]``."""
    if x.dim() != 4:
        raise ValueError(f"rotary_embedding: x must be [batch, seq, heads, head_dim], got shape {tuple(x.shape)}")
    batch, seq_len, n_heads, head_dim = x.shape
    if head_dim % 2:
        raise ValueError(f"rotary_embedding: head_dim must be even, got {head_dim}")
    half_dim = head_dim // 2
    if cos.dim() != 2 or cos.shape != sin.shape or cos.shape[1] != half_dim:
        raise ValueError(f"rotary_embedding: cos and sin must both be [positions, {half_dim}], got {tuple(cos.shape)}, {tuple(sin.shape)}")
    if cos.stride() != sin.stride() or cos.stride(1) != 1:
        raise ValueError("rotary_embedding: cos and sin need identical strides and a contiguous last dim")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"rotary_embedding: expected a float16/bfloat16/float32 x, got {x.dtype}")
    if x.stride(3) != 1:
        raise ValueError("rotary_embedding: x must have a contiguous last (head_dim) dimension")
    if positions is None:
        if seq_len > cos.shape[0]:
            raise ValueError(f"rotary_embedding: seq_len {seq_len} exceeds the {cos.shape[0]} table positions")
    else:
        if positions.shape != (batch, seq_len) or positions.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"rotary_embedding: positions must be an int32/int64 [{batch}, {seq_len}] tensor")
        if not positions.is_contiguous():
            raise ValueError("rotary_embedding: positions must be contiguous")
    if len({t.device for t in (x, cos, sin) + (() if positions is None else (positions,))}) != 1:
        raise ValueError("rotary_embedding: all inputs must be on the same device")
    out = torch.empty((batch, seq_len, n_heads, head_dim), device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out
    _rope_neox_kernel[(batch * seq_len,)](
        x,
        cos,
        sin,
        positions if positions is not None else x,
        out,
        seq_len,
        n_heads,
        half_dim,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        cos.stride(0),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        HAS_POSITIONS=positions is not None,
        BLOCK_H=triton.next_power_of_2(n_heads),
        BLOCK_HALF=triton.next_power_of_2(half_dim),
        num_warps=4,
    )
    return out


def rope_tables(max_positions: int, head_dim: int, base: float = 10000.0, device="cuda") -> tuple:
    """fp32 ``(cos, sin)`` tables of shape ``[max_positions, head_dim // 2]``."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.arange(max_positions, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return torch.cos(angles), torch.sin(angles)


def _rope_reference(x, cos, sin, positions=None):
    half = x.shape[-1] // 2
    if positions is None:
        positions = torch.arange(x.shape[1], device=x.device)[None, :].expand(x.shape[0], -1)
    c = cos[positions.long()][:, :, None, :]
    s = sin[positions.long()][:, :, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def test_rotary_embedding():
    torch.manual_seed(0)
    results = {}
    cos, sin = rope_tables(64, 80)
    x = torch.randn(2, 37, 5, 80, device="cuda", dtype=torch.float32)
    out = rotary_embedding(x, cos, sin)
    torch.testing.assert_close(out, _rope_reference(x, cos, sin), atol=1e-5, rtol=1e-5)
    results["fp32_ragged_heads_dims"] = out

    cos64, sin64 = rope_tables(128, 64)
    qkv = torch.randn(3, 16, 3 * 4, 64, device="cuda", dtype=torch.float16)
    q = qkv[:, :, :4]
    positions = torch.randint(0, 128, (3, 16), device="cuda", dtype=torch.int32)
    out16 = rotary_embedding(q, cos64, sin64, positions)
    torch.testing.assert_close(out16, _rope_reference(q, cos64, sin64, positions), atol=1e-3, rtol=1e-3)
    results["fp16_strided_q_with_positions"] = out16
    return results


def bench_rotary_embedding():
    cos, sin = rope_tables(4096, 128)
    x = torch.randn(8, 4096, 32, 128, device="cuda", dtype=torch.float16)
    rotary_embedding(x, cos, sin)
