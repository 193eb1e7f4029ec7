# geak-family: atomic
"""Row scatter-add ``out[index[i], :] += src[i, :]`` in place, like ``out.index_add_(0, index, src)`` (fp32).

Grid is (source rows, column blocks). Each program loads one index and a BLOCK_D-wide slice of its source row
with a contiguous vector load, then adds it into the destination row with ``tl.atomic_add``. Atomics make
duplicate indices (several source rows hitting the same destination row, e.g. MoE token combine, graph message
aggregation, embedding gradients) correct without sorting; ``sem="relaxed"`` is used because the additions need
no ordering with other memory operations, which lets the hardware issue fire-and-forget reductions in L2. The
summation order of duplicates is not deterministic, so results match PyTorch to fp32 rounding, not bitwise.
Traffic: ``src`` read once, each touched ``out`` element read-modify-written in L2 per contribution. The wrapper
checks index range on the device by default (a small reduction and a sync).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _scatter_add_rows_kernel(
    src_ptr, index_ptr, out_ptr, n_cols, stride_src_row, stride_out_row, BLOCK_D: tl.constexpr
):
    i = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < n_cols
    dst_row = tl.load(index_ptr + i).to(tl.int64)
    values = tl.load(src_ptr + i.to(tl.int64) * stride_src_row + cols, mask=mask)
    tl.atomic_add(out_ptr + dst_row * stride_out_row + cols, values, mask=mask, sem="relaxed")


def scatter_add_rows_(
    out: torch.Tensor, index: torch.Tensor, src: torch.Tensor, check_bounds: bool = True
) -> torch.Tensor:
    """Add ``src[i]`` into ``out[index[i]]`` for every i, in place; returns ``out``. fp32 ``out``/``src``, 2-D."""
    if out.dim() != 2 or src.dim() != 2 or src.shape[1] != out.shape[1]:
        raise ValueError(f"scatter_add_rows_: expected out[R, D] and src[S, D], got {tuple(out.shape)}, {tuple(src.shape)}")
    if out.dtype != torch.float32 or src.dtype != torch.float32:
        raise TypeError(
            f"scatter_add_rows_: out and src must be float32 (got {out.dtype}, {src.dtype}); "
            "accumulate half-precision data into an fp32 buffer and cast afterwards"
        )
    if index.dim() != 1 or index.numel() != src.shape[0] or index.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"scatter_add_rows_: index must be a 1-D int32/int64 tensor of length {src.shape[0]}")
    if out.stride(1) != 1 or src.stride(1) != 1 or not index.is_contiguous():
        raise ValueError("scatter_add_rows_: out and src need a contiguous last dim and index must be contiguous")
    if len({out.device, src.device, index.device}) != 1:
        raise ValueError("scatter_add_rows_: out, index and src must be on the same device")
    n_src_rows, n_cols = src.shape
    if n_src_rows == 0 or n_cols == 0:
        return out
    if check_bounds and bool(((index < 0) | (index >= out.shape[0])).any()):
        raise IndexError(f"scatter_add_rows_: index out of range for {out.shape[0]} destination rows")
    block_d = min(triton.next_power_of_2(n_cols), 512)
    grid = (n_src_rows, triton.cdiv(n_cols, block_d))
    _scatter_add_rows_kernel[grid](
        src, index, out, n_cols, src.stride(0), out.stride(0), BLOCK_D=block_d, num_warps=4
    )
    return out


def test_scatter_add():
    torch.manual_seed(0)
    results = {}
    base = torch.randn(40, 1100, device="cuda", dtype=torch.float32)
    src = torch.randn(150, 1100, device="cuda", dtype=torch.float32)
    index = torch.randint(0, 40, (150,), device="cuda", dtype=torch.int64)
    index[:10] = 7
    out = scatter_add_rows_(base.clone(), index, src)
    torch.testing.assert_close(out, base.index_add(0, index, src), atol=1e-5, rtol=1e-5)
    results["fp32_duplicates"] = out

    base2 = torch.zeros(16, 96, device="cuda", dtype=torch.float32)
    src2 = torch.randn(200, 96, device="cuda", dtype=torch.float32)
    index2 = torch.randint(0, 16, (200,), device="cuda", dtype=torch.int32)
    out2 = scatter_add_rows_(base2.clone(), index2, src2)
    torch.testing.assert_close(out2, base2.index_add(0, index2.long(), src2), atol=1e-5, rtol=1e-5)
    results["fp32_int32_heavy_collisions"] = out2
    return results


def bench_scatter_add():
    out = torch.zeros(8192, 1024, device="cuda", dtype=torch.float32)
    src = torch.randn(131072, 1024, device="cuda", dtype=torch.float32)
    index = torch.randint(0, 8192, (131072,), device="cuda", dtype=torch.int64)
    scatter_add_rows_(out, index, src, check_bounds=False)
