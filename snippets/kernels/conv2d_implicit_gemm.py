# geak-family: convolution
"""2-D convolution in NHWC as an implicit GEMM: y[N, P, Q, K] = conv(x[N, H, W, C], w[K, R, S, C]) (+ bias).

The convolution is the GEMM Y[M, K] = X_col[M, R*S*C] @ W[K, R*S*C]^T with M = N*P*Q output pixels, but
the im2col matrix X_col is never built: for reduction step (r, s, c-block) each program gathers its
BLOCK_M x BLOCK_K tile straight from x at input row h = p*stride - pad + r*dilation and column
w = q*stride - pad + s*dilation, with a mask that zero-fills the padding border. In NHWC the BLOCK_K
channels of one pixel are contiguous, so the gathered rows are vectorised loads, and the KRSC weight tile is
contiguous along C as well. The (r, s, c-block) steps are flattened into one loop so the compiler's
software pipeline covers the whole reduction even when C fits in a single block. Output channels are the
fastest-varying program index, so the programs that share an input-pixel tile run together and hit L2;
the weights are small enough to stay cached. fp16 operands, fp32 accumulation, optional fused bias.
"""

import torch
import triton
import triton.language as tl


def _conv_configs() -> list[triton.Config]:
    # (BLOCK_M pixels, BLOCK_N out channels, BLOCK_K in channels, num_warps, num_stages)
    shapes = [
        (64, 32, 32, 4, 2),
        (128, 128, 64, 8, 3),
        (128, 64, 64, 4, 3),
        (256, 64, 64, 8, 3),
        (128, 128, 32, 4, 4),
        (64, 128, 64, 4, 3),
        (256, 128, 32, 8, 3),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.autotune(configs=_conv_configs(), key=["M", "K", "C", "R", "S"])
@triton.jit
def conv2d_nhwc_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    M, H, W, C, K, P, Q, R, S,
    stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
    stride_xn, stride_xh, stride_xw, stride_xc,
    stride_wk, stride_wr, stride_ws, stride_wc,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(K, BLOCK_N)
    pid_m = pid // tiles_n
    pid_n = pid % tiles_n

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # output pixel index n*P*Q + p*Q + q
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # output channel
    offs_k = tl.arange(0, BLOCK_K)                    # input channel within the current block
    m_mask = offs_m < M
    n_mask = offs_n < K
    img = offs_m // (P * Q)
    pq = offs_m % (P * Q)
    h_origin = (pq // Q) * stride_h - pad_h
    w_origin = (pq % Q) * stride_w - pad_w
    x_img = x_ptr + img.to(tl.int64) * stride_xn
    w_rows = w_ptr + offs_n * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    c_steps = tl.cdiv(C, BLOCK_K)
    for step in range(0, R * S * c_steps):
        rs = step // c_steps
        c = (step % c_steps) * BLOCK_K + offs_k
        r = rs // S
        s = rs % S
        h = h_origin + r * dil_h
        w = w_origin + s * dil_w
        pixel_ok = m_mask & (h >= 0) & (h < H) & (w >= 0) & (w < W)
        c_ok = c < C
        x_tile = tl.load(
            (x_img + h * stride_xh + w * stride_xw)[:, None] + c[None, :] * stride_xc,
            mask=pixel_ok[:, None] & c_ok[None, :], other=0.0,
        )
        w_tile = tl.load(
            (w_rows + r * stride_wr + s * stride_ws)[None, :] + c[:, None] * stride_wc,
            mask=c_ok[:, None] & n_mask[None, :], other=0.0,
        )
        acc = tl.dot(x_tile, w_tile, acc)

    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[None, :]
    # y is a contiguous [N, P, Q, K] tensor, i.e. row-major [M, K].
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * K + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def _pair(value: int | tuple[int, int], name: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(not isinstance(v, int) for v in pair):
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return pair


def conv2d_nhwc(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    dilation: int | tuple[int, int] = 1,
) -> torch.Tensor:
    """Convolve fp16 x [N, H, W, C] with weight [K, R, S, C] (+ bias [K]); returns fp16 [N, P, Q, K]."""
    if x.ndim != 4 or weight.ndim != 4 or x.shape[3] != weight.shape[3]:
        raise ValueError(f"expected x [N, H, W, C] and weight [K, R, S, C], got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    if x.dtype != torch.float16 or weight.dtype != torch.float16:
        raise TypeError(f"conv2d_nhwc expects float16 x and weight, got {x.dtype} and {weight.dtype}")
    if x.device != weight.device:
        raise ValueError(f"x is on {x.device}, weight on {weight.device}")
    batch, H, W, C = x.shape
    K, R, S, _ = weight.shape
    (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w) = (
        _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    )
    if min(stride_h, stride_w, dil_h, dil_w) < 1 or min(pad_h, pad_w) < 0:
        raise ValueError("stride and dilation must be >= 1 and padding >= 0")
    if bias is not None and (bias.shape != (K,) or bias.device != x.device):
        raise ValueError(f"bias must have shape ({K},) on {x.device}, got {tuple(bias.shape)} on {bias.device}")
    P = (H + 2 * pad_h - dil_h * (R - 1) - 1) // stride_h + 1
    Q = (W + 2 * pad_w - dil_w * (S - 1) - 1) // stride_w + 1
    if P <= 0 or Q <= 0:
        raise ValueError(f"the kernel ({R}x{S}, dilation {dil_h}x{dil_w}) does not fit the padded {H}x{W} input")
    y = torch.empty((batch, P, Q, K), device=x.device, dtype=torch.float16)
    M = batch * P * Q
    if M == 0 or K == 0:
        return y

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(K, meta["BLOCK_N"]),)

    conv2d_nhwc_kernel[grid](
        x, weight, bias.contiguous() if bias is not None else y, y,
        M, H, W, C, K, P, Q, R, S,
        stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
        *x.stride(), *weight.stride(),
        HAS_BIAS=bias is not None,
    )
    return y


def _reference(x, weight, bias, stride, padding, dilation):
    out = torch.nn.functional.conv2d(
        x.permute(0, 3, 1, 2).double(), weight.permute(0, 3, 1, 2).double(),
        bias.double() if bias is not None else None, stride=stride, padding=padding, dilation=dilation,
    )
    return out.permute(0, 2, 3, 1).float()


def test_conv2d_nhwc():
    torch.manual_seed(0)
    outputs = []
    cases = [
        # (N, H, W, C, K, R, S, stride, padding, dilation, bias)
        (2, 9, 9, 20, 24, 3, 3, 1, 1, 1, True),
        (1, 10, 7, 13, 40, 3, 3, 2, 1, 1, False),
        (2, 6, 6, 64, 33, 1, 1, 1, 0, 1, True),
        (1, 11, 12, 8, 16, 5, 3, (2, 1), (2, 1), (1, 2), False),
    ]
    for N, H, W, C, K, R, S, stride, padding, dilation, with_bias in cases:
        x = torch.randn((N, H, W, C), device="cuda", dtype=torch.float16)
        weight = (torch.randn((K, R, S, C), device="cuda") / (R * S * C) ** 0.5).half()
        bias = torch.randn((K,), device="cuda", dtype=torch.float16) if with_bias else None
        out = conv2d_nhwc(x, weight, bias, stride=stride, padding=padding, dilation=dilation)
        ref = _reference(x, weight, bias, stride, padding, dilation)
        torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def flops_conv2d_nhwc(x, weight, bias=None, stride=1, padding=0, dilation=1):
    (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w) = (
        _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    )
    N, H, W, C = x.shape
    K, R, S, _ = weight.shape
    P = (H + 2 * pad_h - dil_h * (R - 1) - 1) // stride_h + 1
    Q = (W + 2 * pad_w - dil_w * (S - 1) - 1) // stride_w + 1
    return 2 * N * P * Q * K * R * S * C


def bench_conv2d_nhwc():
    # UNet-style 3x3 conv at 64x64 resolution, 320 -> 320 channels, batch 32.
    x = torch.randn((32, 64, 64, 320), device="cuda", dtype=torch.float16)
    weight = (torch.randn((320, 3, 3, 320), device="cuda") / 54).half()
    bias = torch.randn((320,), device="cuda", dtype=torch.float16)
    conv2d_nhwc(x, weight, bias, stride=1, padding=1)
