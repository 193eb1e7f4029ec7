# geak-family: matmul
"""Fused MLP up-projection: y = gelu_tanh(x @ W^T + b) for x [..., K], W [N, K] (nn.Linear layout), b [N].

fp16 operands, fp32 accumulation, fp16 result. The weight is read in its stored [N, K] layout: the B tile
[BLOCK_K, BLOCK_N] is gathered with W's strides swapped, so no transposed copy of W is ever made. The bias
and the tanh-approximated GELU run on the fp32 accumulator before the one rounding to fp16, removing two
extra passes over the [M, N] activation. GELU uses the identity 0.5 * (1 + tanh(u)) = sigmoid(2u):
gelu(z) = z * sigmoid(2 * sqrt(2/pi) * (z + 0.044715 z^3)), which needs only `tl.sigmoid` (no tanh
intrinsic, so it is portable across backends) and saturates cleanly for large |z|. The main loop is the
standard GROUP_M-swizzled, K-pipelined `tl.dot` GEMM; leading dims of x are flattened into M; the bias is
optional.
"""

import torch
import triton
import triton.language as tl


def _matmul_configs() -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    shapes = [
        (64, 64, 32, 4, 2),
        (128, 256, 64, 8, 3),
        (256, 128, 64, 8, 3),
        (128, 128, 64, 8, 3),
        (128, 128, 32, 4, 4),
        (64, 128, 64, 4, 4),
        (128, 64, 64, 4, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.jit
def _gelu_tanh(z):
    # 0.5 * z * (1 + tanh(u)) == z * sigmoid(2u), u = sqrt(2/pi) * (z + 0.044715 z^3); 2*sqrt(2/pi) = 1.5957691
    return z * tl.sigmoid(1.5957691216057308 * (z + 0.044715 * z * z * z))


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def linear_gelu_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
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
    # W is [N, K]; reading it with swapped strides yields the [BLOCK_K, BLOCK_N] tile of W^T.
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + (offs_n % N)[None, :] * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k_step * BLOCK_K
        x = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(x, w, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    y = _gelu_tanh(acc)

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    y_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=y_mask)


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Return gelu(x @ weight.T + bias, approximate="tanh") for fp16 x [..., K], weight [N, K], bias [N]."""
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"expected x [..., K] and weight [N, K], got {tuple(x.shape)} and {tuple(weight.shape)}")
    if x.dtype != torch.float16 or weight.dtype != torch.float16:
        raise TypeError(f"linear_gelu expects float16 x and weight, got {x.dtype} and {weight.dtype}")
    if x.device != weight.device:
        raise ValueError(f"inputs live on different devices: {x.device} and {weight.device}")
    N, K = weight.shape
    if bias is not None:
        if bias.shape != (N,):
            raise ValueError(f"bias must have shape ({N},), got {tuple(bias.shape)}")
        if bias.device != x.device:
            raise ValueError(f"bias lives on {bias.device}, x on {x.device}")
        bias = bias.contiguous()
    x2d = x.reshape(-1, K)
    M = x2d.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=torch.float16)
    if M > 0 and N > 0:

        def grid(meta):
            return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

        linear_gelu_kernel[grid](
            x2d, weight, bias if bias is not None else y, y, M, N, K,
            x2d.stride(0), x2d.stride(1), weight.stride(0), weight.stride(1), y.stride(0), y.stride(1),
            HAS_BIAS=bias is not None,
        )
    return y.reshape(*x.shape[:-1], N)


def _reference(x, weight, bias):
    out = x.float() @ weight.float().t()
    if bias is not None:
        out = out + bias.float()
    return torch.nn.functional.gelu(out, approximate="tanh").half()


def test_linear_gelu():
    torch.manual_seed(0)
    outputs = []
    for shape, N, with_bias in [((128, 128), 128, True), ((2, 45, 100), 77, True), ((5, 64), 96, False)]:
        K = shape[-1]
        x = torch.randn(shape, device="cuda", dtype=torch.float16)
        weight = torch.randn((N, K), device="cuda", dtype=torch.float16) / K**0.5
        bias = torch.randn((N,), device="cuda", dtype=torch.float16) if with_bias else None
        out = linear_gelu(x, weight, bias)
        torch.testing.assert_close(out, _reference(x, weight, bias), atol=1e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def flops_linear_gelu(x, weight, bias=None):
    M = x.numel() // x.shape[-1]
    N, K = weight.shape
    return 2 * M * N * K


def bench_linear_gelu():
    # MLP up-projection: 8192 tokens, hidden 4096 -> 16384.
    x = torch.randn((8192, 4096), device="cuda", dtype=torch.float16)
    weight = torch.randn((16384, 4096), device="cuda", dtype=torch.float16) / 64
    bias = torch.randn((16384,), device="cuda", dtype=torch.float16)
    linear_gelu(x, weight, bias)
