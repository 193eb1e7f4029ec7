# geak-family: loss
"""Cross-entropy forward for LM heads: per-row ``loss = logsumexp(logits[r, :]) - logits[r, target[r]]``.

``logits[N, V]`` (unit column stride; fp16/bf16/fp32) may have a vocabulary far too large for registers, so one
program per row streams it in BLOCK_V-wide blocks with an *online* log-sum-exp: a scalar running max (one block
max per iteration) and a per-lane running sum, rescaled by the scalar ``exp(old_max - new_max)`` when the max
grows; the lanes are summed once after the loop. That costs one ``exp`` per logit, which matters because the
special-function unit, not HBM, becomes the limit at two exps per element. The target logit is a single scalar
load. Rows whose target equals ``ignore_index`` get loss 0 and are excluded from the mean,
as in ``torch.nn.functional.cross_entropy``. The kernel also writes the per-row log-sum-exp (fp32), which is all
a backward pass needs besides the logits. The logits are read exactly once; losses are fp32.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr, target_ptr, loss_ptr, lse_ptr, n_cols, stride_logits_row, ignore_index, BLOCK_V: tl.constexpr
):
    row = tl.program_id(0)
    logits_row = logits_ptr + row.to(tl.int64) * stride_logits_row
    offsets = tl.arange(0, BLOCK_V)
    row_max = -float("inf")
    lane_sum = tl.zeros([BLOCK_V], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_V):
        cols = start + offsets
        x = tl.load(logits_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)  # all -inf so far: avoid inf - inf
        lane_sum = lane_sum * tl.exp(row_max - safe_max) + tl.exp(x - safe_max)
        row_max = new_max
    lse = row_max + tl.log(tl.sum(lane_sum, axis=0))

    target = tl.load(target_ptr + row)
    is_ignored = target == ignore_index
    target_logit = tl.load(logits_row + target, mask=~is_ignored, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(is_ignored, 0.0, lse - target_logit))
    tl.store(lse_ptr + row, lse)


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: str = "mean",
    check_targets: bool = True,
) -> torch.Tensor:
    """Cross-entropy of ``logits[N, V]`` against int64 class ids ``target[N]``; reduction ``mean``/``sum``/``none``.

    Losses are fp32. With ``mean`` the sum is divided by the number of non-ignored rows (NaN if there are none).
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if logits.dim() != 2 or logits.stride(1) != 1:
        raise ValueError(f"cross_entropy: logits must be 2-D [N, V] with unit column stride, got {tuple(logits.shape)}")
    if logits.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"cross_entropy: expected float16/bfloat16/float32 logits, got {logits.dtype}")
    if target.shape != (logits.shape[0],) or target.dtype != torch.int64 or not target.is_contiguous():
        raise ValueError(f"cross_entropy: target must be a contiguous int64 tensor of shape ({logits.shape[0]},)")
    if target.device != logits.device:
        raise ValueError("cross_entropy: logits and target must be on the same device")
    n_rows, n_cols = logits.shape
    if n_cols == 0:
        raise ValueError("cross_entropy: logits need at least one class")
    if check_targets:
        bad = (target != ignore_index) & ((target < 0) | (target >= n_cols))
        if bool(bad.any()):
            raise IndexError(f"cross_entropy: target out of range [0, {n_cols}) and not ignore_index={ignore_index}")
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    lse = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    if n_rows > 0:
        block_v = min(triton.next_power_of_2(n_cols), 4096)
        cross_entropy_fwd_kernel[(n_rows,)](
            logits, target, loss, lse, n_cols, logits.stride(0), ignore_index, BLOCK_V=block_v, num_warps=4
        )
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (target != ignore_index).sum()
##################################################################################################################################################
import torch
import torch.nn.functional as F


def test_cross_entropy():
    torch.manual_seed(0)
    results = {}

    logits = torch.randn(13, 10_000, device="cuda", dtype=torch.float32) * 4.0
    target = torch.randint(0, 10_000, (13,), device="cuda", dtype=torch.int64)
    target[3] = -100
    logits[5, :5000] = -float("inf")
    target[5] = 9000
    loss = cross_entropy(logits, target, reduction="none")
    torch.testing.assert_close(loss, F.cross_entropy(logits, target, reduction="none"), atol=1e-5, rtol=1e-5)
    results["test_case_1"] = loss

    mean_loss = cross_entropy(logits, target)
    torch.testing.assert_close(mean_loss, F.cross_entropy(logits, target), atol=1e-5, rtol=1e-5)
    results["test_case_2"] = mean_loss

    logits16 = torch.randn(50, 3001, device="cuda", dtype=torch.float16) * 3.0
    target16 = torch.randint(0, 3001, (50,), device="cuda", dtype=torch.int64)
    target16[::7] = 0
    target16[1] = 3000
    target16[2] = 5
    loss16 = cross_entropy(logits16, target16, ignore_index=5, reduction="none")
    ref16 = F.cross_entropy(logits16.float(), target16, ignore_index=5, reduction="none")
    torch.testing.assert_close(loss16, ref16, atol=1e-4, rtol=1e-5)
    results["test_case_3"] = loss16

    sum_loss = cross_entropy(logits16, target16, ignore_index=5, reduction="sum")
    torch.testing.assert_close(sum_loss, ref16.sum(), atol=1e-3, rtol=1e-5)
    results["test_case_4"] = sum_loss
    return results


def bench_cross_entropy():
    logits = torch.randn(4096, 128256, device="cuda", dtype=torch.bfloat16)
    target = torch.randint(0, 128256, (4096,), device="cuda", dtype=torch.int64)
    cross_entropy(logits, target, reduction="none", check_targets=False)


result_gold = test_cross_entropy()
