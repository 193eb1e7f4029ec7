# geak-family: matmul
"""Dense bf16 GEMM: C[M, N] = A[M, K] @ B[K, N], bf16 operands, fp32 accumulation, bf16 result.

bf16 keeps fp32's exponent range, so it is the usual training/inference dtype; the tensor cores (NVIDIA) and
MFMA units (AMD) run it at the same rate as fp16. Each program computes one BLOCK_M x BLOCK_N tile of C,
stepping through K with `tl.dot` into an fp32 accumulator while `num_stages` deep software pipelining
overlaps the next A/B tile loads with the current MMA. Programs are ordered in GROUP_M-tall super-columns so
concurrently running tiles share A rows and B columns in L2. A/B rows and columns are wrapped with `% M` /
`% N` (always in bounds, wrapped results never stored), so only the K tail needs a load mask. The first
autotune config is the small, CPU-friendly one; the others cover Hopper (128x256, 8 warps, 3 stages) and
CDNA3 (256x256, 2 stages), and configs that do not fit a GPU's shared memory are skipped by the autotuner.
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
        (256, 256, 64, 8, 2),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_bf16_kernel(
    a_ptr, b_ptr, c_ptr,
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
    rows = offs_m % M
    cols = offs_n % N
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k_step * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=c_mask)


def matmul_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b for bf16 matrices a [M, K] and b [K, N] as a new bf16 [M, N] tensor."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul_bf16 expects 2-D inputs, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise TypeError(f"matmul_bf16 expects bfloat16 inputs, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"inputs live on different devices: {a.device} and {b.device}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    if M == 0 or N == 0:
        return c

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_bf16_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )
    return c


def test_matmul_bf16():
    torch.manual_seed(0)
    outputs = []
    for M, N, K in [(128, 128, 128), (97, 75, 113), (1, 64, 33)]:
        a = torch.randn((M, K), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((K, N), device="cuda", dtype=torch.bfloat16)
        out = matmul_bf16(a, b)
        ref = (a.float() @ b.float()).to(torch.bfloat16)
        torch.testing.assert_close(out, ref, atol=6e-2, rtol=2e-2)
        outputs.append(out)
    return tuple(outputs)


def test_matmul_bf16_transposed_operand():
    torch.manual_seed(0)
    a = torch.randn((45, 96), device="cuda", dtype=torch.bfloat16)
    b_t = torch.randn((83, 96), device="cuda", dtype=torch.bfloat16)
    out = matmul_bf16(a, b_t.t())
    ref = (a.float() @ b_t.float().t()).to(torch.bfloat16)
    torch.testing.assert_close(out, ref, atol=6e-2, rtol=2e-2)
    return out


def flops_matmul_bf16(a, b):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def bench_matmul_bf16():
    a = torch.randn((8192, 8192), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((8192, 8192), device="cuda", dtype=torch.bfloat16)
    matmul_bf16(a, b)
