# geak-family: attention
"""Single-query (decode) attention over a paged KV cache, with split-KV and grouped-query heads.

q is [B, H_q, D] (one new token per sequence); the cache is vLLM-style paged: k_cache and v_cache are
[num_blocks, PAGE_SIZE, H_kv, D], block_table[b, j] names the physical block that holds tokens
[j * PAGE_SIZE, (j + 1) * PAGE_SIZE) of sequence b, and context_lens[b] is that sequence's length. Decode
attention is bound by reading K/V once, so the work is laid out to (1) read every cached byte exactly once
and (2) fill the GPU even for small batches:
- one program serves all H_q / H_kv query heads that share a KV head (GQA), stacking them as the rows of a
  [QUERY_BLOCK, D] tile padded to >= 16 rows so the scores and P @ V run on `tl.dot`;
- the context is cut into PARTITION_SIZE-token partitions, one program each (grid = H_kv x B x partitions;
  programs past a sequence's end exit at once), each producing an unnormalised partial output plus its
  running max and softmax denominator (fp32, log2 domain);
- a second kernel merges the partials of each (sequence, head) with the usual rescaling by exp2(m_p - m).
Inside a partition the keys are processed BLOCK_N tokens at a time: each token's physical slot is
gathered from the block table, so BLOCK_N is independent of PAGE_SIZE. Zero-length contexts give zeros.
"""

import math

import torch
import triton
import triton.language as tl


def _decode_configs() -> list[triton.Config]:
    # (BLOCK_N, num_warps, num_stages)
    shapes = [(32, 4, 2), (64, 4, 2), (64, 4, 3), (128, 4, 2), (128, 8, 3), (64, 8, 2)]
    return [triton.Config({"BLOCK_N": bn}, num_warps=w, num_stages=s) for bn, w, s in shapes]


@triton.autotune(configs=_decode_configs(), key=["HEAD_DIM", "QUERY_GROUP", "PAGE_SIZE", "PARTITION_SIZE"])
@triton.jit
def paged_decode_partition_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, block_table_ptr, context_lens_ptr,
    part_out_ptr, part_max_ptr, part_sum_ptr,
    stride_qb, stride_qh,
    stride_kblk, stride_ktok, stride_kh,
    stride_vblk, stride_vtok, stride_vh,
    stride_bt, num_partitions, qk_scale,
    HEAD_DIM: tl.constexpr, QUERY_GROUP: tl.constexpr, QUERY_BLOCK: tl.constexpr,
    PAGE_SIZE: tl.constexpr, PARTITION_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
):
    kv_head = tl.program_id(0)
    seq = tl.program_id(1)
    part = tl.program_id(2)
    num_q_heads = tl.num_programs(0) * QUERY_GROUP
    context_len = tl.load(context_lens_ptr + seq)
    part_start = part * PARTITION_SIZE
    if part_start < context_len:
        part_end = tl.minimum(part_start + PARTITION_SIZE, context_len)
        offs_g = tl.arange(0, QUERY_BLOCK)
        offs_d = tl.arange(0, HEAD_DIM)
        offs_n = tl.arange(0, BLOCK_N)
        heads = kv_head * QUERY_GROUP + offs_g
        group_mask = offs_g < QUERY_GROUP
        q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                    mask=group_mask[:, None], other=0.0)

        m_i = tl.full((QUERY_BLOCK,), float("-inf"), dtype=tl.float32)
        l_i = tl.zeros((QUERY_BLOCK,), dtype=tl.float32)
        acc = tl.zeros((QUERY_BLOCK, HEAD_DIM), dtype=tl.float32)
        for start in range(part_start, part_end, BLOCK_N):
            tokens = start + offs_n
            token_mask = tokens < part_end
            block_ids = tl.load(block_table_ptr + seq * stride_bt + tokens // PAGE_SIZE, mask=token_mask, other=0)
            slot_in_block = tokens % PAGE_SIZE
            k_rows = block_ids.to(tl.int64) * stride_kblk + slot_in_block * stride_ktok + kv_head * stride_kh
            v_rows = block_ids.to(tl.int64) * stride_vblk + slot_in_block * stride_vtok + kv_head * stride_vh
            k = tl.load(k_cache_ptr + k_rows[None, :] + offs_d[:, None], mask=token_mask[None, :], other=0.0)
            scores = tl.dot(q, k) * qk_scale  # [QUERY_BLOCK, BLOCK_N], log2 domain
            scores = tl.where(token_mask[None, :], scores, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(scores, axis=1))
            p = tl.exp2(scores - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_cache_ptr + v_rows[:, None] + offs_d[None, :], mask=token_mask[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new

        # Partials are laid out [B, H_q, num_partitions] (+ [D] for the output).
        row = (seq * num_q_heads + heads) * num_partitions + part
        tl.store(part_max_ptr + row, m_i, mask=group_mask)
        tl.store(part_sum_ptr + row, l_i, mask=group_mask)
        tl.store(part_out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=group_mask[:, None])


@triton.jit
def paged_decode_reduce_kernel(
    part_out_ptr, part_max_ptr, part_sum_ptr, context_lens_ptr, out_ptr,
    stride_ob, stride_oh, num_partitions,
    HEAD_DIM: tl.constexpr, PARTITION_SIZE: tl.constexpr, BLOCK_P: tl.constexpr,
):
    head = tl.program_id(0)
    seq = tl.program_id(1)
    num_q_heads = tl.num_programs(0)
    used = tl.cdiv(tl.load(context_lens_ptr + seq), PARTITION_SIZE)
    offs_p = tl.arange(0, BLOCK_P)
    offs_d = tl.arange(0, HEAD_DIM)
    p_mask = offs_p < used
    rows = (seq * num_q_heads + head) * num_partitions + offs_p

    part_max = tl.load(part_max_ptr + rows, mask=p_mask, other=float("-inf"))
    global_max = tl.max(part_max, axis=0)
    weights = tl.where(p_mask, tl.exp2(part_max - global_max), 0.0)
    total = tl.sum(tl.load(part_sum_ptr + rows, mask=p_mask, other=0.0) * weights, axis=0)
    part_out = tl.load(part_out_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=p_mask[:, None], other=0.0)
    out = tl.sum(part_out * weights[:, None], axis=0) / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + seq * stride_ob + head * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty))


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    context_lens: torch.Tensor,
    sm_scale: float | None = None,
    partition_size: int = 512,
) -> torch.Tensor:
    """Attend q [B, H_q, D] over the paged cache [num_blocks, PAGE_SIZE, H_kv, D]; returns [B, H_q, D]."""
    if q.ndim != 3 or k_cache.ndim != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"expected q [B, H_q, D] and k/v caches [blocks, page, H_kv, D], got {tuple(q.shape)}, "
                         f"{tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    batch, num_q_heads, head_dim = q.shape
    _, page_size, num_kv_heads, cache_dim = k_cache.shape
    if cache_dim != head_dim or head_dim not in (16, 32, 64, 128, 256):
        raise ValueError(f"head dim must match between q and the cache and be a power of 2 in [16, 256], "
                         f"got {head_dim} and {cache_dim}")
    if num_q_heads % num_kv_heads != 0:
        raise ValueError(f"{num_q_heads} query heads cannot be grouped over {num_kv_heads} KV heads")
    if not (q.dtype == k_cache.dtype == v_cache.dtype) or q.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"q and the caches must share one 16-bit float dtype, got {q.dtype}, {k_cache.dtype}, "
                        f"{v_cache.dtype}")
    if block_table.ndim != 2 or block_table.shape[0] != batch or block_table.dtype != torch.int32:
        raise ValueError(
            f"block_table must be int32 [B, max_blocks], got {block_table.dtype} {tuple(block_table.shape)}"
        )
    if context_lens.shape != (batch,) or context_lens.dtype != torch.int32:
        raise ValueError(f"context_lens must be int32 [B], got {context_lens.dtype} {tuple(context_lens.shape)}")
    if page_size & (page_size - 1) or partition_size <= 0 or partition_size % page_size:
        raise ValueError(f"page size ({page_size}) must be a power of 2 dividing partition_size ({partition_size})")
    if k_cache.stride(3) != 1 or v_cache.stride(3) != 1 or q.stride(2) != 1:
        raise ValueError("q and the caches must be contiguous along the head dimension")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    out = torch.empty_like(q)
    if batch == 0:
        return out

    query_group = num_q_heads // num_kv_heads
    # Upper bound from the table's width: no host sync; programs past a sequence's end return at once.
    num_partitions = triton.cdiv(block_table.shape[1] * page_size, partition_size)
    part_out = torch.empty((batch, num_q_heads, num_partitions, head_dim), device=q.device, dtype=torch.float32)
    part_max = torch.empty((batch, num_q_heads, num_partitions), device=q.device, dtype=torch.float32)
    part_sum = torch.empty_like(part_max)
    block_table = block_table.contiguous()
    context_lens = context_lens.contiguous()

    paged_decode_partition_kernel[(num_kv_heads, batch, num_partitions)](
        q, k_cache, v_cache, block_table, context_lens,
        part_out, part_max, part_sum,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0), num_partitions, sm_scale * 1.4426950408889634,  # log2(e)
        HEAD_DIM=head_dim, QUERY_GROUP=query_group, QUERY_BLOCK=max(16, triton.next_power_of_2(query_group)),
        PAGE_SIZE=page_size, PARTITION_SIZE=partition_size,
    )
    paged_decode_reduce_kernel[(num_q_heads, batch)](
        part_out, part_max, part_sum, context_lens, out,
        out.stride(0), out.stride(1), num_partitions,
        HEAD_DIM=head_dim, PARTITION_SIZE=partition_size, BLOCK_P=triton.next_power_of_2(num_partitions),
        num_warps=4,
    )
    return out


def _make_paged_cache(context_lens, num_kv_heads, head_dim, page_size, dtype, device):
    """Random K/V cache whose pages are scattered over the pool in a random order."""
    blocks_per_seq = [triton.cdiv(int(n), page_size) for n in context_lens]
    max_blocks = max(max(blocks_per_seq), 1)
    num_blocks = sum(blocks_per_seq) + 3  # a few unused blocks in the pool
    k_cache = torch.randn((num_blocks, page_size, num_kv_heads, head_dim), device=device, dtype=dtype)
    v_cache = torch.randn((num_blocks, page_size, num_kv_heads, head_dim), device=device, dtype=dtype)
    order = torch.randperm(num_blocks, device=device).to(torch.int32)
    block_table = torch.zeros((len(context_lens), max_blocks), device=device, dtype=torch.int32)
    used = 0
    for b, n in enumerate(blocks_per_seq):
        block_table[b, :n] = order[used:used + n]
        used += n
    return k_cache, v_cache, block_table


def _reference(q, k_cache, v_cache, block_table, context_lens):
    page_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = q.shape[1] // num_kv_heads
    outs = []
    for b, n in enumerate(context_lens.tolist()):
        tokens = torch.arange(n, device=q.device)
        blocks = block_table[b, tokens // page_size].long()
        k = k_cache[blocks, tokens % page_size].float().repeat_interleave(group, dim=1)  # [n, H_q, D]
        v = v_cache[blocks, tokens % page_size].float().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,nhd->hn", q[b].float(), k) / math.sqrt(q.shape[2])
        outs.append(torch.einsum("hn,nhd->hd", torch.softmax(scores, dim=-1), v))
    return torch.stack(outs)


def test_paged_decode_attention_gqa():
    torch.manual_seed(0)
    context_lens = torch.tensor([1, 37, 70, 64], device="cuda", dtype=torch.int32)
    k_cache, v_cache, block_table = _make_paged_cache(context_lens.tolist(), 2, 32, 16, torch.float16, "cuda")
    q = torch.randn((4, 6, 32), device="cuda", dtype=torch.float16)  # 3 query heads per KV head
    out = paged_decode_attention(q, k_cache, v_cache, block_table, context_lens, partition_size=32)
    ref = _reference(q, k_cache, v_cache, block_table, context_lens)
    torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)
    return out


def test_paged_decode_attention_mha():
    torch.manual_seed(0)
    context_lens = torch.tensor([45, 17], device="cuda", dtype=torch.int32)
    k_cache, v_cache, block_table = _make_paged_cache(context_lens.tolist(), 2, 64, 32, torch.float16, "cuda")
    q = torch.randn((2, 2, 64), device="cuda", dtype=torch.float16)
    out = paged_decode_attention(q, k_cache, v_cache, block_table, context_lens)
    ref = _reference(q, k_cache, v_cache, block_table, context_lens)
    torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2)
    return out


def flops_paged_decode_attention(q, k_cache, v_cache, block_table, context_lens, sm_scale=None, partition_size=512):
    return 4 * q.shape[1] * q.shape[2] * int(context_lens.sum())


def bench_paged_decode_attention():
    # 64 sequences of 1K-8K tokens, Llama-3-8B-like heads (32 query / 8 KV heads, D = 128), 16-token pages.
    torch.manual_seed(0)
    context_lens = torch.randint(1024, 8193, (64,), dtype=torch.int32)
    k_cache, v_cache, block_table = _make_paged_cache(context_lens.tolist(), 8, 128, 16, torch.float16, "cuda")
    q = torch.randn((64, 32, 128), device="cuda", dtype=torch.float16)
    paged_decode_attention(q, k_cache, v_cache, block_table, context_lens.to("cuda"))
