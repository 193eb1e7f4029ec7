# geak-family: elementwise
"""Element-wise addition ``out = x + y`` of two same-shaped, same-dtype contiguous tensors.

The tensors are treated as flat 1-D buffers: program ``i`` adds the contiguous chunk
``[i * BLOCK_SIZE, (i + 1) * BLOCK_SIZE)`` and masks the ragged tail. The op reads two values and writes one per
add, so it is purely bandwidth-bound; 1024-element blocks with 4 warps give each thread 8 consecutive elements
(two 16-byte vector accesses in fp32), enough bytes in flight to saturate HBM. The program offset is widened to
int64 so tensors with more than 2**31 elements stay correct.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    """Return ``x + y`` computed by ``add_kernel``; both inputs must be contiguous with equal shape and dtype."""
    if x.shape != y.shape:
        raise ValueError(f"add: shape mismatch {tuple(x.shape)} vs {tuple(y.shape)}")
    if x.dtype != y.dtype:
        raise TypeError(f"add: dtype mismatch {x.dtype} vs {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"add: inputs on different devices ({x.device} vs {y.device})")
    if not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError("add: inputs must be contiguous; call .contiguous() first")
    if block_size <= 0 or block_size & (block_size - 1):
        raise ValueError(f"add: block_size must be a positive power of two, got {block_size}")
    out = torch.empty_like(x)
    n_elements = out.numel()
    if n_elements == 0:
        return out
    grid = (triton.cdiv(n_elements, block_size),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=block_size, num_warps=4)
    return out
##################################################################################################################################################
import torch


def test_add():
    torch.manual_seed(0)
    results = {}

    x = torch.rand(50_001, device="cuda", dtype=torch.float32)
    y = torch.rand(50_001, device="cuda", dtype=torch.float32)
    out = add(x, y)
    torch.testing.assert_close(out, x + y, atol=0.0, rtol=0.0)
    results["test_case_1"] = out

    x = torch.randn(37, 129, device="cuda", dtype=torch.float16)
    y = torch.randn(37, 129, device="cuda", dtype=torch.float16)
    out = add(x, y)
    torch.testing.assert_close(out, x + y, atol=0.0, rtol=0.0)
    results["test_case_2"] = out

    x = torch.randn(4096, device="cuda", dtype=torch.float32)
    y = torch.randn(4096, device="cuda", dtype=torch.float32)
    out = add(x, y, block_size=256)
    torch.testing.assert_close(out, x + y, atol=0.0, rtol=0.0)
    results["test_case_3"] = out

    x = torch.randn(1, device="cuda", dtype=torch.float32)
    y = torch.randn(1, device="cuda", dtype=torch.float32)
    out = add(x, y)
    torch.testing.assert_close(out, x + y, atol=0.0, rtol=0.0)
    results["test_case_4"] = out
    return results


def bench_add():
    n = 2**26
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    y = torch.randn(n, device="cuda", dtype=torch.float32)
    add(x, y)


result_gold = test_add()
