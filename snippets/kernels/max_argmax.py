# geak-family: reduction
"""Row-wise max and argmax over the last dimension of ``x[M, N]``, matching ``torch.max(x, dim=-1)``.

One program per row streams the row in BLOCK_N-wide column blocks. Each lane keeps its own running (value, index)
pair, updated with a strict ``>`` so a lane keeps the *first* column where its maximum occurs; the loop therefore
needs no cross-lane communication. After the loop three built-in reductions merge the lanes: the row maximum,
then the smallest column index among lanes holding it, which gives PyTorch's first-occurrence semantics. NaN is
treated as larger than every number (the first NaN wins), as in PyTorch. Values are compared in fp32, which is
exact for fp16/bf16 inputs, and the returned value is re-read from the winning column. The input is read once;
the outputs are M values (input dtype) and M int64 indices.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _max_argmax_kernel(x_ptr, values_ptr, indices_ptr, n_cols, stride_x_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row.to(tl.int64) * stride_x_row
    offsets = tl.arange(0, BLOCK_N)
    best_value = tl.full([BLOCK_N], -float("inf"), tl.float32)
    best_index = tl.zeros([BLOCK_N], dtype=tl.int32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        take = (x > best_value) | ((x != x) & (best_value == best_value))
        best_value = tl.where(take, x, best_value)
        best_index = tl.where(take, cols, best_index)
    # Merge the lanes: the winners are the NaN lanes if any, else the lanes holding the row max; the smallest
    # column index among the winners is the first occurrence. Three built-in reductions, no custom combine.
    is_nan = best_value != best_value
    has_nan = tl.max(is_nan.to(tl.int32), axis=0) > 0
    row_max = tl.max(tl.where(is_nan, -float("inf"), best_value), axis=0)
    is_winner = tl.where(has_nan, is_nan, best_value == row_max)
    index = tl.min(tl.where(is_winner, best_index, n_cols), axis=0)
    tl.store(values_ptr + row, tl.load(x_row + index))
    tl.store(indices_ptr + row, index.to(tl.int64))


def max_argmax(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(values, indices)`` of the row maxima of a 2-D ``x`` with unit column stride."""
    if x.dim() != 2:
        raise ValueError(f"max_argmax: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"max_argmax: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if x.stride(1) != 1:
        raise ValueError("max_argmax: the last dimension must be contiguous (stride 1)")
    n_rows, n_cols = x.shape
    if n_cols == 0:
        raise ValueError("max_argmax: cannot reduce rows of length 0")
    if n_cols >= 2**31:
        raise ValueError("max_argmax: rows must have fewer than 2**31 elements (int32 lane indices)")
    values = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    indices = torch.empty(n_rows, device=x.device, dtype=torch.int64)
    if n_rows == 0:
        return values, indices
    block_n = min(triton.next_power_of_2(n_cols), 4096)
    num_warps = min(max(block_n // 512, 4), 8)
    _max_argmax_kernel[(n_rows,)](x, values, indices, n_cols, x.stride(0), BLOCK_N=block_n, num_warps=num_warps)
    return values, indices


def test_max_argmax():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(33, 10_000, device="cuda", dtype=torch.float32)
    values, indices = max_argmax(x)
    ref = torch.max(x, dim=-1)
    torch.testing.assert_close(values, ref.values, atol=0.0, rtol=0.0)
    torch.testing.assert_close(indices, torch.argmax(x, dim=-1), atol=0, rtol=0)
    results.update(values_fp32=values, indices_fp32=indices)

    ties = torch.randint(-3, 4, (50, 777), device="cuda").to(torch.float16)
    ties[7] = -float("inf")
    ties[9, 100] = float("nan")
    ties[9, 500] = float("nan")
    ties[11, -1] = float("inf")
    values, indices = max_argmax(ties)
    ref_indices = torch.argmax(ties.float(), dim=-1)
    torch.testing.assert_close(indices, ref_indices, atol=0, rtol=0)
    torch.testing.assert_close(values, ties.gather(1, ref_indices[:, None]).squeeze(1), atol=0.0, rtol=0.0, equal_nan=True)
    assert indices[7] == 0 and indices[9] == 100 and indices[11] == 776
    results.update(values_ties=values, indices_ties=indices)
    return results


def bench_max_argmax():
    logits = torch.randn(8192, 32000, device="cuda", dtype=torch.float16)
    max_argmax(logits)
