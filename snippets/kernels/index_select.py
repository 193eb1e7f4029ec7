# geak-family: indexing
"""Row gather ``out[i, :] = x[index[i], :]``, like ``torch.index_select(x, 0, index)`` for a 2-D ``x[R, D]``.

Grid is (len(index), column blocks). Each program reads one index (a scalar load, widened to int64 before it is
multiplied by the row stride so tables above 2**31 elements work), then copies a BLOCK_D-wide slice of that row
with contiguous, vectorised loads and stores. Rows are independent, so duplicated indices are fine. Bytes moved:
the gathered rows once, the output once, and the (tiny) index vector. By default the wrapper checks the index
range on the device before launching (one small reduction and a host sync), since an out-of-range index would
read arbitrary memory; pass ``check_bounds=False`` in hot loops where indices are trusted.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _index_select_rows_kernel(
    x_ptr, index_ptr, out_ptr, n_cols, stride_x_row, stride_out_row, BLOCK_D: tl.constexpr
):
    i = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < n_cols
    src_row = tl.load(index_ptr + i).to(tl.int64)
    values = tl.load(x_ptr + src_row * stride_x_row + cols, mask=mask)
    tl.store(out_ptr + i.to(tl.int64) * stride_out_row + cols, values, mask=mask)


def index_select(x: torch.Tensor, index: torch.Tensor, check_bounds: bool = True) -> torch.Tensor:
    """Gather rows of a 2-D ``x`` (unit column stride) by a 1-D int32/int64 ``index``; returns ``[len(index), D]``."""
    if x.dim() != 2:
        raise ValueError(f"index_select: x must be 2-D, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError("index_select: x must have a contiguous last dimension (stride 1)")
    if index.dim() != 1 or index.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"index_select: index must be a 1-D int32/int64 tensor, got {index.dtype} {tuple(index.shape)}")
    if not index.is_contiguous():
        raise ValueError("index_select: index must be contiguous")
    if index.device != x.device:
        raise ValueError(f"index_select: x and index on different devices ({x.device} vs {index.device})")
    n_rows, n_cols = x.shape
    out = torch.empty((index.numel(), n_cols), device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out
    if check_bounds and bool(((index < 0) | (index >= n_rows)).any()):
        raise IndexError(f"index_select: index out of range for a table of {n_rows} rows")
    block_d = min(triton.next_power_of_2(n_cols), 2048)
    grid = (index.numel(), triton.cdiv(n_cols, block_d))
    _index_select_rows_kernel[grid](
        x, index, out, n_cols, x.stride(0), out.stride(0), BLOCK_D=block_d, num_warps=4
    )
    return out


def test_index_select():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(500, 3000, device="cuda", dtype=torch.float32)
    index = torch.randint(0, 500, (37,), device="cuda", dtype=torch.int64)
    index[:3] = torch.tensor([0, 499, 0])
    out = index_select(x, index)
    torch.testing.assert_close(out, torch.index_select(x, 0, index), atol=0.0, rtol=0.0)
    results["fp32_int64_index"] = out

    x16 = torch.randn(64, 200, device="cuda", dtype=torch.float16)[:, 13:113]
    index32 = torch.randint(0, 64, (90,), device="cuda", dtype=torch.int32)
    out16 = index_select(x16, index32)
    torch.testing.assert_close(out16, x16[index32.long()], atol=0.0, rtol=0.0)
    results["fp16_int32_index_strided"] = out16

    try:
        index_select(x, torch.tensor([500], device="cuda"))
    except IndexError:
        pass
    else:
        raise AssertionError("out-of-range index was not rejected")
    return results


def bytes_index_select(x, index, check_bounds=True):
    """Traffic of one call: the index, the selected rows (read) and the output (written)."""
    rows = index.numel() * x.shape[1] * x.element_size()
    return index.numel() * index.element_size() + 2 * rows


def bench_index_select():
    table = torch.randn(131072, 4096, device="cuda", dtype=torch.float16)
    index = torch.randint(0, 131072, (65536,), device="cuda", dtype=torch.int64)
    index_select(table, index, check_bounds=False)
