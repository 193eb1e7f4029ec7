# geak-family: matmul
"""GEMM with a fused epilogue: C[M, N] = relu(A[M, K] @ B[K, N] + bias[N]), fp16 in and out.

Unfused, the bias add and the ReLU are two more passes over C (read + write M*N each); here they happen on
the fp32 accumulator while it is still in registers, so the extra cost is one BLOCK_N load of the bias per
tile. The bias is added in fp32 before the single rounding to fp16, which matches
`relu(a.float() @ b.float() + bias.float()).half()`. The main loop is the standard one: one BLOCK_M x
BLOCK_N tile per program, K walked in BLOCK_K steps with `tl.dot` into fp32, GROUP_M super-grouping of the
tile order for L2 reuse, wrapped `% M` / `% N` load indices (only the K tail is masked), a masked store.
bias may be fp16, bf16 or fp32.
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


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_bias_relu_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
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
    a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k_step * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # Epilogue on the fp32 accumulator: + bias, ReLU, one rounding to the output dtype.
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = tl.maximum(acc + bias[None, :], 0.0)

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def matmul_bias_relu(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Return relu(a @ b + bias) for fp16 a [M, K], b [K, N] and a bias [N] as a new fp16 [M, N] tensor."""
    if a.ndim != 2 or b.ndim != 2 or bias.ndim != 1:
        raise ValueError(
            f"expected a [M, K], b [K, N], bias [N]; got {tuple(a.shape)}, {tuple(b.shape)}, {tuple(bias.shape)}"
        )
    if a.shape[1] != b.shape[0] or bias.shape[0] != b.shape[1]:
        raise ValueError(f"shapes do not chain: a {tuple(a.shape)}, b {tuple(b.shape)}, bias {tuple(bias.shape)}")
    if a.dtype != torch.float16 or b.dtype != torch.float16:
        raise TypeError(f"matmul_bias_relu expects float16 a and b, got {a.dtype} and {b.dtype}")
    if bias.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"bias must be float16, bfloat16 or float32, got {bias.dtype}")
    if not (a.device == b.device == bias.device):
        raise ValueError(f"inputs live on different devices: {a.device}, {b.device}, {bias.device}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    if M == 0 or N == 0:
        return c
    bias = bias.contiguous()

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_bias_relu_kernel[grid](
        a, b, bias, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )
    return c


def test_matmul_bias_relu():
    torch.manual_seed(0)
    outputs = []
    cases = [(128, 128, 128, torch.float16), (97, 75, 113, torch.float32), (3, 50, 20, torch.float16)]
    for M, N, K, bias_dtype in cases:
        a = torch.randn((M, K), device="cuda", dtype=torch.float16)
        b = torch.randn((K, N), device="cuda", dtype=torch.float16)
        bias = torch.randn((N,), device="cuda", dtype=bias_dtype)
        out = matmul_bias_relu(a, b, bias)
        ref = torch.relu(a.float() @ b.float() + bias.float()).half()
        torch.testing.assert_close(out, ref, atol=3e-2, rtol=1e-2)
        assert bool((out >= 0).all())
        outputs.append(out)
    return tuple(outputs)


def flops_matmul_bias_relu(a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    return 2 * M * N * K + 2 * M * N


def bench_matmul_bias_relu():
    a = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    b = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    bias = torch.randn((8192,), device="cuda", dtype=torch.float16)
    matmul_bias_relu(a, b, bias)
