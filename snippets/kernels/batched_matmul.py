# geak-family: matmul
"""Batched fp16 GEMM: C[b] = A[b] @ B[b] for A [B, M, K], B [B, K, N], C [B, M, N], fp32 accumulation.

Grid axis 1 is the batch index and axis 0 the GROUP_M-swizzled output tile inside one matrix, so all
tiles of a batch entry are scheduled together and share that entry's A rows / B columns in L2. The batch
offset is formed in int64 (B * M * K can pass 2**31 elements even when each matrix is small); inside a
matrix the offsets stay int32. Any strides are accepted, including a batch stride of 0 (an expanded B shared
by every batch entry) and transposed views. Each program runs the standard pipelined `tl.dot` K loop on an
fp32 accumulator; rows/columns are wrapped with `% M` / `% N` so only the K tail is masked on load, and the
store is masked. The first autotune config is the small one the CPU interpreter uses.
"""

import torch
import triton
import triton.language as tl


def _bmm_configs() -> list[triton.Config]:
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


@triton.autotune(configs=_bmm_configs(), key=["M", "N", "K"])
@triton.jit
def batched_matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_ab, stride_am, stride_ak,
    stride_bb, stride_bk, stride_bn,
    stride_cb, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
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
    a_ptrs = a_ptr + batch * stride_ab + (offs_m % M)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + offs_k[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_step in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k_step * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + batch * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def batched_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return torch.bmm(a, b) for fp16 a [B, M, K] and b [B, K, N] as a new fp16 [B, M, N] tensor."""
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"batched_matmul expects 3-D inputs, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} are not [B, M, K] and [B, K, N]")
    if a.dtype != torch.float16 or b.dtype != torch.float16:
        raise TypeError(f"batched_matmul expects float16 inputs, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"inputs live on different devices: {a.device} and {b.device}")
    batch, M, K = a.shape
    N = b.shape[2]
    if batch > 65535:
        raise ValueError(f"batch size {batch} exceeds the grid's axis-1 limit of 65535")
    c = torch.empty((batch, M, N), device=a.device, dtype=torch.float16)
    if batch == 0 or M == 0 or N == 0:
        return c

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), batch)

    batched_matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), a.stride(2),
        b.stride(0), b.stride(1), b.stride(2),
        c.stride(0), c.stride(1), c.stride(2),
    )
    return c


def test_batched_matmul():
    torch.manual_seed(0)
    outputs = []
    for batch, M, N, K in [(3, 64, 64, 64), (2, 97, 75, 113), (5, 1, 40, 17)]:
        a = torch.randn((batch, M, K), device="cuda", dtype=torch.float16)
        b = torch.randn((batch, K, N), device="cuda", dtype=torch.float16)
        out = batched_matmul(a, b)
        ref = torch.bmm(a.float(), b.float()).half()
        torch.testing.assert_close(out, ref, atol=3e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def test_batched_matmul_strided():
    torch.manual_seed(0)
    # One B shared by every batch entry (batch stride 0), A given as a transposed view.
    a_t = torch.randn((4, 50, 70), device="cuda", dtype=torch.float16)
    b = torch.randn((50, 90), device="cuda", dtype=torch.float16).expand(4, 50, 90)
    out = batched_matmul(a_t.transpose(1, 2), b)
    ref = torch.bmm(a_t.float().transpose(1, 2), b.float()).half()
    torch.testing.assert_close(out, ref, atol=3e-2, rtol=1e-2)
    return out


def flops_batched_matmul(a, b):
    return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]


def bench_batched_matmul():
    a = torch.randn((8, 4096, 4096), device="cuda", dtype=torch.float16)
    b = torch.randn((8, 4096, 4096), device="cuda", dtype=torch.float16)
    batched_matmul(a, b)
