# geak-family: normalization
"""RMSNorm backward over the last dimension: ``dx`` and ``dweight`` from ``dy``, ``x``, ``weight`` and the saved ``rstd``.

For one row of N elements with ``g = dy * weight``:
``dx = rstd * g - x * rstd^3 * mean(g * x)`` and ``dweight = sum_rows(dy * x * rstd)``.

Stage 1 runs G programs (two per SM); each walks a contiguous group of rows, computes ``dx`` for a row from
registers (BLOCK_N = next_power_of_2(N)), and accumulates its rows' ``dy * x * rstd`` in an fp32 register vector.
The next row is prefetched into registers while the current one is reduced, which keeps loads in flight even
though each SM runs only a couple of these large programs.
At the end it writes that partial ``dweight`` row into a ``[G, N]`` fp32 buffer: no atomics, deterministic
results. Stage 2 reduces the G partial rows in narrow column blocks (many programs, short columns). ``x`` and ``dy`` are read once and ``dx`` written once;
the partial buffer costs ``G * N * 4`` bytes each way, small next to the activations.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def _rms_norm_bwd_dx_kernel(
    x_ptr,
    dy_ptr,
    weight_ptr,
    rstd_ptr,
    dx_ptr,
    partial_dw_ptr,
    n_rows,
    n_cols,
    rows_per_program,
    stride_x_row,
    stride_dy_row,
    stride_dx_row,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    weight = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    # Row pointers advance by one stride per iteration; the int64 start keeps huge tensors addressable.
    x_row = x_ptr + row_start.to(tl.int64) * stride_x_row
    dy_row = dy_ptr + row_start.to(tl.int64) * stride_dy_row
    dx_row = dx_ptr + row_start.to(tl.int64) * stride_dx_row
    # Software prefetch: the next row's loads are issued before this row's reductions, so HBM stays busy while
    # the program is synchronising on tl.sum (a plain loop only gets ~75% of bandwidth here).
    x_next = tl.load(x_row + cols, mask=mask, other=0.0)  # every program owns at least one row
    dy_next = tl.load(dy_row + cols, mask=mask, other=0.0)
    for row in range(row_start, row_end):
        x = x_next.to(tl.float32)
        dy = dy_next.to(tl.float32)
        x_row += stride_x_row
        dy_row += stride_dy_row
        next_cols = tl.where(row + 1 < row_end, n_cols, 0)  # past the group's last row: load nothing
        x_next = tl.load(x_row + cols, mask=cols < next_cols, other=0.0)
        dy_next = tl.load(dy_row + cols, mask=cols < next_cols, other=0.0)
        rstd = tl.load(rstd_ptr + row)
        g = dy * weight
        c = tl.sum(g * x, axis=0) / n_cols
        dx = rstd * g - (rstd * rstd * rstd * c) * x
        tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dx_row += stride_dx_row
        dw_acc += dy * (x * rstd)
    tl.store(partial_dw_ptr + pid * n_cols + cols, dw_acc, mask=mask)


@triton.jit
def _sum_rows_kernel(partial_ptr, out_ptr, n_groups, n_cols, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_groups, BLOCK_G):
        groups = start + tl.arange(0, BLOCK_G)
        mask = (groups[:, None] < n_groups) & col_mask[None, :]
        acc += tl.load(partial_ptr + groups[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=col_mask)


def _num_row_groups(device: torch.device, n_rows: int) -> int:
    """Two row groups per SM on a GPU; 8 elsewhere (the interpreter)."""
    if device.type == "cuda":
        target = 2 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 8
    return max(1, min(n_rows, target))


def _as_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dim() == 2 and t.stride(1) == 1:
        return t
    if not t.is_contiguous():
        raise ValueError(f"rms_norm_bwd: {name} must be contiguous (2-D inputs may have any row stride)")
    return t.view(-1, t.shape[-1])


def rms_norm_bwd(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(dx, dweight)`` given the forward input ``x``, ``weight`` and the fp32 per-row ``rstd``."""
    if x.dim() == 0 or dy.shape != x.shape:
        raise ValueError(f"rms_norm_bwd: dy and x must share a non-scalar shape, got {tuple(dy.shape)}, {tuple(x.shape)}")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,) or not weight.is_contiguous():
        raise ValueError(f"rms_norm_bwd: weight must be a contiguous ({n_cols},) tensor, got {tuple(weight.shape)}")
    if rstd.shape != x.shape[:-1] or rstd.dtype != torch.float32 or not rstd.is_contiguous():
        raise ValueError(f"rms_norm_bwd: rstd must be a contiguous float32 tensor of shape {tuple(x.shape[:-1])}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32) or dy.dtype != x.dtype:
        raise TypeError(f"rms_norm_bwd: x and dy must share a float16/bfloat16/float32 dtype, got {x.dtype}, {dy.dtype}")
    if len({t.device for t in (x, dy, weight, rstd)}) != 1:
        raise ValueError("rms_norm_bwd: all inputs must be on the same device")
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"rms_norm_bwd: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit in registers")
    x_rows, dy_rows = _as_rows(x, "x"), _as_rows(dy, "dy")
    n_rows = x_rows.shape[0]
    dx = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if n_rows == 0 or n_cols == 0:
        return dx, torch.zeros_like(weight)
    dx_rows = dx.view(n_rows, n_cols)

    rows_per_program = triton.cdiv(n_rows, _num_row_groups(x.device, n_rows))
    n_groups = triton.cdiv(n_rows, rows_per_program)
    partial_dw = torch.empty((n_groups, n_cols), device=x.device, dtype=torch.float32)
    block_n = triton.next_power_of_2(n_cols)
    _rms_norm_bwd_dx_kernel[(n_groups,)](
        x_rows,
        dy_rows,
        weight,
        rstd,
        dx_rows,
        partial_dw,
        n_rows,
        n_cols,
        rows_per_program,
        x_rows.stride(0),
        dy_rows.stride(0),
        dx_rows.stride(0),
        BLOCK_N=block_n,
        num_warps=min(max(block_n // 512, 4), 16),
    )
    dweight = torch.empty_like(weight)
    _sum_rows_kernel[(triton.cdiv(n_cols, 32),)](partial_dw, dweight, n_groups, n_cols, BLOCK_G=32, BLOCK_N=32, num_warps=4)
    return dx, dweight


def _reference(dy, x, weight, eps):
    x32 = x.detach().float().requires_grad_(True)
    w32 = weight.detach().float().requires_grad_(True)
    rstd = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    (x32 * rstd * w32).backward(dy.float())
    return x32.grad, w32.grad, rstd.detach().squeeze(-1)


def test_rms_norm_bwd():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(91, 900, device="cuda", dtype=torch.float32)
    dy = torch.randn(91, 900, device="cuda", dtype=torch.float32)
    weight = torch.randn(900, device="cuda", dtype=torch.float32)
    dx_ref, dw_ref, rstd = _reference(dy, x, weight, 1e-6)
    dx, dw = rms_norm_bwd(dy, x, weight, rstd)
    torch.testing.assert_close(dx, dx_ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(dw, dw_ref, atol=1e-4, rtol=1e-5)
    results.update(dx_fp32=dx, dw_fp32=dw)

    x16 = torch.randn(2, 30, 2048, device="cuda", dtype=torch.float16)
    dy16 = torch.randn(2, 30, 2048, device="cuda", dtype=torch.float16)
    w16 = torch.randn(2048, device="cuda", dtype=torch.float16)
    dx_ref, dw_ref, rstd16 = _reference(dy16, x16, w16, 1e-5)
    dx16, dw16 = rms_norm_bwd(dy16, x16, w16, rstd16)
    torch.testing.assert_close(dx16, dx_ref.to(torch.float16), atol=5e-3, rtol=2e-3)
    torch.testing.assert_close(dw16, dw_ref.to(torch.float16), atol=1e-2, rtol=2e-3)
    results.update(dx_fp16=dx16, dw_fp16=dw16)
    return results


def bench_rms_norm_bwd():
    n_rows, n_cols = 16384, 8192
    x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.float16)
    dy = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.float16)
    weight = torch.randn(n_cols, device="cuda", dtype=torch.float16)
    rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1) + 1e-6)
    rms_norm_bwd(dy, x, weight, rstd)
