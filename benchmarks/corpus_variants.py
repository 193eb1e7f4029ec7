"""Variants of the corpus kernels that were under 80% of the copy peak, checked and timed side by side.

The measurement record behind `snippets/README.md` ("Below 80% of copy bandwidth, and why") and the reworked
`row_sum` (one launch, last program finishes the row) and `gaussian_noise` (Philox with 7 rounds). Each variant is
checked against PyTorch, then timed with `triton.testing.do_bench` (median, L2 flushed) and as a CUDA-graph replay.

    python benchmarks/corpus_variants.py [row_sum|gauss|histogram|scatter|softmax ...]   # on a GPU
    TRITON_INTERPRET=1 python benchmarks/corpus_variants.py --small                       # checks only, on CPU
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time

import torch
import triton
import triton.language as tl

from geak.snippets import KERNELS_DIR

SMALL = "--small" in sys.argv
DEV = "cpu" if SMALL else "cuda"
N_SM = torch.cuda.get_device_properties(0).multi_processor_count if DEV == "cuda" else 4
RESULTS: list[dict] = []


def _corpus(name: str):
    """A corpus file as a module: the kept versions are timed from there, not from copies."""
    spec = importlib.util.spec_from_file_location(f"corpus_{name}", KERNELS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ROW_SUM = _corpus("row_sum")
_GAUSSIAN = _corpus("gaussian_noise")
_HISTOGRAM = _corpus("histogram")
_SCATTER = _corpus("scatter_add")
_SOFTMAX = _corpus("softmax_online")
_SCAN = _corpus("exclusive_scan_offsets")
_rs_fused = _ROW_SUM._row_sum_kernel
_gn_join = _GAUSSIAN.gaussian_noise_kernel
_bin_index = _HISTOGRAM._bin_index
_hist_private = _HISTOGRAM._histogram_private_kernel
_sa_atomic = _SCATTER._scatter_add_rows_kernel
_so_corpus = _SOFTMAX._softmax_online_kernel
_scan_kernel = _SCAN.exclusive_scan_kernel


def bench(name, fn, nbytes, check=None):
    fn()
    if check is not None:
        check()
    if DEV == "cpu":
        print(name, "ok")
        return
    torch.cuda.synchronize()
    ms = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    try:
        with torch.cuda.graph(g):
            fn()
        g.replay()
        torch.cuda.synchronize()
        gms = triton.testing.do_bench(g.replay, warmup=50, rep=300, return_mode="median")
    except Exception as e:
        gms = float("nan")
        print("graph failed", name, e)
    r = {"name": name, "ms": ms, "graph_ms": gms, "GBps": nbytes / ms / 1e6, "graph_GBps": nbytes / gms / 1e6}
    RESULTS.append(r)
    print(f"{name:44s} {ms*1e3:9.1f} us {r['GBps']:7.0f} GB/s | graph {gms*1e3:9.1f} us {r['graph_GBps']:7.0f} GB/s",
          flush=True)


# ---------------------------------------------------------------- row_sum
@triton.jit
def _rs_partial(x_ptr, partial_ptr, n_cols, stride_x_row, cols_per_split, n_splits, BLOCK_N: tl.constexpr):
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
    tl.store(partial_ptr + row * n_splits + split, tl.sum(acc, axis=0))


@triton.jit
def _rs_finalize(partial_ptr, out_ptr, n_rows, n_splits, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    splits = tl.arange(0, BLOCK_S)
    mask = (rows[:, None] < n_rows) & (splits[None, :] < n_splits)
    partial = tl.load(partial_ptr + rows[:, None] * n_splits + splits[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.sum(partial, axis=1).to(out_ptr.dtype.element_ty), mask=rows < n_rows)


def _splits(n_rows, n_cols, block_n, per_sm):
    n_blocks = triton.cdiv(n_cols, block_n)
    n_splits = max(1, min(n_blocks, triton.cdiv(per_sm * N_SM, n_rows)))
    cols_per_split = triton.cdiv(n_blocks, n_splits) * block_n
    return triton.cdiv(n_cols, cols_per_split), cols_per_split


def row_sum_two(x, block_n=2048, warps=8, per_sm=4):
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    n_splits, cps = _splits(n_rows, n_cols, block_n, per_sm)
    partial = torch.empty((n_rows, n_splits), device=x.device, dtype=torch.float32)
    _rs_partial[(n_rows, n_splits)](x, partial, n_cols, x.stride(0), cps, n_splits, BLOCK_N=block_n, num_warps=warps)
    block_s = triton.next_power_of_2(n_splits)
    block_m = max(1, 1024 // block_s)
    _rs_finalize[(triton.cdiv(n_rows, block_m),)](partial, out, n_rows, n_splits, BLOCK_M=block_m, BLOCK_S=block_s)
    return out


def row_sum_fused(x, block_n=2048, warps=8, per_sm=4):
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    n_splits, cps = _splits(n_rows, n_cols, block_n, per_sm)
    partial = torch.empty((n_rows, n_splits), device=x.device, dtype=torch.float32)
    count = torch.zeros(n_rows, device=x.device, dtype=torch.int32)
    _rs_fused[(n_rows, n_splits)](x, partial, count, out, n_cols, x.stride(0), cps, n_splits, BLOCK_N=block_n,
                                  BLOCK_S=triton.next_power_of_2(n_splits), num_warps=warps)
    return out


def run_row_sum():
    shapes = [(3, 20_000), (300, 131)] if SMALL else [(16, 2**22), (8192, 8192), (4096, 16384)]
    for m, n in shapes:
        _row_sum_shape(m, n)


def _row_sum_shape(m, n):
    x = torch.randn(m, n, device=DEV)
    ref = x.double().sum(-1).float()
    for name, fn in (
        ("two b2048 w8 s4", lambda: row_sum_two(x)),
        ("two b4096 w8 s4", lambda: row_sum_two(x, 4096)),
        ("two b4096 w8 s8", lambda: row_sum_two(x, 4096, 8, 8)),
        ("fused b2048 w8 s4", lambda: row_sum_fused(x)),
        ("fused b4096 w8 s4", lambda: row_sum_fused(x, 4096)),
        ("fused b4096 w8 s8", lambda: row_sum_fused(x, 4096, 8, 8)),
        ("fused b4096 w16 s4", lambda: row_sum_fused(x, 4096, 16, 4)),
        ("torch.sum", lambda: x.sum(-1)),
    ):
        def check(fn=fn):
            for _ in range(3):
                torch.testing.assert_close(fn(), ref, atol=1e-3 * (n**0.5) / 100, rtol=1e-5)
        bench(f"row_sum {m}x{n} {name}", fn, x.numel() * 4 + m * 4, check)


# ---------------------------------------------------------------- gaussian noise
@triton.jit
def _gn_slices(x_ptr, y_ptr, n, sigma, seed, QUADS: tl.constexpr, N_ROUNDS: tl.constexpr):
    """Element e uses word (e // QUADS) % 4 of Philox(seed, (e // (4 QUADS)) * QUADS + e % QUADS)."""
    pid = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, QUADS)
    r0, r1, r2, r3 = tl.randn4x(seed, pid * QUADS + j, N_ROUNDS)
    base = pid * (4 * QUADS) + j
    o0 = base
    o1 = base + QUADS
    o2 = base + 2 * QUADS
    o3 = base + 3 * QUADS
    x0 = tl.load(x_ptr + o0, mask=o0 < n, other=0.0)
    x1 = tl.load(x_ptr + o1, mask=o1 < n, other=0.0)
    x2 = tl.load(x_ptr + o2, mask=o2 < n, other=0.0)
    x3 = tl.load(x_ptr + o3, mask=o3 < n, other=0.0)
    tl.store(y_ptr + o0, (x0.to(tl.float32) + sigma * r0).to(y_ptr.dtype.element_ty), mask=o0 < n)
    tl.store(y_ptr + o1, (x1.to(tl.float32) + sigma * r1).to(y_ptr.dtype.element_ty), mask=o1 < n)
    tl.store(y_ptr + o2, (x2.to(tl.float32) + sigma * r2).to(y_ptr.dtype.element_ty), mask=o2 < n)
    tl.store(y_ptr + o3, (x3.to(tl.float32) + sigma * r3).to(y_ptr.dtype.element_ty), mask=o3 < n)


@triton.jit
def _gn_persistent(x_ptr, y_ptr, n, n_tiles, sigma, seed, QUADS: tl.constexpr):
    """Slices layout; each program walks tiles pid, pid + P, ... and loads the next tile before the Philox work."""
    pid = tl.program_id(0)
    step = tl.num_programs(0)
    j = tl.arange(0, QUADS)
    tile = pid
    base = tl.cast(tile, tl.int64) * (4 * QUADS) + j
    x0 = tl.load(x_ptr + base, mask=base < n, other=0.0)
    x1 = tl.load(x_ptr + base + QUADS, mask=base + QUADS < n, other=0.0)
    x2 = tl.load(x_ptr + base + 2 * QUADS, mask=base + 2 * QUADS < n, other=0.0)
    x3 = tl.load(x_ptr + base + 3 * QUADS, mask=base + 3 * QUADS < n, other=0.0)
    while tile < n_tiles:
        nxt = tl.cast(tile + step, tl.int64) * (4 * QUADS) + j
        n0 = tl.load(x_ptr + nxt, mask=nxt < n, other=0.0)
        n1 = tl.load(x_ptr + nxt + QUADS, mask=nxt + QUADS < n, other=0.0)
        n2 = tl.load(x_ptr + nxt + 2 * QUADS, mask=nxt + 2 * QUADS < n, other=0.0)
        n3 = tl.load(x_ptr + nxt + 3 * QUADS, mask=nxt + 3 * QUADS < n, other=0.0)
        r0, r1, r2, r3 = tl.randn4x(seed, tl.cast(tile, tl.int64) * QUADS + j)
        tl.store(y_ptr + base, (x0.to(tl.float32) + sigma * r0).to(y_ptr.dtype.element_ty), mask=base < n)
        tl.store(y_ptr + base + QUADS, (x1.to(tl.float32) + sigma * r1).to(y_ptr.dtype.element_ty),
                 mask=base + QUADS < n)
        tl.store(y_ptr + base + 2 * QUADS, (x2.to(tl.float32) + sigma * r2).to(y_ptr.dtype.element_ty),
                 mask=base + 2 * QUADS < n)
        tl.store(y_ptr + base + 3 * QUADS, (x3.to(tl.float32) + sigma * r3).to(y_ptr.dtype.element_ty),
                 mask=base + 3 * QUADS < n)
        x0, x1, x2, x3 = n0, n1, n2, n3
        base = nxt
        tile += step


def gn_persistent(x, sigma, seed, quads=512, warps=4, per_sm=4):
    y = torch.empty_like(x)
    n = x.numel()
    n_tiles = triton.cdiv(n, 4 * quads)
    _gn_persistent[(min(n_tiles, per_sm * N_SM),)](x, y, n, n_tiles, sigma, seed, QUADS=quads, num_warps=warps)
    return y


@triton.jit
def _gn_join32(x_ptr, y_ptr, n, sigma, seed, BLOCK_Q: tl.constexpr, HINTS: tl.constexpr):
    pid = tl.program_id(0)
    quads = pid * BLOCK_Q + tl.arange(0, BLOCK_Q)  # int32 Philox counter: n < 2**33
    offs = quads.to(tl.int64)[:, None] * 4 + tl.arange(0, 4)[None, :]
    mask = offs < n
    if HINTS:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    r0, r1, r2, r3 = tl.randn4x(seed, quads)
    noise = tl.reshape(tl.join(tl.join(r0, r2), tl.join(r1, r3)), (BLOCK_Q, 4))
    y = x.to(tl.float32) + sigma * noise
    if HINTS:
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")
    else:
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def gn_join32(x, sigma, seed, bq=512, warps=8, hints=False):
    y = torch.empty_like(x)
    n = x.numel()
    _gn_join32[(triton.cdiv(n, 4 * bq),)](x, y, n, sigma, seed, BLOCK_Q=bq, HINTS=hints, num_warps=warps)
    return y


def gn_join(x, sigma, seed, bq=512, warps=8, rounds=10):
    y = torch.empty_like(x)
    n = x.numel()
    _gn_join[(triton.cdiv(n, 4 * bq),)](x, y, n, sigma, seed, BLOCK_Q=bq, ROUNDS=rounds, num_warps=warps)
    return y


def gn_slices(x, sigma, seed, quads=1024, warps=8, rounds=10):
    y = torch.empty_like(x)
    n = x.numel()
    _gn_slices[(triton.cdiv(n, 4 * quads),)](x, y, n, sigma, seed, QUADS=quads, N_ROUNDS=rounds, num_warps=warps)
    return y


def run_gaussian():
    n = 200_003 if SMALL else 1 << 26
    x = torch.randn(n, device=DEV)
    z = torch.zeros(n, device=DEV)
    seed = 1234
    variants = {  # name: noise(t, sigma); checked for mean 0, std sigma and determinism on zeros
        "join bq512 w8 (corpus layout)": lambda t, sg: gn_join(t, sg, seed),
        "join bq256 w4": lambda t, sg: gn_join(t, sg, seed, 256, 4),
        "join bq128 w4": lambda t, sg: gn_join(t, sg, seed, 128, 4),
        "join bq256 w8": lambda t, sg: gn_join(t, sg, seed, 256, 8),
        "join bq128 w2": lambda t, sg: gn_join(t, sg, seed, 128, 2),
        "join seed 2**40+7": lambda t, sg: gn_join(t, sg, 2**40 + 7),
        "join32 bq512 w8": lambda t, sg: gn_join32(t, sg, seed),
        "join32 bq256 w4": lambda t, sg: gn_join32(t, sg, seed, 256, 4),
        "join32 bq512 w4": lambda t, sg: gn_join32(t, sg, seed, 512, 4),
        "join32 bq1024 w8": lambda t, sg: gn_join32(t, sg, seed, 1024, 8),
        "join32 bq128 w2": lambda t, sg: gn_join32(t, sg, seed, 128, 2),
        "join32 bq512 w8 hints": lambda t, sg: gn_join32(t, sg, seed, 512, 8, True),
        "join32 bq256 w4 hints": lambda t, sg: gn_join32(t, sg, seed, 256, 4, True),
        "slices q1024 w8": lambda t, sg: gn_slices(t, sg, seed),
        "slices q1024 w4": lambda t, sg: gn_slices(t, sg, seed, 1024, 4),
        "slices q2048 w8": lambda t, sg: gn_slices(t, sg, seed, 2048, 8),
        "slices q512 w4": lambda t, sg: gn_slices(t, sg, seed, 512, 4),
        "slices q256 w4": lambda t, sg: gn_slices(t, sg, seed, 256, 4),
        "slices q256 w8": lambda t, sg: gn_slices(t, sg, seed, 256, 8),
        "slices q128 w4": lambda t, sg: gn_slices(t, sg, seed, 128, 4),
        "persist q512 w4 s4": lambda t, sg: gn_persistent(t, sg, seed),
        "persist q512 w4 s8": lambda t, sg: gn_persistent(t, sg, seed, 512, 4, 8),
        "persist q256 w4 s8": lambda t, sg: gn_persistent(t, sg, seed, 256, 4, 8),
        "persist q1024 w8 s4": lambda t, sg: gn_persistent(t, sg, seed, 1024, 8, 4),
        "join bq512 w8 r7 (corpus default)": lambda t, sg: gn_join(t, sg, seed, 512, 8, 7),
        "join bq256 w4 r7": lambda t, sg: gn_join(t, sg, seed, 256, 4, 7),
        "join bq512 w4 r7": lambda t, sg: gn_join(t, sg, seed, 512, 4, 7),
        "slices q1024 w8 r7": lambda t, sg: gn_slices(t, sg, seed, 1024, 8, 7),
    }
    for name, noise in variants.items():
        def check(noise=noise):
            y = noise(z, 1.0)
            assert abs(float(y.mean())) < 0.03 and abs(float(y.std()) - 1.0) < 0.03, (float(y.mean()), float(y.std()))
            assert torch.equal(y, noise(z, 1.0))
        bench(f"gaussian {n} {name}", lambda noise=noise: noise(x, 0.1), 8 * n, check)
    bench(f"gaussian {n} torch x + 0.1*randn", lambda: x + 0.1 * torch.randn_like(x), 8 * n)


# ---------------------------------------------------------------- histogram
@triton.jit
def _hist_slab(x_ptr, slab_ptr, n_elements, low, high, scale, num_bins, HIST_BINS: tl.constexpr,
               BLOCK: tl.constexpr):
    """Per-element relaxed atomics into the program's own slab of counters (L2-resident), reduced afterwards."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    offsets = tl.arange(0, BLOCK)
    slab = slab_ptr + pid * HIST_BINS
    ones = tl.full([BLOCK], 1, dtype=tl.int32)
    for start in range(pid * BLOCK, n_elements, num_programs * BLOCK):
        idx = start + offsets
        x = tl.load(x_ptr + idx, mask=idx < n_elements, other=0.0).to(tl.float32)
        valid = (idx < n_elements) & (x >= low) & (x <= high)
        tl.atomic_add(slab + _bin_index(x, valid, low, scale, num_bins), ones, mask=valid, sem="relaxed")


@triton.jit
def _hist_reduce(slab_ptr, counts_ptr, n_slabs, num_bins, HIST_BINS: tl.constexpr, BLOCK_P: tl.constexpr):
    bins = tl.program_id(0) * HIST_BINS + tl.arange(0, HIST_BINS)
    acc = tl.zeros([HIST_BINS], dtype=tl.int32)
    for p in range(0, n_slabs, BLOCK_P):
        ps = p + tl.arange(0, BLOCK_P)
        acc += tl.sum(tl.load(slab_ptr + ps[:, None] * HIST_BINS + bins[None, :], mask=ps[:, None] < n_slabs,
                              other=0), axis=0)
    tl.store(counts_ptr + bins, acc, mask=bins < num_bins)


def hist_private(x, bins, low, high, block=8192, warps=8, per_sm=8):
    counts = torch.zeros(bins, device=x.device, dtype=torch.int32)
    n = x.numel()
    grid = (max(1, min(triton.cdiv(n, block), per_sm * N_SM)),)
    _hist_private[grid](x, counts, n, low, high, bins / (high - low), bins, HIST_BINS=triton.next_power_of_2(bins),
                        BLOCK=block, num_warps=warps)
    return counts


def hist_slab(x, bins, low, high, block=4096, warps=8, per_sm=4):
    n = x.numel()
    hb = triton.next_power_of_2(bins)
    programs = max(1, min(triton.cdiv(n, block), per_sm * N_SM))
    slab = torch.zeros((programs, hb), device=x.device, dtype=torch.int32)
    counts = torch.empty(bins, device=x.device, dtype=torch.int32)
    _hist_slab[(programs,)](x, slab, n, low, high, bins / (high - low), bins, HIST_BINS=hb, BLOCK=block,
                            num_warps=warps)
    _hist_reduce[(1,)](slab, counts, programs, bins, HIST_BINS=hb, BLOCK_P=max(1, 4096 // hb))
    return counts


def run_histogram():
    n = 50_001 if SMALL else 2**26
    x = torch.randn(n, device=DEV)
    x32 = x.float()
    valid = (x32 >= -4) & (x32 <= 4)
    ref = torch.bincount(((x32[valid] + 4.0) * (256 / 8.0)).long().clamp_max(255), minlength=256).to(torch.int32)
    for name, fn in (
        ("private b8192 w8 s8", lambda: hist_private(x, 256, -4.0, 4.0)),
        ("private b2048 w4 s16", lambda: hist_private(x, 256, -4.0, 4.0, 2048, 4, 16)),
        ("private b4096 w4 s16", lambda: hist_private(x, 256, -4.0, 4.0, 4096, 4, 16)),
        ("private b16384 w16 s4", lambda: hist_private(x, 256, -4.0, 4.0, 16384, 16, 4)),
        ("private b1024 w2 s32", lambda: hist_private(x, 256, -4.0, 4.0, 1024, 2, 32)),
        ("slab b4096 w8 s4", lambda: hist_slab(x, 256, -4.0, 4.0)),
        ("slab b4096 w8 s16", lambda: hist_slab(x, 256, -4.0, 4.0, 4096, 8, 16)),
        ("slab b1024 w4 s32", lambda: hist_slab(x, 256, -4.0, 4.0, 1024, 4, 32)),
        ("torch.histc", lambda: torch.histc(x, 256, -4.0, 4.0)),
    ):
        def check(fn=fn, name=name):
            if "torch" not in name:
                assert torch.equal(fn(), ref), name
        bench(f"histogram {n} {name}", fn, 4 * n + 1024, check)


# ---------------------------------------------------------------- scatter-add
@triton.jit
def _sa_segmented(src_ptr, order_ptr, starts_ptr, out_ptr, n_cols, stride_src_row, stride_out_row,
                  BLOCK_D: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < n_cols
    begin = tl.load(starts_ptr + r)
    end = tl.load(starts_ptr + r + 1)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for j in range(begin, end):
        s = tl.load(order_ptr + j).to(tl.int64)
        acc += tl.load(src_ptr + s * stride_src_row + cols, mask=mask, other=0.0)
    if end > begin:
        o = out_ptr + r.to(tl.int64) * stride_out_row + cols
        tl.store(o, tl.load(o, mask=mask) + acc, mask=mask)


@triton.jit
def _sa_rows(src_ptr, index_ptr, out_ptr, n_src, n_cols, stride_src_row, stride_out_row, ROWS: tl.constexpr,
             BLOCK_D: tl.constexpr):
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < n_cols
    first = tl.program_id(0) * ROWS
    for r in tl.static_range(ROWS):
        i = first + r
        ok = mask & ((cols * 0 + i) < n_src)
        dst_row = tl.load(index_ptr + tl.minimum(i, n_src - 1)).to(tl.int64)
        values = tl.load(src_ptr + i.to(tl.int64) * stride_src_row + cols, mask=ok)
        tl.atomic_add(out_ptr + dst_row * stride_out_row + cols, values, mask=ok, sem="relaxed")


def sa_rows(out, index, src, rows=8, block_d=512, warps=4):
    n_src, n_cols = src.shape
    block_d = min(triton.next_power_of_2(n_cols), block_d)
    _sa_rows[(triton.cdiv(n_src, rows), triton.cdiv(n_cols, block_d))](
        src, index, out, n_src, n_cols, src.stride(0), out.stride(0), ROWS=rows, BLOCK_D=block_d, num_warps=warps)
    return out


def sa_atomic(out, index, src, block_d=512, warps=4):
    n_src, n_cols = src.shape
    block_d = min(triton.next_power_of_2(n_cols), block_d)
    _sa_atomic[(n_src, triton.cdiv(n_cols, block_d))](src, index, out, n_cols, src.stride(0), out.stride(0),
                                                      BLOCK_D=block_d, num_warps=warps)
    return out


def sa_segmented(out, index, src, block_d=1024, warps=4):
    n_cols = src.shape[1]
    order = torch.argsort(index)
    starts = torch.zeros(out.shape[0] + 1, device=out.device, dtype=torch.int64)
    torch.cumsum(torch.bincount(index, minlength=out.shape[0]), 0, out=starts[1:])
    block_d = min(triton.next_power_of_2(n_cols), block_d)
    _sa_segmented[(out.shape[0], triton.cdiv(n_cols, block_d))](src, order, starts, out, n_cols, src.stride(0),
                                                                out.stride(0), BLOCK_D=block_d, num_warps=warps)
    return out


def run_scatter():
    r, s, d = (40, 150, 1100) if SMALL else (8192, 131072, 1024)
    out = torch.zeros(r, d, device=DEV)
    src = torch.randn(s, d, device=DEV)
    index = torch.randint(0, r, (s,), device=DEV)
    ref = torch.zeros(r, d, device=DEV).index_add_(0, index, src)
    for name, fn in (
        ("atomic d512 w4", lambda o: sa_atomic(o, index, src)),
        ("atomic d1024 w4", lambda o: sa_atomic(o, index, src, 1024, 4)),
        ("atomic d1024 w8", lambda o: sa_atomic(o, index, src, 1024, 8)),
        ("atomic d256 w2", lambda o: sa_atomic(o, index, src, 256, 2)),
        ("atomic d512 w2", lambda o: sa_atomic(o, index, src, 512, 2)),
        ("atomic d128 w1", lambda o: sa_atomic(o, index, src, 128, 1)),
        ("rows4 d512 w4", lambda o: sa_rows(o, index, src, 4, 512, 4)),
        ("rows8 d512 w4", lambda o: sa_rows(o, index, src, 8, 512, 4)),
        ("rows8 d1024 w8", lambda o: sa_rows(o, index, src, 8, 1024, 8)),
        ("rows16 d1024 w8", lambda o: sa_rows(o, index, src, 16, 1024, 8)),
        ("rows4 d256 w2", lambda o: sa_rows(o, index, src, 4, 256, 2)),
        ("segmented d1024 w4", lambda o: sa_segmented(o, index, src)),
        ("segmented d512 w4", lambda o: sa_segmented(o, index, src, 512, 4)),
        ("segmented d256 w2", lambda o: sa_segmented(o, index, src, 256, 2)),
        ("torch index_add_", lambda o: o.index_add_(0, index, src)),
    ):
        def check(fn=fn):
            torch.testing.assert_close(fn(torch.zeros(r, d, device=DEV)), ref, atol=1e-4, rtol=1e-5)
        bench(f"scatter_add {r}x{d}<-{s} {name}", lambda fn=fn: fn(out), s * d * 4 + 2 * r * d * 4 + s * 8, check)


# ---------------------------------------------------------------- online softmax
@triton.jit
def _so_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_x_row, stride_out_row, BLOCK_N: tl.constexpr):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_x_row
        out_row = out_ptr + tl.cast(row, tl.int64) * stride_out_row
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
            tl.store(out_row + cols, (tl.exp(x - row_max) * inv_sum).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _so_blockmax(x_ptr, out_ptr, n_cols, stride_x_row, stride_out_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x_row
    out_row = out_ptr + row * stride_out_row
    offsets = tl.arange(0, BLOCK_N)
    m = -float("inf")
    lane_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        lane_sum = lane_sum * tl.exp(m - safe) + tl.exp(x - safe)
        m = m_new
    inv_sum = 1.0 / tl.sum(lane_sum, axis=0)
    num_blocks = tl.cdiv(n_cols, BLOCK_N)
    for i in range(0, num_blocks):
        cols = (num_blocks - 1 - i) * BLOCK_N + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + cols, (tl.exp(x - m) * inv_sum).to(out_ptr.dtype.element_ty), mask=mask)


def softmax_corpus(x, block_n=8192, warps=16):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    _so_corpus[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_N=block_n, num_warps=warps)
    return out


@triton.jit
def _so_split(x_ptr, out_ptr, stats_ptr, ticket_ptr, n_cols, stride_x_row, stride_out_row, cols_per_split, n_splits,
              BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, LAST_BLOCK: tl.constexpr):
    split = tl.program_id(0)
    row = tl.program_id(1)
    x_row = x_ptr + row.to(tl.int64) * stride_x_row
    out_row = out_ptr + row.to(tl.int64) * stride_out_row
    offsets = tl.arange(0, BLOCK_N)
    col_start = split * cols_per_split
    col_end = tl.minimum(col_start + cols_per_split, n_cols)
    m = -float("inf")
    lane_sum = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(col_start, col_end, BLOCK_N):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < col_end, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        lane_sum = lane_sum * tl.exp(m - safe) + tl.exp(x - safe)
        m = m_new
    stat = stats_ptr + (row * n_splits + split) * 2
    tl.store(stat, m)
    tl.store(stat + 1, tl.sum(lane_sum, axis=0))
    tl.debug_barrier()
    ticket = tl.atomic_add(ticket_ptr + row, 1, sem="acq_rel")
    if ticket == n_splits - 1:
        s = tl.arange(0, BLOCK_S)
        maxes = tl.load(stats_ptr + (row * n_splits + s) * 2, mask=s < n_splits, other=-float("inf"), volatile=True)
        sums = tl.load(stats_ptr + (row * n_splits + s) * 2 + 1, mask=s < n_splits, other=0.0, volatile=True)
        row_max = tl.max(maxes, axis=0)
        safe_maxes = tl.where(maxes == -float("inf"), row_max, maxes)
        inv_sum = 1.0 / tl.sum(sums * tl.exp(safe_maxes - row_max), axis=0)
        offs2 = tl.arange(0, LAST_BLOCK)
        num_blocks = tl.cdiv(n_cols, LAST_BLOCK)
        for i in range(0, num_blocks):
            cols = (num_blocks - 1 - i) * LAST_BLOCK + offs2
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
            tl.store(out_row + cols, (tl.exp(x - row_max) * inv_sum).to(out_ptr.dtype.element_ty), mask=mask)


def softmax_split(x, chunk=8192, block_n=2048, last_block=4096, warps=8):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    n_splits = triton.cdiv(n_cols, chunk)
    stats = torch.empty((n_rows, n_splits, 2), device=x.device, dtype=torch.float32)
    tickets = torch.zeros(n_rows, device=x.device, dtype=torch.int32)
    _so_split[(n_splits, n_rows)](x, out, stats, tickets, n_cols, x.stride(0), out.stride(0), chunk, n_splits,
                                  BLOCK_N=block_n, BLOCK_S=triton.next_power_of_2(n_splits), LAST_BLOCK=last_block,
                                  num_warps=warps)
    return out


def softmax_blockmax(x, block_n=8192, warps=16):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    _so_blockmax[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_N=block_n, num_warps=warps)
    return out


def softmax_persistent(x, block_n, warps, programs):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block_n = min(block_n, triton.next_power_of_2(n_cols))
    grid = (min(n_rows, programs),)
    _so_kernel[grid](x, out, n_rows, n_cols, x.stride(0), out.stride(0), BLOCK_N=block_n, num_warps=warps)
    return out


def run_softmax():
    m, n = (6, 9000) if SMALL else (2048, 131072)
    x = torch.randn(m, n, device=DEV, dtype=torch.float32 if SMALL else torch.float16)
    ref = torch.softmax(x.float(), -1).to(x.dtype)
    for name, fn in (
        ("corpus b8192 w16", lambda: softmax_corpus(x)),
        ("persistent 1/SM b8192 w16", lambda: softmax_persistent(x, 8192, 16, N_SM)),
        ("persistent 1/SM b8192 w32", lambda: softmax_persistent(x, 8192, 32, N_SM)),
        ("persistent 2/SM b4096 w8", lambda: softmax_persistent(x, 4096, 8, 2 * N_SM)),
        ("persistent 2/SM b8192 w16", lambda: softmax_persistent(x, 8192, 16, 2 * N_SM)),
        ("persistent 1/SM b16384 w16", lambda: softmax_persistent(x, 16384, 16, N_SM)),
        ("blockmax b8192 w16", lambda: softmax_blockmax(x)),
        ("blockmax b8192 w8", lambda: softmax_blockmax(x, 8192, 8)),
        ("blockmax b4096 w8", lambda: softmax_blockmax(x, 4096, 8)),
        ("blockmax b2048 w4", lambda: softmax_blockmax(x, 2048, 4)),
        ("blockmax b16384 w16", lambda: softmax_blockmax(x, 16384, 16)),
        ("split c8192 b2048 l4096 w8", lambda: softmax_split(x)),
        ("split c8192 b4096 l4096 w8", lambda: softmax_split(x, 8192, 4096, 4096, 8)),
        ("split c16384 b4096 l8192 w8", lambda: softmax_split(x, 16384, 4096, 8192, 8)),
        ("split c4096 b2048 l4096 w8", lambda: softmax_split(x, 4096, 2048, 4096, 8)),
        ("split c8192 b2048 l8192 w16", lambda: softmax_split(x, 8192, 2048, 8192, 16)),
        ("split c32768 b4096 l8192 w8", lambda: softmax_split(x, 32768, 4096, 8192, 8)),
        ("torch.softmax", lambda: torch.softmax(x, -1)),
    ):
        def check(fn=fn):
            torch.testing.assert_close(fn(), ref, atol=1e-4, rtol=2e-3)
        bench(f"softmax_online {m}x{n} {name}", fn, 2 * x.numel() * x.element_size(), check)


def report_regs():
    for fn in (_gn_join, _gn_join32, _so_blockmax, _so_kernel, _rs_fused):
        try:
            for cache in fn.device_caches.values():
                for k in cache[0].values():
                    print("regs", fn.__name__, k.n_regs, "spills", k.n_spills, k.metadata.num_warps)
        except Exception as e:
            print("regs?", fn.__name__, e)


# ---------------------------------------------------------------- exclusive scan (offsets)
def scan(lengths, block=2048, warps=8):
    rows, cols = lengths.shape
    out = torch.empty((rows, cols), dtype=torch.int64, device=lengths.device)
    block = min(block, triton.next_power_of_2(max(cols, 16)))
    _scan_kernel[(rows,)](lengths, out, cols, lengths.stride(0), out.stride(0), BLOCK=block, num_warps=warps)
    return out


def run_scan():
    m, n = (7, 3001) if SMALL else (8192, 16384)
    lengths = torch.randint(0, 4096, (m, n), device=DEV, dtype=torch.int32)
    ref = torch.cumsum(lengths.to(torch.int64), dim=1) - lengths.to(torch.int64)
    for block, warps in ((2048, 8), (1024, 4), (1024, 8), (2048, 4), (2048, 16), (4096, 8), (4096, 16), (8192, 16),
                         (512, 4), (512, 2)):
        def fn(block=block, warps=warps):
            return scan(lengths, block, warps)

        def check(fn=fn):
            torch.testing.assert_close(fn(), ref)

        bench(f"exclusive_scan {m}x{n} b{block} w{warps}", fn, lengths.numel() * 12, check)


if __name__ == "__main__":
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    t0 = time.time()
    for part in (run_row_sum, run_gaussian, run_histogram, run_scatter, run_softmax, run_scan):
        if not only or any(o in part.__name__ for o in only):
            part()
    if DEV == "cuda":
        report_regs()
        out = os.environ.get("OUT", ".")
        with open(os.path.join(out, "variants.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)
    print(f"done in {time.time() - t0:.0f}s")
