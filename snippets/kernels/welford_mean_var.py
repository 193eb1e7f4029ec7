# geak-family: reduction
"""Row-wise mean and variance of ``x[M, N]`` with Welford's algorithm, like ``torch.var_mean(x, dim=-1)``.

One program per row streams the row in BLOCK_N-wide blocks. Every lane runs its own Welford recurrence over the
elements it sees (``count += 1; mean += (x - mean) / count; m2 += (x - mean_old) * (x - mean_new)``), which is
numerically stable even when the mean is large compared to the spread, where ``E[x^2] - E[x]^2`` loses every
digit. After the loop the BLOCK_N per-lane states are merged with the exact parallel (Chan) formula written as
plain sums: ``mean = sum(n_i * mean_i) / N`` and ``M2 = sum(m2_i) + sum(n_i * (mean_i - mean)^2)``, so the merge
uses built-in ``tl.sum`` reductions only. Statistics are fp32; the input is read once and the loop body has no
cross-lane communication, so the kernel runs at streaming bandwidth.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _welford_mean_var_kernel(
    x_ptr, mean_ptr, var_ptr, n_cols, stride_x_row, var_divisor, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_x_row
    offsets = tl.arange(0, BLOCK_N)
    count = tl.zeros([BLOCK_N], dtype=tl.float32)
    mean = tl.zeros([BLOCK_N], dtype=tl.float32)
    m2 = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        count += mask.to(tl.float32)
        delta = x - mean
        mean += tl.where(mask, delta / tl.maximum(count, 1.0), 0.0)
        m2 += tl.where(mask, delta * (x - mean), 0.0)
    row_mean = tl.sum(count * mean, axis=0) / n_cols
    spread = mean - row_mean
    row_m2 = tl.sum(m2, axis=0) + tl.sum(count * spread * spread, axis=0)
    tl.store(mean_ptr + row, row_mean.to(mean_ptr.dtype.element_ty))
    tl.store(var_ptr + row, (row_m2 / var_divisor).to(var_ptr.dtype.element_ty))


def welford_mean_var(x: torch.Tensor, correction: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(mean, var)`` over the last dim of a 2-D ``x`` (unit column stride), in ``x``'s dtype.

    ``correction`` is Bessel's correction as in ``torch.var_mean``: the divisor is ``max(N - correction, 0)``.
    """
    if x.dim() != 2:
        raise ValueError(f"welford_mean_var: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"welford_mean_var: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if x.stride(1) != 1:
        raise ValueError("welford_mean_var: the last dimension must be contiguous (stride 1)")
    if correction < 0:
        raise ValueError(f"welford_mean_var: correction must be >= 0, got {correction}")
    n_rows, n_cols = x.shape
    if n_cols == 0:
        raise ValueError("welford_mean_var: cannot reduce rows of length 0")
    mean = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    var = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    if n_rows == 0:
        return mean, var
    block_n = min(triton.next_power_of_2(n_cols), 2048)
    var_divisor = float(max(n_cols - correction, 0))
    _welford_mean_var_kernel[(n_rows,)](
        x, mean, var, n_cols, x.stride(0), var_divisor, BLOCK_N=block_n, num_warps=8 if block_n >= 2048 else 4
    )
    return mean, var


def test_welford_mean_var():
    torch.manual_seed(0)
    results = {}
    # A large offset makes the naive E[x^2] - E[x]^2 formula useless in fp32; Welford stays accurate.
    x = torch.randn(21, 7000, device="cuda", dtype=torch.float32) * 0.5 + 3000.0
    mean, var = welford_mean_var(x)
    var_ref, mean_ref = torch.var_mean(x.double(), dim=-1, correction=1)
    torch.testing.assert_close(mean, mean_ref.float(), atol=1e-3, rtol=1e-6)
    torch.testing.assert_close(var, var_ref.float(), atol=1e-4, rtol=1e-3)
    results.update(mean_offset=mean, var_offset=var)

    y = torch.randn(64, 300, device="cuda", dtype=torch.float32) * 3.0
    mean_y, var_y = welford_mean_var(y, correction=0)
    var_y_ref, mean_y_ref = torch.var_mean(y, dim=-1, correction=0)
    torch.testing.assert_close(mean_y, mean_y_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(var_y, var_y_ref, atol=1e-5, rtol=1e-5)
    results.update(mean_population=mean_y, var_population=var_y)

    z = torch.randn(9, 2500, device="cuda", dtype=torch.float16)[:, 1:2401]
    mean_z, var_z = welford_mean_var(z)
    var_z_ref, mean_z_ref = torch.var_mean(z.float(), dim=-1)
    torch.testing.assert_close(mean_z, mean_z_ref.to(torch.float16), atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(var_z, var_z_ref.to(torch.float16), atol=1e-3, rtol=1e-3)
    results.update(mean_fp16=mean_z, var_fp16=var_z)
    return results


def bench_welford_mean_var():
    x = torch.randn(8192, 16384, device="cuda", dtype=torch.float32)
    welford_mean_var(x)
