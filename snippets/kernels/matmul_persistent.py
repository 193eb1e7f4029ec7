# geak-family: matmul
"""Persistent fp16 GEMM: C[M, N] = A[M, K] @ B[K, N], fp32 accumulation, fp16 result.

Instead of one program per output tile, the grid holds exactly one program per SM / CU (read from
`torch.cuda.get_device_properties(...).multi_processor_count`; on the CPU interpreter, where there is no
device, a fixed count of 4). Program p computes tiles p, p + P, p + 2P, ... of the GROUP_M-swizzled tile
order, so the launch cost is paid once, there is no tail wave of partially filled SMs, and tiles that are in
flight at the same time are neighbours in the swizzled order and share A rows / B columns in L2. Inside a
tile the K loop is the usual pipelined `tl.dot` loop with an fp32 accumulator; rows/columns are wrapped with
`% M` / `% N` so only the K tail needs a load mask, and the store is masked. `num_programs` overrides the
program count (useful for tuning and for testing the multi-tile loop).
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
        (128, 64, 64, 4, 4),
        (256, 256, 64, 8, 2),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def matmul_persistent_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    first_tile = tl.program_id(0)
    num_programs = tl.num_programs(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tiles_m * tiles_n
    tiles_per_group = GROUP_M * tiles_n
    offs_k = tl.arange(0, BLOCK_K)

    for tile in range(first_tile, num_tiles, num_programs):
        first_m = (tile // tiles_per_group) * GROUP_M
        group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % tiles_per_group) % group_rows
        pid_n = (tile % tiles_per_group) // group_rows

        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
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

        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
        c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def _compute_unit_count(device: torch.device) -> int:
    """SMs (NVIDIA) or CUs (AMD) of the device; a fixed 4 for CPU tensors under the interpreter."""
    if device.type == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def matmul_persistent(a: torch.Tensor, b: torch.Tensor, num_programs: int | None = None) -> torch.Tensor:
    """Return a @ b for fp16 a [M, K] and b [K, N], one resident program per SM looping over output tiles."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul_persistent expects 2-D inputs, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != torch.float16 or b.dtype != torch.float16:
        raise TypeError(f"matmul_persistent expects float16 inputs, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"inputs live on different devices: {a.device} and {b.device}")
    if num_programs is not None and num_programs < 1:
        raise ValueError(f"num_programs must be >= 1, got {num_programs}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    if M == 0 or N == 0:
        return c
    programs = num_programs if num_programs is not None else _compute_unit_count(a.device)

    def grid(meta):
        return (min(programs, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)

    matmul_persistent_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )
    return c


def test_matmul_persistent():
    torch.manual_seed(0)
    outputs = []
    # (M, N, K, num_programs): more tiles than programs, uneven tile counts per program, ragged edges.
    for M, N, K, programs in [(128, 128, 128, None), (97, 120, 75, 3), (1, 100, 40, None), (128, 65, 33, 1)]:
        a = torch.randn((M, K), device="cuda", dtype=torch.float16)
        b = torch.randn((K, N), device="cuda", dtype=torch.float16)
        out = matmul_persistent(a, b, num_programs=programs)
        ref = (a.float() @ b.float()).half()
        torch.testing.assert_close(out, ref, atol=3e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def flops_matmul_persistent(a, b, num_programs=None):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def bench_matmul_persistent():
    a = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    b = torch.randn((8192, 8192), device="cuda", dtype=torch.float16)
    matmul_persistent(a, b)
