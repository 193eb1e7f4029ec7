# geak-family: normalization
"""LayerNorm backward over the last dimension: ``dx``, ``dweight`` and ``dbias`` from ``x``, ``dy`` and saved stats.

With ``xhat = (x - mean) * rstd`` and ``g = dy * weight`` (per row of N elements):
``dx = rstd * (g - xhat * mean(g * xhat) - mean(g))``, ``dweight = sum_rows(dy * xhat)``, ``dbias = sum_rows(dy)``.

Stage 1 launches G programs (a few per SM). Program ``p`` walks a contiguous group of rows; for each row it computes
``dx`` in registers (BLOCK_N = next_power_of_2(N)) and adds ``dy * xhat`` and ``dy`` into fp32 accumulators that
live in registers for the whole group, then writes one partial row of ``dweight`` and ``dbias`` to a ``[G, N]``
fp32 buffer. This avoids both atomics and locks, and the result is deterministic. Each program prefetches the
next row into registers while it reduces the current one, so loads stay in flight although an SM runs only a
couple of these large programs. Stage 2 sums the G partial rows in narrow column blocks (many short programs). ``x`` and ``dy`` are read once and ``dx`` written once; the partial buffers add only
``2 * G * N * 4`` bytes each way.
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_COLS = 32768


@triton.jit
def _layer_norm_bwd_dx_kernel(
    x_ptr,
    dy_ptr,
    weight_ptr,
    mean_ptr,
    rstd_ptr,
    dx_ptr,
    partial_dw_ptr,
    partial_db_ptr,
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
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    # Row pointers advance by one stride per iteration; the int64 start keeps huge tensors addressable.
    x_row = x_ptr + row_start.to(tl.int64) * stride_x_row
    dy_row = dy_ptr + row_start.to(tl.int64) * stride_dy_row
    dx_row = dx_ptr + row_start.to(tl.int64) * stride_dx_row
    # Software prefetch: issue the next row's loads before this row's reductions so HBM stays busy.
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
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        g = dy * weight
        c_xhat = tl.sum(g * xhat, axis=0) / n_cols
        c_mean = tl.sum(g, axis=0) / n_cols
        dx = (g - (xhat * c_xhat + c_mean)) * rstd
        tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dx_row += stride_dx_row
        dw_acc += dy * xhat
        db_acc += dy
    tl.store(partial_dw_ptr + pid * n_cols + cols, dw_acc, mask=mask)
    tl.store(partial_db_ptr + pid * n_cols + cols, db_acc, mask=mask)


@triton.jit
def _sum_partials_kernel(
    partial_dw_ptr, partial_db_ptr, dw_ptr, db_ptr, n_groups, n_cols, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    dw = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_groups, BLOCK_G):
        groups = start + tl.arange(0, BLOCK_G)
        offsets = groups[:, None] * n_cols + cols[None, :]
        mask = (groups[:, None] < n_groups) & col_mask[None, :]
        dw += tl.load(partial_dw_ptr + offsets, mask=mask, other=0.0)
        db += tl.load(partial_db_ptr + offsets, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(dw, axis=0).to(dw_ptr.dtype.element_ty), mask=col_mask)
    tl.store(db_ptr + cols, tl.sum(db, axis=0).to(db_ptr.dtype.element_ty), mask=col_mask)


def _num_row_groups(device: torch.device, n_rows: int) -> int:
    """Two row groups per SM on a GPU (enough to fill it, few partial rows); 8 elsewhere (interpreter)."""
    if device.type == "cuda":
        target = 2 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 8
    return max(1, min(n_rows, target))


def _as_rows(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dim() == 2 and t.stride(1) == 1:
        return t
    if not t.is_contiguous():
        raise ValueError(f"layer_norm_bwd: {name} must be contiguous (2-D inputs may have any row stride)")
    return t.view(-1, t.shape[-1])


def layer_norm_bwd(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(dx, dweight, dbias)`` given the forward input ``x``, ``weight`` and its fp32 ``mean``/``rstd``."""
    if x.dim() == 0 or dy.shape != x.shape:
        raise ValueError(f"layer_norm_bwd: dy and x must share a non-scalar shape, got {tuple(dy.shape)}, {tuple(x.shape)}")
    n_cols = x.shape[-1]
    if weight.shape != (n_cols,) or not weight.is_contiguous():
        raise ValueError(f"layer_norm_bwd: weight must be a contiguous ({n_cols},) tensor, got {tuple(weight.shape)}")
    if mean.shape != x.shape[:-1] or rstd.shape != x.shape[:-1]:
        raise ValueError(f"layer_norm_bwd: mean and rstd must have shape {tuple(x.shape[:-1])}")
    if mean.dtype != torch.float32 or rstd.dtype != torch.float32 or not (mean.is_contiguous() and rstd.is_contiguous()):
        raise TypeError("layer_norm_bwd: mean and rstd must be contiguous float32 tensors")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32) or dy.dtype != x.dtype:
        raise TypeError(f"layer_norm_bwd: x and dy must share a float16/bfloat16/float32 dtype, got {x.dtype}, {dy.dtype}")
    if len({t.device for t in (x, dy, weight, mean, rstd)}) != 1:
        raise ValueError("layer_norm_bwd: all inputs must be on the same device")
    if n_cols > MAX_FUSED_COLS:
        raise ValueError(f"layer_norm_bwd: rows of {n_cols} > {MAX_FUSED_COLS} elements do not fit in registers")
    x_rows, dy_rows = _as_rows(x, "x"), _as_rows(dy, "dy")
    n_rows = x_rows.shape[0]
    dx = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if n_rows == 0 or n_cols == 0:
        return dx, torch.zeros_like(weight), torch.zeros_like(weight)
    dx_rows = dx.view(n_rows, n_cols)

    n_groups = _num_row_groups(x.device, n_rows)
    rows_per_program = triton.cdiv(n_rows, n_groups)
    n_groups = triton.cdiv(n_rows, rows_per_program)
    partial_dw = torch.empty((n_groups, n_cols), device=x.device, dtype=torch.float32)
    partial_db = torch.empty((n_groups, n_cols), device=x.device, dtype=torch.float32)
    block_n = triton.next_power_of_2(n_cols)
    _layer_norm_bwd_dx_kernel[(n_groups,)](
        x_rows,
        dy_rows,
        weight,
        mean,
        rstd,
        dx_rows,
        partial_dw,
        partial_db,
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
    dbias = torch.empty_like(weight)
    _sum_partials_kernel[(triton.cdiv(n_cols, 32),)](
        partial_dw, partial_db, dweight, dbias, n_groups, n_cols, BLOCK_G=32, BLOCK_N=32, num_warps=4
    )
    return dx, dweight, dbias


def _reference(dy, x, weight, bias, eps):
    x = x.detach().float().requires_grad_(True)
    w = weight.detach().float().requires_grad_(True)
    b = bias.detach().float().requires_grad_(True)
    torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps).backward(dy.float())
    var, mean = torch.var_mean(x.detach(), dim=-1, correction=0)
    return x.grad, w.grad, b.grad, mean, torch.rsqrt(var + eps)


def test_layer_norm_bwd():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(83, 700, device="cuda", dtype=torch.float32) + 1.0
    dy = torch.randn(83, 700, device="cuda", dtype=torch.float32)
    weight = torch.randn(700, device="cuda", dtype=torch.float32)
    bias = torch.randn(700, device="cuda", dtype=torch.float32)
    dx_ref, dw_ref, db_ref, mean, rstd = _reference(dy, x, weight, bias, 1e-5)
    dx, dw, db = layer_norm_bwd(dy, x, weight, mean, rstd)
    torch.testing.assert_close(dx, dx_ref, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(dw, dw_ref, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(db, db_ref, atol=1e-4, rtol=1e-5)
    results.update(dx_fp32=dx, dw_fp32=dw, db_fp32=db)

    x16 = torch.randn(3, 21, 1024, device="cuda", dtype=torch.float16)
    dy16 = torch.randn(3, 21, 1024, device="cuda", dtype=torch.float16)
    w16 = torch.randn(1024, device="cuda", dtype=torch.float16)
    b16 = torch.randn(1024, device="cuda", dtype=torch.float16)
    dx_ref, dw_ref, db_ref, mean, rstd = _reference(dy16, x16, w16, b16, 1e-5)
    dx16, dw16, db16 = layer_norm_bwd(dy16, x16, w16, mean, rstd)
    torch.testing.assert_close(dx16, dx_ref.to(torch.float16), atol=5e-3, rtol=2e-3)
    torch.testing.assert_close(dw16, dw_ref.to(torch.float16), atol=1e-2, rtol=2e-3)
    torch.testing.assert_close(db16, db_ref.to(torch.float16), atol=1e-2, rtol=2e-3)
    results.update(dx_fp16=dx16, dw_fp16=dw16, db_fp16=db16)
    return results


def bench_layer_norm_bwd():
    n_rows, n_cols = 16384, 8192
    x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.float16)
    dy = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.float16)
    weight = torch.randn(n_cols, device="cuda", dtype=torch.float16)
    mean = torch.zeros(n_rows, device="cuda", dtype=torch.float32)
    rstd = torch.ones(n_rows, device="cuda", dtype=torch.float32)
    layer_norm_bwd(dy, x, weight, mean, rstd)
