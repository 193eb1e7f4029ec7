# geak-family: atomic
"""Histogram of floating values into ``bins`` equal-width bins over ``[low, high]``, int32 counts (``torch.histc`` rules).

Binning: ``bin = floor((x - low) * bins / (high - low))``, ``x == high`` goes to the last bin, and values outside
``[low, high]`` or NaN are ignored.

* Up to 1024 bins (the common case), a persistent grid of about 8 programs per SM strides over the input; each
  program builds a private histogram of every block in registers with ``tl.histogram`` and accumulates them, then
  flushes it with one ``tl.atomic_add`` per non-empty bin. Global atomics are O(programs * bins) instead of one per
  element, so contention on popular bins disappears. Invalid elements are counted into bin 0 and subtracted
  again before the flush: that keeps the private histogram at next_power_of_2(bins) entries (no spare "dump" bin
  doubling it for power-of-two bin counts) and needs no mask argument, which older ``tl.histogram`` lacks.
* For more bins, contention per bin is low anyway, and each element does one relaxed atomic increment.

The input is read once and the counts are exact (integer atomics), so results match PyTorch bit for bit. The
kernel is bound by the histogram/atomic work rather than HBM: about a quarter of copy bandwidth on an H200 for
256 bins, still faster than ``torch.histc``.
"""
import torch
import triton
import triton.language as tl

MAX_PRIVATE_HISTOGRAM_BINS = 1024


@triton.jit
def _bin_index(x, valid, low, scale, num_bins):
    """Bin of each valid value (0 for invalid lanes; callers discount or mask those)."""
    position = tl.where(valid, (x - low) * scale, 0.0)
    return tl.minimum(position.to(tl.int32), num_bins - 1)


@triton.jit
def _histogram_private_kernel(
    x_ptr, counts_ptr, n_elements, low, high, scale, num_bins, HIST_BINS: tl.constexpr, BLOCK: tl.constexpr
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    offsets = tl.arange(0, BLOCK)
    local = tl.zeros([HIST_BINS], dtype=tl.int32)
    n_invalid = 0
    for start in range(pid * BLOCK, n_elements, num_programs * BLOCK):
        idx = start + offsets
        x = tl.load(x_ptr + idx, mask=idx < n_elements, other=0.0).to(tl.float32)
        valid = (idx < n_elements) & (x >= low) & (x <= high)
        local += tl.histogram(_bin_index(x, valid, low, scale, num_bins), HIST_BINS)
        n_invalid += tl.sum((~valid).to(tl.int32), axis=0)
    bins = tl.arange(0, HIST_BINS)
    local -= tl.where(bins == 0, n_invalid, 0)
    tl.atomic_add(counts_ptr + bins, local, mask=(bins < num_bins) & (local > 0), sem="relaxed")


@triton.jit
def _histogram_atomic_kernel(x_ptr, counts_ptr, n_elements, low, high, scale, num_bins, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_bounds = idx < n_elements
    x = tl.load(x_ptr + idx, mask=in_bounds, other=0.0).to(tl.float32)
    valid = in_bounds & (x >= low) & (x <= high)
    bin_index = _bin_index(x, valid, low, scale, num_bins)
    ones = tl.full([BLOCK], 1, dtype=tl.int32)
    tl.atomic_add(counts_ptr + bin_index, ones, mask=valid, sem="relaxed")


def _num_programs(device: torch.device, n_blocks: int) -> int:
    """About 8 persistent programs per SM on a GPU; 4 under the interpreter (so each program loops)."""
    if device.type == "cuda":
        target = 8 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 4
    return max(1, min(n_blocks, target))


def histogram(x: torch.Tensor, bins: int, low: float, high: float) -> torch.Tensor:
    """int32 counts of the contiguous float tensor ``x`` in ``bins`` equal bins over ``[low, high]``."""
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"histogram: expected a float16/bfloat16/float32 tensor, got {x.dtype}")
    if not x.is_contiguous():
        raise ValueError("histogram: input must be contiguous")
    if bins <= 0:
        raise ValueError(f"histogram: bins must be positive, got {bins}")
    if not low < high:
        raise ValueError(f"histogram: need low < high, got low={low}, high={high}")
    if x.numel() >= 2**31:
        raise ValueError("histogram: inputs of 2**31 elements or more are not supported (int32 offsets)")
    counts = torch.zeros(bins, device=x.device, dtype=torch.int32)
    n_elements = x.numel()
    if n_elements == 0:
        return counts
    scale = bins / (high - low)
    if bins <= MAX_PRIVATE_HISTOGRAM_BINS:
        block = 8192
        grid = (_num_programs(x.device, triton.cdiv(n_elements, block)),)
        _histogram_private_kernel[grid](
            x,
            counts,
            n_elements,
            low,
            high,
            scale,
            bins,
            HIST_BINS=triton.next_power_of_2(bins),
            BLOCK=block,
            num_warps=8,
        )
    else:
        block = 1024
        _histogram_atomic_kernel[(triton.cdiv(n_elements, block),)](
            x, counts, n_elements, low, high, scale, bins, BLOCK=block, num_warps=4
        )
    return counts


def _reference_counts(x: torch.Tensor, bins: int, low: float, high: float) -> torch.Tensor:
    """Same fp32 arithmetic as the kernel, then ``torch.bincount``."""
    x32 = x.float().flatten()
    valid = (x32 >= low) & (x32 <= high)
    scale = torch.tensor(bins / (high - low), dtype=torch.float32, device=x.device)
    index = ((x32[valid] - torch.tensor(low, dtype=torch.float32, device=x.device)) * scale).long()
    return torch.bincount(index.clamp_max(bins - 1), minlength=bins).to(torch.int32)


def test_histogram():
    torch.manual_seed(0)
    results = {}
    x = torch.randn(50_001, device="cuda", dtype=torch.float32) * 2.0
    x[:3] = torch.tensor([float("nan"), 3.0, -3.0])
    counts = histogram(x, 100, -3.0, 3.0)
    assert torch.equal(counts, _reference_counts(x, 100, -3.0, 3.0))
    results["private_fp32"] = counts

    centers = -1.0 + (torch.randint(0, 64, (30_000,), device="cuda").float() + 0.5) * (2.0 / 64)
    counts_histc = histogram(centers, 64, -1.0, 1.0)
    assert torch.equal(counts_histc, torch.histc(centers, bins=64, min=-1.0, max=1.0).to(torch.int32))
    results["matches_histc"] = counts_histc

    x16 = (torch.rand(20_000, device="cuda", dtype=torch.float32) * 1.2 - 0.1).to(torch.float16)
    counts_many = histogram(x16, 3000, 0.0, 1.0)
    assert torch.equal(counts_many, _reference_counts(x16, 3000, 0.0, 1.0))
    results["global_atomics_fp16"] = counts_many
    return results


def bench_histogram():
    x = torch.randn(2**26, device="cuda", dtype=torch.float32)
    histogram(x, 256, -4.0, 4.0)
