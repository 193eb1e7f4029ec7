# geak-family: softmax
"""Streaming (online) softmax over the last dimension of ``x[M, N]`` for rows too long to hold in registers.

One program per row, two passes over column blocks of BLOCK_N. Pass 1 keeps a running max ``m`` and a running
sum ``s`` *per lane* (``s = s * exp(m_old - m_new) + exp(x - m_new)``), so the loop body is pure element-wise work
with no cross-warp reduction; the BLOCK_N partial (max, sum) pairs are merged once after the loop. Pass 2
re-reads the row, writes ``exp(x - max) / sum``, and walks the blocks in reverse so that the blocks pass 1 read
last, most likely still in L2, are consumed first. Traffic is two reads and one write per element, against one
read and one write for the in-register row-wise kernel (so at best ~2/3 of the "read once, write once"
bandwidth figure), but register use is independent of N, so rows of any length work (vocabularies, long
attention rows). Statistics are fp32 whatever the input dtype; lanes that have
only seen -inf are guarded so they contribute 0 instead of NaN.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_online_kernel(x_ptr, out_ptr, n_cols, stride_x_row, stride_out_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x_row
    out_row = out_ptr + row * stride_out_row
    offsets = tl.arange(0, BLOCK_N)

    lane_max = tl.full([BLOCK_N], -float("inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(lane_max, x)
        safe_max = tl.where(new_max == -float("inf"), 0.0, new_max)
        lane_sum = lane_sum * tl.exp(lane_max - safe_max) + tl.exp(x - safe_max)
        lane_max = new_max

    row_max = tl.max(lane_max, axis=0)
    row_sum = tl.sum(lane_sum * tl.exp(lane_max - row_max), axis=0)
    inv_sum = 1.0 / row_sum

    num_blocks = tl.cdiv(n_cols, BLOCK_N)
    for i in range(0, num_blocks):
        cols = (num_blocks - 1 - i) * BLOCK_N + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        out = tl.exp(x - row_max) * inv_sum
        tl.store(out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_online(x: torch.Tensor, block_n: int = 8192) -> torch.Tensor:
    """Softmax over the last dim of a 2-D ``x`` with unit column stride; rows may be arbitrarily long."""
    if x.dim() != 2:
        raise ValueError(f"softmax_online: expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"softmax_online: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if x.stride(1) != 1:
        raise ValueError("softmax_online: the last dimension must be contiguous (stride 1)")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"softmax_online: block_n must be a power of two >= 16, got {block_n}")
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    if out.numel() == 0:
        return out
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    num_warps = min(max(block_n // 512, 4), 16)
    _softmax_online_kernel[(n_rows,)](
        x, out, n_cols, x.stride(0), out.stride(0), BLOCK_N=block_n, num_warps=num_warps
    )
    return out


def test_softmax_online():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(6, 9000, device="cuda", dtype=torch.float32) * 6.0
    x[1, :5000] = -float("inf")
    x[2, 4096:] = -float("inf")
    out = softmax_online(x)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1), atol=1e-7, rtol=1e-5)
    results["fp32_multi_block"] = out

    x16 = torch.randn(5, 3333, device="cuda", dtype=torch.float16) * 4.0
    out16 = softmax_online(x16, block_n=512)
    torch.testing.assert_close(out16, torch.softmax(x16.float(), dim=-1).to(torch.float16), atol=1e-4, rtol=2e-3)
    results["fp16_small_blocks"] = out16

    short = torch.randn(9, 100, device="cuda", dtype=torch.float32)
    out_short = softmax_online(short)
    torch.testing.assert_close(out_short, torch.softmax(short, dim=-1), atol=1e-6, rtol=1e-5)
    results["fp32_single_block"] = out_short
    return results


def bench_softmax_online():
    x = torch.randn(2048, 131072, device="cuda", dtype=torch.float16)
    softmax_online(x)
