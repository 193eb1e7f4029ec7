# geak-family: attention
"""FlashAttention-2 style forward pass: O = softmax(Q K^T * sm_scale [+ causal mask]) V, fp16, [B, H, S, D].

Grid: (cdiv(S, BLOCK_M), B * H). Each program loads one BLOCK_M x D block of Q once and streams K/V in
BLOCK_N blocks, keeping the running row max m_i, the running denominator l_i and the unnormalised output
acc in fp32 registers (online softmax): per block, m_new = max(m_i, rowmax(S_blk)), P = exp2(S_blk - m_new),
acc = acc * exp2(m_i - m_new) + P @ V, and O = acc / l_i once at the end, so the S x S score matrix never
touches memory. sm_scale is folded with log2(e) so the exponentials are `exp2`. The key range is split at
compile-time-known boundaries: blocks that need no mask run the plain loop; only the ragged tail block
(S % BLOCK_N) and, when `causal`, the BLOCK_M-wide diagonal band use the masked variant. Blocks entirely
above the diagonal are never visited, so causal attention does half the work. P is cast to fp16 for the
second `tl.dot`, as FlashAttention does. Requires D in {16, 32, 64, 128, 256} and BLOCK_M % BLOCK_N == 0.
"""

import math

import torch
import triton
import triton.language as tl


def _attention_configs() -> list[triton.Config]:
    # (BLOCK_M, BLOCK_N, num_warps, num_stages); BLOCK_M must be a multiple of BLOCK_N.
    shapes = [
        (64, 32, 4, 2),
        (128, 64, 8, 3),
        (128, 64, 4, 3),
        (128, 128, 8, 3),
        (128, 32, 4, 3),
        (64, 64, 4, 3),
        (128, 64, 4, 2),
    ]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s) for bm, bn, w, s in shapes]


@triton.jit
def _attend_key_range(
    acc, m_i, l_i, q,
    k_ptrs, v_ptrs, stride_kn, stride_vn,
    offs_m, offs_n, lo, hi, seq_len, qk_scale,
    BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
):
    """Online-softmax update of (acc, m_i, l_i) with the keys in [lo, hi); lo is a multiple of BLOCK_N."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if MASKED:
            k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[None, :] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_kn)
        scores = tl.dot(q, k) * qk_scale  # log2 domain
        if MASKED:
            keep = cols[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            scores = tl.where(keep, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        p = tl.exp2(scores - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if MASKED:
            v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs + start_n * stride_vn)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, m_i, l_i


@triton.autotune(configs=_attention_configs(), key=["seq_len", "HEAD_DIM", "CAUSAL"])
@triton.jit
def flash_attention_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    num_heads, seq_len, qk_scale,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = (batch_head // num_heads).to(tl.int64)
    head = (batch_head % num_heads).to(tl.int64)
    q_ptr += batch * stride_qb + head * stride_qh
    k_ptr += batch * stride_kb + head * stride_kh
    v_ptr += batch * stride_vb + head * stride_vh
    o_ptr += batch * stride_ob + head * stride_oh

    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=offs_m[:, None] < seq_len, other=0.0)
    k_ptrs = k_ptr + offs_d[:, None] * stride_kd + offs_n[None, :] * stride_ks  # K^T block [HEAD_DIM, BLOCK_N]
    v_ptrs = v_ptr + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd  # V block [BLOCK_N, HEAD_DIM]

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        # Keys left of the diagonal band are visible to every query row of this block.
        acc, m_i, l_i = _attend_key_range(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                          offs_m, offs_n, 0, start_m, seq_len, qk_scale,
                                          BLOCK_N, False, True)
        acc, m_i, l_i = _attend_key_range(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                          offs_m, offs_n, start_m, tl.minimum(start_m + BLOCK_M, seq_len),
                                          seq_len, qk_scale, BLOCK_N, True, True)
    else:
        full_end = (seq_len // BLOCK_N) * BLOCK_N
        acc, m_i, l_i = _attend_key_range(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                          offs_m, offs_n, 0, full_end, seq_len, qk_scale,
                                          BLOCK_N, False, False)
        acc, m_i, l_i = _attend_key_range(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                          offs_m, offs_n, full_end, seq_len, seq_len, qk_scale,
                                          BLOCK_N, True, False)

    out = acc / l_i[:, None]
    o_ptrs = o_ptr + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < seq_len)


def flash_attention_fwd(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale: float | None = None
) -> torch.Tensor:
    """Return softmax(q @ k^T * sm_scale) @ v for fp16 q, k, v of shape [B, H, S, D] (sm_scale defaults to D**-0.5)."""
    if q.ndim != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must share one [B, H, S, D] shape, got {tuple(q.shape)}, {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype == torch.float16):
        raise TypeError(f"flash_attention_fwd expects float16 q, k, v, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v live on different devices: {q.device}, {k.device}, {v.device}")
    batch, heads, seq_len, head_dim = q.shape
    if head_dim not in (16, 32, 64, 128, 256):
        raise ValueError(f"head dim must be one of 16, 32, 64, 128, 256, got {head_dim}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    out = torch.empty_like(q)
    if batch * heads == 0 or seq_len == 0:
        return out

    def grid(meta):
        return (triton.cdiv(seq_len, meta["BLOCK_M"]), batch * heads)

    flash_attention_fwd_kernel[grid](
        q, k, v, out,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        heads, seq_len, sm_scale * 1.4426950408889634,  # log2(e): softmax runs on exp2
        HEAD_DIM=head_dim, CAUSAL=causal,
    )
    return out


def _reference(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)


def test_flash_attention_fwd():
    torch.manual_seed(0)
    outputs = []
    for batch, heads, seq_len, head_dim in [(2, 3, 50, 64), (1, 2, 64, 32), (2, 1, 17, 64)]:
        q, k, v = (torch.randn((batch, heads, seq_len, head_dim), device="cuda", dtype=torch.float16) for _ in range(3))
        out = flash_attention_fwd(q, k, v, causal=False)
        torch.testing.assert_close(out.float(), _reference(q, k, v, False), atol=1e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def test_flash_attention_fwd_causal():
    torch.manual_seed(0)
    outputs = []
    for batch, heads, seq_len, head_dim in [(2, 3, 50, 64), (1, 2, 64, 32), (1, 1, 130, 32)]:
        q, k, v = (torch.randn((batch, heads, seq_len, head_dim), device="cuda", dtype=torch.float16) for _ in range(3))
        out = flash_attention_fwd(q, k, v, causal=True)
        torch.testing.assert_close(out.float(), _reference(q, k, v, True), atol=1e-2, rtol=1e-2)
        outputs.append(out)
    return tuple(outputs)


def flops_flash_attention_fwd(q, k, v, causal=False, sm_scale=None):
    batch, heads, seq_len, head_dim = q.shape
    flops = 4 * batch * heads * seq_len * seq_len * head_dim  # Q @ K^T and P @ V, 2 FLOPs per MAC
    return flops // 2 if causal else flops


def bench_flash_attention_fwd():
    q, k, v = (torch.randn((4, 16, 4096, 128), device="cuda", dtype=torch.float16) for _ in range(3))
    flash_attention_fwd(q, k, v, causal=False)


def bench_flash_attention_fwd_causal():
    q, k, v = (torch.randn((4, 16, 4096, 64), device="cuda", dtype=torch.float16) for _ in range(3))
    flash_attention_fwd(q, k, v, causal=True)
