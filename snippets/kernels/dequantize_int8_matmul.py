# geak-family: quantization
"""W8A16 GEMM: y[M, N] = x[M, K] @ (W_q[N, K] * scale[N, None])^T with fp16 activations and int8 weights.

The weight is stored int8 in nn.Linear layout [N, K] with one fp32 scale per output channel (row of W_q),
halving the weight bytes of an fp16 model. The kernel never materialises an fp16 copy of W: each K step
loads the int8 [BLOCK_K, BLOCK_N] tile of W_q^T (W's strides swapped), converts it to fp16 in registers
(exact, |q| <= 127) and feeds it to `tl.dot` with the fp16 activation tile, accumulating in fp32. Because
the scale is constant along K for a given output column, it factors out of the sum:
sum_k x[m, k] * q[n, k] * s[n] = s[n] * sum_k x[m, k] * q[n, k], so it is applied once to the fp32
accumulator in the epilogue instead of once per weight element in the loop. An optional bias is fused too.
Tiling is the usual GROUP_M-swizzled one with wrapped `% M` / `% N` load indices and a masked K tail.
"""

import torch
import triton
import triton.language as tl


def _w8a16_configs() -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    shapes = [
        (64, 64, 32, 4, 2),
        (128, 256, 64, 8, 3),
        (128, 128, 64, 8, 3),
        (128, 128, 128, 8, 3),
        (64, 128, 128, 4, 4),
        (128, 64, 64, 4, 4),
        (32, 128, 128, 4, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.autotune(configs=_w8a16_configs(), key=["M", "N", "K"])
@triton.jit
def w8a16_matmul_kernel(
    x_ptr, wq_ptr, scale_ptr, bias_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk,
    stride_wn, stride_wk,
    stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    first_m = (pid // tiles_per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_per_group) % group_rows
    pid_n = (pid % tiles_per_group) // group_rows

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + (offs_m % M)[:, None] * stride_xm + offs_k[None, :] * stride_xk
    wq_ptrs = wq_ptr + offs_k[:, None] * stride_wk + (offs_n % N)[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k_step * BLOCK_K
        x = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        wq = tl.load(wq_ptrs, mask=offs_k[:, None] < k_left, other=0)
        acc = tl.dot(x, wq.to(tl.float16), acc)  # int8 -> fp16 is exact
        x_ptrs += BLOCK_K * stride_xk
        wq_ptrs += BLOCK_K * stride_wk

    n_mask = offs_n < N
    acc *= tl.load(scale_ptr + offs_n, mask=n_mask, other=0.0)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[None, :]

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & n_mask[None, :])


def w8a16_matmul(
    x: torch.Tensor, weight_q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """Return x @ (weight_q * scale[:, None]).T (+ bias) for fp16 x [M, K], int8 weight_q [N, K], fp32 scale [N]."""
    if x.ndim != 2 or weight_q.ndim != 2 or x.shape[1] != weight_q.shape[1]:
        raise ValueError(f"expected x [M, K] and weight_q [N, K], got {tuple(x.shape)} and {tuple(weight_q.shape)}")
    if x.dtype != torch.float16:
        raise TypeError(f"x must be float16, got {x.dtype}")
    if weight_q.dtype != torch.int8:
        raise TypeError(f"weight_q must be int8, got {weight_q.dtype}")
    N, K = weight_q.shape
    if scale.shape != (N,) or scale.dtype != torch.float32:
        raise ValueError(f"scale must be float32 with shape ({N},), got {scale.dtype} {tuple(scale.shape)}")
    if bias is not None and bias.shape != (N,):
        raise ValueError(f"bias must have shape ({N},), got {tuple(bias.shape)}")
    for t in (weight_q, scale) + ((bias,) if bias is not None else ()):
        if t.device != x.device:
            raise ValueError(f"all inputs must be on {x.device}, found one on {t.device}")
    M = x.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    if M == 0 or N == 0:
        return y
    scale = scale.contiguous()
    bias = bias.contiguous() if bias is not None else None

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    w8a16_matmul_kernel[grid](
        x, weight_q, scale, bias if bias is not None else scale, y, M, N, K,
        x.stride(0), x.stride(1), weight_q.stride(0), weight_q.stride(1), y.stride(0), y.stride(1),
        HAS_BIAS=bias is not None,
    )
    return y


def _quantize_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = weight.float().abs().amax(dim=1).clamp_min(1e-8) / 127.0
    weight_q = torch.round(weight.float() / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return weight_q, scale


def test_w8a16_matmul():
    torch.manual_seed(0)
    outputs = []
    for M, N, K, with_bias in [(128, 128, 128, False), (70, 90, 130, True), (1, 64, 200, False)]:
        x = torch.randn((M, K), device="cuda", dtype=torch.float16)
        weight_q, scale = _quantize_per_channel(torch.randn((N, K), device="cuda") / K**0.5)
        bias = torch.randn((N,), device="cuda", dtype=torch.float16) if with_bias else None
        out = w8a16_matmul(x, weight_q, scale, bias)
        ref = x.float() @ (weight_q.float() * scale[:, None]).t()
        if bias is not None:
            ref = ref + bias.float()
        torch.testing.assert_close(out, ref.half(), atol=1e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def flops_w8a16_matmul(x, weight_q, scale, bias=None):
    return 2 * x.shape[0] * x.shape[1] * weight_q.shape[0]


def bench_w8a16_matmul():
    x = torch.randn((4096, 8192), device="cuda", dtype=torch.float16)
    weight_q = torch.randint(-127, 128, (8192, 8192), device="cuda", dtype=torch.int8)
    scale = torch.rand((8192,), device="cuda", dtype=torch.float32) * 1e-3
    w8a16_matmul(x, weight_q, scale)
