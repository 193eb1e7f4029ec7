# geak-family: loss
"""Mean squared error ``mean((prediction - target)^2)`` (or the sum) over all elements, with a two-stage reduction.

Stage 1 launches a fixed grid of P programs (about 4 per SM, capped at 1024) that grid-stride over the flattened
tensors in BLOCK-element tiles, accumulating squared differences in a BLOCK-lane fp32 register vector (element-wise
FMAs in the loop, one tree reduction at the end) and writing one fp32 partial per program. Stage 2 is a single
program that sums the P partials in a fixed order and applies the mean. No atomics, so the result is deterministic
run to run, and fp32 accumulation over ~BLOCK * P independent chains keeps rounding error far below a naive
running sum. Both inputs are read once; the output is a 0-d tensor in the input dtype, like ``F.mse_loss``.
"""
import torch
import triton
import triton.language as tl

MAX_PARTIALS = 1024


@triton.jit
def _squared_error_partial_kernel(a_ptr, b_ptr, partial_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(pid, tl.cdiv(n_elements, BLOCK), tl.num_programs(0)):
        mask = offsets < n_elements
        a = tl.load(a_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        diff = a - b
        acc += diff * diff
        offsets += step
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _finalize_kernel(partial_ptr, out_ptr, n_partials, divisor, BLOCK_P: tl.constexpr):
    idx = tl.arange(0, BLOCK_P)
    partial = tl.load(partial_ptr + idx, mask=idx < n_partials, other=0.0)
    tl.store(out_ptr, (tl.sum(partial, axis=0) / divisor).to(out_ptr.dtype.element_ty))


def _num_partials(device: torch.device, n_tiles: int) -> int:
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(n_tiles, 4 * sms, MAX_PARTIALS))


def mse_loss(prediction: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """``F.mse_loss(prediction, target, reduction)`` for ``mean``/``sum``; contiguous same-shape float tensors."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"mse_loss: reduction must be 'mean' or 'sum', got {reduction!r}")
    if prediction.shape != target.shape:
        raise ValueError(f"mse_loss: shape mismatch {tuple(prediction.shape)} vs {tuple(target.shape)}")
    if prediction.dtype != target.dtype or prediction.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"mse_loss: inputs must share a float16/bfloat16/float32 dtype, got {prediction.dtype}, {target.dtype}")
    if prediction.device != target.device:
        raise ValueError("mse_loss: prediction and target must be on the same device")
    if not (prediction.is_contiguous() and target.is_contiguous()):
        raise ValueError("mse_loss: inputs must be contiguous")
    n_elements = prediction.numel()
    out = torch.empty((), device=prediction.device, dtype=prediction.dtype)
    block = 4096
    n_partials = _num_partials(prediction.device, triton.cdiv(max(n_elements, 1), block))
    partial = torch.empty(n_partials, device=prediction.device, dtype=torch.float32)
    _squared_error_partial_kernel[(n_partials,)](prediction, target, partial, n_elements, BLOCK=block, num_warps=8)
    divisor = float(n_elements) if reduction == "mean" else 1.0
    _finalize_kernel[(1,)](
        partial, out, n_partials, divisor, BLOCK_P=triton.next_power_of_2(n_partials), num_warps=4
    )
    return out


def test_mse_loss():
    torch.manual_seed(0)
    results = {}
    a = torch.randn(50_003, device="cuda", dtype=torch.float32)
    b = torch.randn(50_003, device="cuda", dtype=torch.float32)
    loss = mse_loss(a, b)
    torch.testing.assert_close(loss, torch.nn.functional.mse_loss(a, b), atol=1e-6, rtol=1e-5)
    results["mean_fp32"] = loss

    loss_sum = mse_loss(a, b, reduction="sum")
    torch.testing.assert_close(loss_sum, torch.nn.functional.mse_loss(a.double(), b.double(), reduction="sum").float(), atol=1e-3, rtol=1e-5)
    results["sum_fp32"] = loss_sum

    a16 = torch.randn(37, 301, device="cuda", dtype=torch.float16)
    b16 = torch.randn(37, 301, device="cuda", dtype=torch.float16)
    loss16 = mse_loss(a16, b16)
    torch.testing.assert_close(loss16, torch.nn.functional.mse_loss(a16.float(), b16.float()).to(torch.float16), atol=1e-3, rtol=1e-3)
    results["mean_fp16"] = loss16
    return results


def bench_mse_loss():
    a = torch.randn(2**26, device="cuda", dtype=torch.float32)
    b = torch.randn(2**26, device="cuda", dtype=torch.float32)
    mse_loss(a, b)
