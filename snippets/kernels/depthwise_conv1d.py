# geak-family: convolution
"""Causal depthwise 1-D convolution (the short conv in Mamba blocks), fp32, optional bias and SiLU.

y[b, c, t] = act(bias[c] + sum_{j < W} weight[c, j] * x[b, c, t - (W - 1) + j]), with x taken as 0 for
t < 0, so position t sees only itself and the W - 1 previous steps. x is [B, C, L] with any strides (a
channel-last [B, L, C] buffer viewed as [B, C, L] works), weight is [C, W] with a small width (typically
4), y is a new contiguous [B, C, L] tensor. Each program handles BLOCK_L consecutive time steps of one
(batch, channel) row: the W weights are scalar loads, and the W shifted windows of x are W overlapping
loads of the same row, so after the first one they hit L1 and DRAM sees one read of x and one write of y
— the op is purely bandwidth-bound. The (batch, channel) row is grid axis 0 (no 65535 limit), the time
block axis 1. The filter loop is unrolled with `tl.static_range`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def causal_depthwise_conv1d_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    C, L,
    stride_xb, stride_xc, stride_xl,
    stride_wc, stride_wk,
    KERNEL_WIDTH: tl.constexpr, HAS_BIAS: tl.constexpr, APPLY_SILU: tl.constexpr, BLOCK_L: tl.constexpr,
):
    row = tl.program_id(0)  # b * C + c
    batch = row // C
    channel = row % C
    offs_t = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    t_mask = offs_t < L
    x_row = x_ptr + batch.to(tl.int64) * stride_xb + channel.to(tl.int64) * stride_xc

    acc = tl.zeros((BLOCK_L,), dtype=tl.float32)
    for j in tl.static_range(KERNEL_WIDTH):
        src = offs_t - (KERNEL_WIDTH - 1 - j)
        x = tl.load(x_row + src * stride_xl, mask=t_mask & (src >= 0), other=0.0)
        acc += x * tl.load(w_ptr + channel * stride_wc + j * stride_wk)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + channel)
    if APPLY_SILU:
        acc = acc * tl.sigmoid(acc)
    tl.store(y_ptr + row.to(tl.int64) * L + offs_t, acc, mask=t_mask)


def causal_depthwise_conv1d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, activation: str | None = None
) -> torch.Tensor:
    """Causal depthwise conv of fp32 x [B, C, L] with weight [C, W] (+ bias [C]); activation None or "silu"."""
    if x.ndim != 3 or weight.ndim != 2 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"expected x [B, C, L] and weight [C, W], got {tuple(x.shape)} and {tuple(weight.shape)}")
    if x.dtype != torch.float32 or weight.dtype != torch.float32:
        raise TypeError(f"causal_depthwise_conv1d expects float32 x and weight, got {x.dtype} and {weight.dtype}")
    if activation not in (None, "silu"):
        raise ValueError(f"activation must be None or 'silu', got {activation!r}")
    batch, channels, length = x.shape
    width = weight.shape[1]
    if width < 1:
        raise ValueError("the filter width must be at least 1")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.device != x.device:
            raise ValueError(f"{name} is on {t.device}, x on {x.device}")
    if bias is not None and (bias.shape != (channels,) or bias.dtype != torch.float32):
        raise ValueError(f"bias must be float32 with shape ({channels},), got {bias.dtype} {tuple(bias.shape)}")
    y = torch.empty((batch, channels, length), device=x.device, dtype=torch.float32)
    if y.numel() == 0:
        return y
    block_l = min(triton.next_power_of_2(length), 2048)
    grid = (batch * channels, triton.cdiv(length, block_l))
    causal_depthwise_conv1d_kernel[grid](
        x, weight, bias if bias is not None else weight, y,
        channels, length,
        x.stride(0), x.stride(1), x.stride(2),
        weight.stride(0), weight.stride(1),
        KERNEL_WIDTH=width, HAS_BIAS=bias is not None, APPLY_SILU=activation == "silu",
        BLOCK_L=block_l, num_warps=8 if block_l >= 2048 else 4,
    )
    return y


def _reference(x, weight, bias, activation):
    width = weight.shape[1]
    y = torch.nn.functional.conv1d(x, weight.unsqueeze(1), bias, padding=width - 1, groups=x.shape[1])
    y = y[..., : x.shape[2]]
    return torch.nn.functional.silu(y) if activation == "silu" else y


def test_causal_depthwise_conv1d():
    torch.manual_seed(0)
    x = torch.randn((2, 5, 37), device="cuda")
    weight = torch.randn((5, 4), device="cuda")
    bias = torch.randn((5,), device="cuda")
    out = causal_depthwise_conv1d(x, weight, bias, activation="silu")
    torch.testing.assert_close(out, _reference(x, weight, bias, "silu"), atol=1e-5, rtol=1e-5)
    return out


def test_causal_depthwise_conv1d_strided_input():
    torch.manual_seed(0)
    # Channel-last activations [B, L, C] viewed as [B, C, L]; width 3, no bias, no activation; long row.
    x = torch.randn((3, 2500, 6), device="cuda").transpose(1, 2)
    weight = torch.randn((6, 3), device="cuda")
    out = causal_depthwise_conv1d(x, weight)
    torch.testing.assert_close(out, _reference(x, weight, None, None), atol=1e-5, rtol=1e-5)
    return out


def bench_causal_depthwise_conv1d():
    # Mamba-style short conv: batch 4, d_inner 4096, 4096 tokens (256 MB in, 256 MB out).
    x = torch.randn((4, 4096, 4096), device="cuda")
    weight = torch.randn((4096, 4), device="cuda")
    bias = torch.randn((4096,), device="cuda")
    causal_depthwise_conv1d(x, weight, bias, activation="silu")
