# geak-family: matmul
"""Split-K GEMM for skinny problems: C[M, N] = A[M, K] @ B[K, N] with small M and large K (fp16 or bf16).

With M of 1-64 rows (decode-time projections) a normal tiling yields only cdiv(N, BLOCK_N) programs, too few
to keep every SM streaming B, which is the whole cost (the op is bound by reading B once). Split-K also cuts
K into SPLIT_K slices: grid axis 1 picks the slice, so the grid has SPLIT_K times more programs, each one
reducing a BLOCK_K-aligned K range into an fp32 BLOCK_M x BLOCK_N tile. The slices are combined by a second,
elementwise kernel rather than `tl.atomic_add`: every slice writes its fp32 partial to its own plane of a
[SPLIT_K, M, N] workspace and the reduce kernel sums the planes in a fixed order and casts to the output
dtype. That costs one extra launch and SPLIT_K*M*N*4 bytes (tiny next to B), but the result is
deterministic, needs no zero-filled accumulator, and the cast is fused. `split_k=None` picks a split that
gives about four programs per SM while keeping at least 1024 K elements per slice.
"""

import torch
import triton
import triton.language as tl


def _splitk_configs() -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): small BLOCK_M, deep K tiles for skinny problems.
    shapes = [
        (32, 64, 64, 4, 2),
        (16, 128, 128, 4, 4),
        (32, 128, 128, 4, 4),
        (16, 256, 64, 8, 3),
        (32, 256, 64, 8, 3),
        (64, 128, 64, 4, 4),
        (64, 64, 128, 4, 3),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.autotune(configs=_splitk_configs(), key=["M", "N", "K", "split_k"])
@triton.jit
def splitk_partial_kernel(
    a_ptr, b_ptr, partial_ptr,
    M, N, K, split_k,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // tiles_n
    pid_n = pid % tiles_n

    # Each slice covers a BLOCK_K-aligned range of K; trailing slices may be short or empty.
    k_per_split = tl.cdiv(tl.cdiv(K, split_k), BLOCK_K) * BLOCK_K
    k_begin = split * k_per_split
    k_end = tl.minimum(k_begin + k_per_split, K)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + (k_begin + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_begin + offs_k)[:, None] * stride_bk + (offs_n % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_begin, k_end, BLOCK_K):
        k_mask = k + offs_k < k_end
        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # Workspace is a contiguous [split_k, M, N] fp32 tensor.
    out_ptrs = partial_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(out_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def splitk_reduce_kernel(partial_ptr, c_ptr, numel, split_k, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in range(0, split_k):
        total += tl.load(partial_ptr + split * numel + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, total.to(c_ptr.dtype.element_ty), mask=mask)


def _default_split_k(device: torch.device, M: int, N: int, K: int) -> int:
    units = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    tiles = triton.cdiv(M, 32) * triton.cdiv(N, 128)
    return max(1, min(K // 1024, (4 * units) // tiles))


def matmul_splitk(a: torch.Tensor, b: torch.Tensor, split_k: int | None = None) -> torch.Tensor:
    """Return a @ b (fp16/bf16, a [M, K], b [K, N]) computed with K split into `split_k` slices."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul_splitk expects 2-D inputs, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        raise TypeError(f"matmul_splitk expects two float16 or two bfloat16 inputs, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"inputs live on different devices: {a.device} and {b.device}")
    M, K = a.shape
    N = b.shape[1]
    if split_k is None:
        split_k = _default_split_k(a.device, M, N, K)
    if split_k < 1:
        raise ValueError(f"split_k must be >= 1, got {split_k}")
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    partial = torch.empty((split_k, M, N), device=a.device, dtype=torch.float32)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), split_k)

    splitk_partial_kernel[grid](
        a, b, partial, M, N, K, split_k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
    )
    block = 1024
    splitk_reduce_kernel[(triton.cdiv(M * N, block),)](partial, c, M * N, split_k, BLOCK=block, num_warps=4)
    return c


def test_matmul_splitk():
    torch.manual_seed(0)
    outputs = []
    # (M, N, K, split_k): uneven slices, empty trailing slices (K=300 over 7 slices of 64), and the default.
    for M, N, K, split_k in [(5, 70, 1000, 4), (16, 96, 300, 7), (33, 40, 515, None), (1, 128, 256, 1)]:
        a = torch.randn((M, K), device="cuda", dtype=torch.float16)
        b = torch.randn((K, N), device="cuda", dtype=torch.float16)
        out = matmul_splitk(a, b, split_k=split_k)
        ref = (a.float() @ b.float()).half()
        torch.testing.assert_close(out, ref, atol=6e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def flops_matmul_splitk(a, b, split_k=None):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def bench_matmul_splitk():
    # Decode-time MLP down-projection of a 70B-class model: 16 tokens, K = 28672, N = 8192 (B is 470 MB).
    a = torch.randn((16, 28672), device="cuda", dtype=torch.float16)
    b = torch.randn((28672, 8192), device="cuda", dtype=torch.float16)
    matmul_splitk(a, b)
