# geak-family: reduction
"""Sum over the last dimension of a 2-D tensor ``x[M, N]`` with fp32 accumulation, for any row length, in one launch.

The grid is (M, S): program (row, s) sums columns ``[s * C, (s + 1) * C)`` of its row, looping over BLOCK_N-wide
blocks into a BLOCK_N-lane fp32 accumulator (element-wise adds in the loop, one tree reduction at the end). The
split count S is chosen so that M * S fills the GPU (about 4 programs per SM): many short rows get S = 1 and write
their sum directly; a handful of very long rows are cut into many chunks, so both shapes stream at full bandwidth.

With S > 1 the row is finished by whichever of its programs arrives last, without a second launch: each program
stores its fp32 partial, waits at a block barrier (so all of its threads' stores precede the next step), then
takes a ticket with an acquire-release ``atomic_add`` on the row's counter. The program that draws ticket S - 1
knows every partial of the row is visible to it, adds them in split order and writes the result, so the sum is
deterministic (the same bits on every run, unlike accumulating with float atomics). Counters start at zero in a
small int32 buffer per call. Reads each input element once; the partials are ``M * S * 4`` bytes.
"""
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _row_sum_kernel(
    x_ptr,
    partial_ptr,
    ticket_ptr,
    out_ptr,
    n_cols,
    stride_x_row,
    cols_per_split,
    n_splits,
    BLOCK_N: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    row = tl.program_id(0)
    split = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x_row
    col_start = split * cols_per_split
    col_end = tl.minimum(col_start + cols_per_split, n_cols)
    offsets = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(col_start, col_end, BLOCK_N):
        cols = start + offsets
        acc += tl.load(x_row + cols, mask=cols < col_end, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    if n_splits == 1:
        tl.store(out_ptr + row, total.to(out_ptr.dtype.element_ty))
    else:
        tl.store(partial_ptr + row * n_splits + split, total)
        tl.debug_barrier()
        ticket = tl.atomic_add(ticket_ptr + row, 1, sem="acq_rel")
        if ticket == n_splits - 1:
            splits = tl.arange(0, BLOCK_S)
            partial = tl.load(
                partial_ptr + row * n_splits + splits, mask=splits < n_splits, other=0.0, volatile=True
            )
            tl.store(out_ptr + row, tl.sum(partial, axis=0).to(out_ptr.dtype.element_ty))


@functools.lru_cache(maxsize=None)
def _target_programs(device: torch.device) -> int:
    """About 4 resident programs per SM on a GPU; a small number under the interpreter."""
    if device.type == "cuda":
        return 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return 16


def row_sum(x: torch.Tensor, block_n: int = 4096) -> torch.Tensor:
    """Sum of each row of a 2-D ``x`` (unit column stride); returns ``[M]`` in ``x``'s dtype."""
    if x.dim() != 2:
        raise ValueError(f"row_sum: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"row_sum: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if x.stride(1) != 1:
        raise ValueError("row_sum: the last dimension must be contiguous (stride 1)")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"row_sum: block_n must be a power of two >= 16, got {block_n}")
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    if n_rows == 0:
        return out
    if n_cols == 0:
        return out.zero_()
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    n_blocks = triton.cdiv(n_cols, block_n)
    n_splits = max(1, min(n_blocks, triton.cdiv(_target_programs(x.device), n_rows)))
    cols_per_split = triton.cdiv(n_blocks, n_splits) * block_n
    n_splits = triton.cdiv(n_cols, cols_per_split)
    partial = torch.empty((n_rows, n_splits), device=x.device, dtype=torch.float32)
    tickets = torch.zeros(n_rows if n_splits > 1 else 1, device=x.device, dtype=torch.int32)
    _row_sum_kernel[(n_rows, n_splits)](
        x,
        partial,
        tickets,
        out,
        n_cols,
        x.stride(0),
        cols_per_split,
        n_splits,
        BLOCK_N=block_n,
        BLOCK_S=triton.next_power_of_2(n_splits),
        num_warps=16 if block_n >= 4096 else 8,
    )
    return out


def test_row_sum():
    torch.manual_seed(0)
    results = {}
    long_rows = torch.randn(3, 20_000, device="cuda", dtype=torch.float32)
    out = row_sum(long_rows)
    torch.testing.assert_close(out, long_rows.double().sum(-1).float(), atol=1e-3, rtol=1e-5)
    assert torch.equal(row_sum(long_rows), out), "split sums must be deterministic"
    results["few_long_rows_split"] = out

    one_row = torch.randn(1, 100_003, device="cuda", dtype=torch.float32) + 0.5
    out_one = row_sum(one_row, block_n=1024)
    torch.testing.assert_close(out_one, one_row.double().sum(-1).float(), atol=2e-3, rtol=1e-5)
    results["one_row_many_splits"] = out_one

    many_rows = torch.randn(300, 131, device="cuda", dtype=torch.float32)
    out = row_sum(many_rows)
    torch.testing.assert_close(out, many_rows.double().sum(-1).float(), atol=1e-4, rtol=1e-5)
    results["many_short_rows"] = out

    x16 = torch.randn(40, 1500, device="cuda", dtype=torch.float16)[:, 3:1403]
    out16 = row_sum(x16, block_n=256)
    torch.testing.assert_close(out16, x16.float().sum(-1).to(torch.float16), atol=1e-2, rtol=1e-3)
    results["fp16_row_strided"] = out16
    return results


def bench_row_sum():
    x = torch.randn(16, 2**22, device="cuda", dtype=torch.float32)
    row_sum(x)
