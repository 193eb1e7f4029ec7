# geak-family: matmul
"""fp32 GEMM C[M, N] = A[M, K] @ B[K, N] with a caller-chosen `tl.dot` input precision.

`allow_tf32=False` (the default) runs `tl.dot(..., input_precision="ieee")`: true fp32 products on the FMA
units, bit-for-bit comparable with a float32 reference (relative error ~1e-6) but limited to the chip's
plain fp32 rate. `allow_tf32=True` rounds the operands to TF32 (10-bit mantissa) and runs on the tensor
cores (NVIDIA sm80+) or XF32 MFMA (AMD gfx942), several times faster, with ~1e-3 relative error — the same
trade PyTorch exposes as `torch.backends.cuda.matmul.allow_tf32`. Exactness is the default because callers
who pass fp32 usually want fp32 answers. On AMD chips without XF32 the TF32 request falls back to "ieee".
Hopper's TF32 MMA reads both operands K-major, so TF32 runs about twice as fast when B is a transposed view
of an [N, K] tensor (`w.t()`) than when B is a row-major [K, N] tensor (measured on H200 at 8192^3: ~265 vs
~143 TFLOP/s); 16-bit GEMMs do not care.
The CPU interpreter ignores the precision flag and always computes in full fp32. The tiling is the usual
one: a BLOCK_M x BLOCK_N fp32 accumulator per program, K walked in BLOCK_K steps (smaller than for fp16,
since each element takes twice the shared memory), GROUP_M super-grouping for L2 reuse, and wrapped
`% M` / `% N` indices so only the K tail is masked on load.
"""

import torch
import triton
import triton.language as tl


def _matmul_configs() -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    shapes = [
        (64, 64, 32, 4, 2),
        (128, 128, 32, 8, 3),
        (128, 256, 32, 8, 3),
        (256, 128, 32, 8, 3),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (128, 128, 16, 4, 4),
    ]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in shapes
    ]


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K", "INPUT_PRECISION"])
@triton.jit
def matmul_fp32_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    INPUT_PRECISION: tl.constexpr,
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
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _tf32_available(device: torch.device) -> bool:
    """True unless the device is an AMD GPU without XF32 MFMA (only gfx942 has it)."""
    if device.type != "cuda" or torch.version.hip is None:
        return True
    return torch.cuda.get_device_properties(device).gcnArchName.startswith("gfx942")


def matmul_fp32(a: torch.Tensor, b: torch.Tensor, allow_tf32: bool = False) -> torch.Tensor:
    """Return a @ b for fp32 a [M, K] and b [K, N]; `allow_tf32` trades ~1e-3 accuracy for tensor-core speed."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul_fp32 expects 2-D inputs, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        raise TypeError(f"matmul_fp32 expects float32 inputs, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"inputs live on different devices: {a.device} and {b.device}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    if M == 0 or N == 0:
        return c
    precision = "tf32" if allow_tf32 and _tf32_available(a.device) else "ieee"

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    matmul_fp32_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        INPUT_PRECISION=precision,
    )
    return c


def test_matmul_fp32_ieee():
    torch.manual_seed(0)
    outputs = []
    for M, N, K in [(128, 128, 128), (97, 75, 113), (1, 64, 33)]:
        a = torch.randn((M, K), device="cuda", dtype=torch.float32)
        b = torch.randn((K, N), device="cuda", dtype=torch.float32)
        out = matmul_fp32(a, b)
        ref = (a.double() @ b.double()).float()
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-5)
        outputs.append(out)
    return tuple(outputs)


def test_matmul_fp32_tf32():
    torch.manual_seed(0)
    a = torch.randn((77, 120), device="cuda", dtype=torch.float32)
    b_t = torch.randn((90, 120), device="cuda", dtype=torch.float32)
    out = matmul_fp32(a, b_t.t(), allow_tf32=True)
    ref = (a.double() @ b_t.double().t()).float()
    # TF32 keeps 10 mantissa bits: ~5e-4 relative error per product, growing like sqrt(K).
    torch.testing.assert_close(out, ref, atol=5e-2, rtol=1e-2)
    return out


def flops_matmul_fp32(a, b, allow_tf32=False):
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


def bench_matmul_fp32():
    a = torch.randn((4096, 4096), device="cuda", dtype=torch.float32)
    b = torch.randn((4096, 4096), device="cuda", dtype=torch.float32)
    matmul_fp32(a, b)


def bench_matmul_fp32_tf32():
    a = torch.randn((8192, 8192), device="cuda", dtype=torch.float32)
    b = torch.randn((8192, 8192), device="cuda", dtype=torch.float32)
    matmul_fp32(a, b, allow_tf32=True)
