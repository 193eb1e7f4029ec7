# geak-family: quantization
# geak-gpu-only: fp8 rounding is not modelled exactly by the interpreter
"""Scaled cast to fp8 e4m3, per tensor or per row: q = saturate(x / scale) in fp8, so that x ~= q * scale.

The fp8 flavour is picked per device: AMD CDNA3 (gfx94x) implements the "fnuz" variant
(`torch.float8_e4m3fnuz`, max 240), everything else (NVIDIA sm89+, AMD gfx950) the OCP one
(`torch.float8_e4m3fn`, max 448); the kernels take the limit as a constexpr and cast to whatever the output
pointer holds. Per-row mode (x [..., N], scale per row over the last dim) uses one program per row with
two BLOCK_N sweeps: a running |x| max in registers, then scale, clamp to +-FP8_MAX and cast; the second sweep
hits L2, so DRAM sees one read of x and one write of q. Per-tensor mode either takes a precomputed (static)
scale or computes the dynamic absmax first: each program of `absmax_kernel` reduces CHUNKS blocks and
publishes its maximum with one `tl.atomic_max` (order-independent, hence deterministic; few atomics per MB),
then `scaled_cast_kernel` streams x again. Clamping before the cast makes the result independent of the
hardware's saturation mode, and all-zero inputs give scale 0 and q = 0.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def absmax_kernel(x_ptr, amax_ptr, numel, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * (BLOCK * CHUNKS)
    offs = tl.arange(0, BLOCK)
    running_max = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)  # max(|x|) is exact in x's dtype
    for chunk in tl.static_range(CHUNKS):
        idx = start + chunk * BLOCK + offs
        x = tl.load(x_ptr + idx, mask=idx < numel, other=0.0)
        running_max = tl.maximum(running_max, tl.abs(x))
    tl.atomic_max(amax_ptr, tl.max(running_max, axis=0).to(tl.float32))


@triton.jit
def scaled_cast_kernel(x_ptr, q_ptr, scale_ptr, numel, FP8_MAX: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < numel
    scale = tl.load(scale_ptr)
    inv_scale = 1.0 / tl.where(scale > 0, scale, 1.0)
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    v = tl.minimum(tl.maximum(x * inv_scale, -FP8_MAX), FP8_MAX)
    tl.store(q_ptr + idx, v.to(q_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rowwise_fp8_kernel(
    x_ptr, q_ptr, scale_ptr,
    n_cols, stride_xm, stride_qm,
    FP8_MAX: tl.constexpr, BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    q_row = q_ptr + row * stride_qm
    cols = tl.arange(0, BLOCK_N)

    running_max = tl.zeros((BLOCK_N,), dtype=x_ptr.dtype.element_ty)  # max(|x|) is exact in x's dtype
    for start in range(0, n_cols, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0)
        running_max = tl.maximum(running_max, tl.abs(x))
    absmax = tl.max(running_max, axis=0).to(tl.float32)
    inv_scale = FP8_MAX / tl.where(absmax > 0, absmax, 1.0)

    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        v = tl.minimum(tl.maximum(x * inv_scale, -FP8_MAX), FP8_MAX)
        tl.store(q_row + start + cols, v.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(scale_ptr + row, absmax / FP8_MAX)


def fp8_e4m3_dtype(device: torch.device) -> torch.dtype:
    """The e4m3 dtype the device computes in: fnuz on AMD CDNA3 (gfx94x), the OCP e4m3fn elsewhere."""
    if device.type == "cuda" and torch.version.hip is not None:
        if torch.cuda.get_device_properties(device).gcnArchName.startswith("gfx94"):
            return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


def fp8_quantize(
    x: torch.Tensor, per_row: bool = False, scale: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x (fp16/bf16/fp32) to fp8 e4m3 with a per-tensor or per-row scale; returns (q, scale).

    per_row=False: scale has shape (1,); pass `scale` for static quantization, else the absmax is computed.
    per_row=True: scale has shape x.shape[:-1], one entry per row of the last dimension.
    """
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"fp8_quantize expects a float16, bfloat16 or float32 tensor, got {x.dtype}")
    if per_row and scale is not None:
        raise ValueError("a precomputed scale is only supported for per-tensor quantization")
    if per_row and x.ndim < 1:
        raise ValueError("per-row quantization needs at least one dimension")
    fp8_dtype = fp8_e4m3_dtype(x.device)
    fp8_max = torch.finfo(fp8_dtype).max
    q = torch.empty(x.shape, device=x.device, dtype=fp8_dtype)

    if per_row:
        n_cols = x.shape[-1]
        x2d = x.reshape(-1, n_cols)
        if n_cols > 0 and x2d.stride(1) != 1:
            x2d = x2d.contiguous()
        q2d = q.view(-1, n_cols)
        row_scales = torch.empty((x2d.shape[0],), device=x.device, dtype=torch.float32)
        if x2d.shape[0] > 0:
            block_n = min(triton.next_power_of_2(max(n_cols, 1)), 4096)
            rowwise_fp8_kernel[(x2d.shape[0],)](
                x2d, q2d, row_scales, n_cols, x2d.stride(0), q2d.stride(0),
                FP8_MAX=fp8_max, BLOCK_N=block_n, num_warps=8 if block_n >= 2048 else 4,
            )
        return q, row_scales.reshape(x.shape[:-1])

    x_flat = x.contiguous().view(-1)
    numel = x_flat.numel()
    if scale is None:
        amax = torch.zeros((1,), device=x.device, dtype=torch.float32)
        if numel > 0:
            block, chunks = 4096, 16
            absmax_kernel[(triton.cdiv(numel, block * chunks),)](
                x_flat, amax, numel, BLOCK=block, CHUNKS=chunks, num_warps=8
            )
        scale = amax / fp8_max
    else:
        if scale.numel() != 1 or scale.device != x.device:
            raise ValueError(
                f"scale must be a one-element tensor on {x.device}, got {tuple(scale.shape)} on {scale.device}"
            )
        scale = scale.reshape(1).to(torch.float32)
    if numel > 0:
        block = 4096
        scaled_cast_kernel[(triton.cdiv(numel, block),)](
            x_flat, q.view(-1), scale, numel, FP8_MAX=fp8_max, BLOCK=block, num_warps=8
        )
    return q, scale


def _reference_fp8(x, scale, fp8_dtype):
    fp8_max = torch.finfo(fp8_dtype).max
    inv = torch.where(scale > 0, 1.0 / scale, torch.ones_like(scale))
    return (x.float() * inv).clamp(-fp8_max, fp8_max).to(fp8_dtype)


def _assert_fp8_close(q, ref):
    # Reciprocal/division rounding may move a value sitting on a rounding boundary by one fp8 step (<= 12.5%).
    torch.testing.assert_close(q.float(), ref.float(), atol=2.0**-9, rtol=0.125)
    assert (q.float() == ref.float()).float().mean().item() > 0.99


def test_fp8_quantize_per_tensor():
    torch.manual_seed(0)
    x = torch.randn((37, 301), device="cuda", dtype=torch.float16) * 5
    q, scale = fp8_quantize(x)
    fp8_dtype = fp8_e4m3_dtype(x.device)
    expected_scale = x.float().abs().max() / torch.finfo(fp8_dtype).max
    torch.testing.assert_close(scale, expected_scale.reshape(1), atol=0, rtol=1e-6)
    _assert_fp8_close(q, _reference_fp8(x, scale, fp8_dtype))
    return q, scale


def test_fp8_quantize_static_scale():
    torch.manual_seed(0)
    x = torch.randn((1000,), device="cuda", dtype=torch.float32) * 100
    static_scale = torch.tensor([0.05], device="cuda")  # saturates the tail of the distribution
    q, scale = fp8_quantize(x, scale=static_scale)
    _assert_fp8_close(q, _reference_fp8(x, scale, fp8_e4m3_dtype(x.device)))
    return q


def test_fp8_quantize_per_row():
    torch.manual_seed(0)
    x = torch.randn((3, 5, 4500), device="cuda", dtype=torch.float32) * torch.rand((3, 5, 1), device="cuda")
    x[1, 2] = 0
    q, scales = fp8_quantize(x, per_row=True)
    fp8_dtype = fp8_e4m3_dtype(x.device)
    expected = x.abs().amax(dim=-1) / torch.finfo(fp8_dtype).max
    torch.testing.assert_close(scales, expected, atol=0, rtol=1e-6)
    _assert_fp8_close(q, _reference_fp8(x, scales.unsqueeze(-1), fp8_dtype))
    return q, scales


def bench_fp8_quantize():
    # Per-row dynamic quantization of 256 MB of fp16 activations (128 MB of fp8 out).
    x = torch.randn((16384, 8192), device="cuda", dtype=torch.float16)
    fp8_quantize(x, per_row=True)


def bench_fp8_quantize_per_tensor():
    # Static (calibrated) per-tensor scale, the usual inference path: one cast pass over 256 MB of fp16.
    x = torch.randn((16384, 8192), device="cuda", dtype=torch.float16)
    fp8_quantize(x, scale=torch.tensor([0.01], device="cuda"))
