# geak-family: matmul
"""Dense fp16 GEMM: C[M, N] = A[M, K] @ B[K, N] with fp32 accumulation and an fp16 result.

A and B may have any strides (a transposed view costs nothing). Each program owns one BLOCK_M x BLOCK_N tile
of C and walks K in BLOCK_K steps with `tl.dot` (tensor cores on NVIDIA, MFMA on AMD), keeping the
accumulator in fp32 registers while the compiler software-pipelines the A/B loads (`num_stages`). Tiles are
visited in GROUP_M-tall super-columns, so the programs resident at one time reuse the same rows of A and
columns of B from L2 instead of streaming all of B for every tile row. Row and column indices are wrapped
with `% M` / `% N`, which keeps the A/B loads in bounds without an M/N mask (wrapped rows are computed but
never stored); only the K tail is masked. The autotune list compiles on NVIDIA Hopper and AMD CDNA3; the
first entry is small so the CPU interpreter (which only runs the first config) stays quick.
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
def matmul_kernel(
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
    # Super-grouping: consecutive programs walk down GROUP_M tile rows before stepping to the next column.
    tiles_per_group = GROUP_M * tiles_n
    group_id = pid // tiles_per_group
    first_m = group_id * GROUP_M
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
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return a @ b for fp16 matrices a [M, K] and b [K, N] as a new fp16 [M, N] tensor."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul expects 2-D inputs, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != torch.float16 or b.dtype != torch.float16:
        raise TypeError(f"matmul expects float16 inputs, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"inputs live on different devices: {a.device} and {b.device}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    if M == 0 or N == 0:
        return c

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )
    return c


##################################################################################################################################################


import torch


def test_matmul():
    torch.manual_seed(0)
    results = {}
    cases = [(128, 128, 128), (97, 75, 113), (1, 64, 33), (70, 1, 130)]
    for i, (M, N, K) in enumerate(cases, start=1):
        a = torch.randn((M, K), device="cuda", dtype=torch.float16)
        b = torch.randn((K, N), device="cuda", dtype=torch.float16)
        out = matmul(a, b)
        ref = (a.float() @ b.float()).half()
        torch.testing.assert_close(out, ref, atol=3e-2, rtol=1e-2)
        results[f"test_case_{i}"] = out
    # B given as a transposed view: no copy, the kernel follows the strides.
    a = torch.randn((45, 96), device="cuda", dtype=torch.float16)
    b_t = torch.randn((83, 96), device="cuda", dtype=torch.float16)
    out = matmul(a, b_t.t())
    torch.testing.assert_close(out, (a.float() @ b_t.float().t()).half(), atol=3e-2, rtol=1e-2)
    results[f"test_case_{len(cases) + 1}"] = out
    return results


def flops_matmul(a, b):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def bench_matmul():
    a = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    b = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    matmul(a, b)


result_gold = test_matmul()
