# geak-family: indexing
"""Embedding lookup ``out[..., :] = weight[ids[...], :]`` for token ids of any shape and a ``[V, D]`` table.

The ids are flattened to T tokens. Each program handles a BLOCK_T x BLOCK_D tile: it loads BLOCK_T ids with one
vector load, widens them to int64 (``id * stride`` overflows int32 for large vocabularies times wide rows), and
copies the matching row slices with a 2-D gather whose inner dimension is contiguous, so every row access is a
coalesced, vectorised burst. Tokens that repeat (padding, common words) simply re-read their row, usually from L2.
Bytes moved: T * D elements read from the table, the same written, plus the ids. The wrapper validates the id
range on the device by default (one small reduction and a sync); pass ``check_bounds=False`` for trusted ids.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _embedding_fwd_kernel(
    ids_ptr,
    weight_ptr,
    out_ptr,
    n_tokens,
    dim,
    stride_weight_row,
    stride_out_row,
    BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    token_mask = tokens < n_tokens
    mask = token_mask[:, None] & (cols[None, :] < dim)
    ids = tl.load(ids_ptr + tokens, mask=token_mask, other=0).to(tl.int64)
    rows = tl.load(weight_ptr + ids[:, None] * stride_weight_row + cols[None, :], mask=mask)
    tl.store(out_ptr + tokens.to(tl.int64)[:, None] * stride_out_row + cols[None, :], rows, mask=mask)


def embedding(ids: torch.Tensor, weight: torch.Tensor, check_bounds: bool = True) -> torch.Tensor:
    """Look up ``ids`` (int32/int64, any shape) in ``weight[V, D]``; returns ``[*ids.shape, D]`` in weight's dtype."""
    if weight.dim() != 2 or weight.stride(1) != 1:
        raise ValueError(f"embedding: weight must be 2-D with a contiguous last dim, got shape {tuple(weight.shape)}")
    if ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"embedding: ids must be int32 or int64, got {ids.dtype}")
    if not ids.is_contiguous():
        raise ValueError("embedding: ids must be contiguous")
    if ids.device != weight.device:
        raise ValueError(f"embedding: ids and weight on different devices ({ids.device} vs {weight.device})")
    vocab, dim = weight.shape
    out = torch.empty((*ids.shape, dim), device=weight.device, dtype=weight.dtype)
    n_tokens = ids.numel()
    if out.numel() == 0:
        return out
    if check_bounds and bool(((ids < 0) | (ids >= vocab)).any()):
        raise IndexError(f"embedding: token id out of range for a vocabulary of {vocab}")
    out_rows = out.view(n_tokens, dim)
    block_d = min(triton.next_power_of_2(dim), 512)
    block_t = max(1, 4096 // block_d)
    grid = (triton.cdiv(n_tokens, block_t), triton.cdiv(dim, block_d))
    _embedding_fwd_kernel[grid](
        ids.view(-1),
        weight,
        out_rows,
        n_tokens,
        dim,
        weight.stride(0),
        out_rows.stride(0),
        BLOCK_T=block_t,
        BLOCK_D=block_d,
        num_warps=8,
    )
    return out


def test_embedding():
    torch.manual_seed(0)
    results = {}
    weight = torch.randn(1000, 320, device="cuda", dtype=torch.float32)
    ids = torch.randint(0, 1000, (3, 41), device="cuda", dtype=torch.int64)
    ids[0, :4] = torch.tensor([0, 999, 5, 5])
    out = embedding(ids, weight)
    torch.testing.assert_close(out, torch.nn.functional.embedding(ids, weight), atol=0.0, rtol=0.0)
    results["fp32_int64_ids"] = out

    table16 = torch.randn(300, 900, device="cuda", dtype=torch.float16)[:, :768]
    ids32 = torch.randint(0, 300, (77,), device="cuda", dtype=torch.int32)
    out16 = embedding(ids32, table16)
    torch.testing.assert_close(out16, torch.nn.functional.embedding(ids32.long(), table16), atol=0.0, rtol=0.0)
    results["fp16_int32_ids_strided_table"] = out16

    try:
        embedding(torch.tensor([[1, -1]], device="cuda"), weight)
    except IndexError:
        pass
    else:
        raise AssertionError("negative token id was not rejected")
    return results


def bytes_embedding(ids, weight, check_bounds=True):
    """Traffic of one call: the ids, the rows actually gathered (read) and the output (written)."""
    rows = ids.numel() * weight.shape[1] * weight.element_size()
    return ids.numel() * ids.element_size() + 2 * rows


def bench_embedding():
    weight = torch.randn(128256, 4096, device="cuda", dtype=torch.bfloat16)
    ids = torch.randint(0, 128256, (16, 4096), device="cuda", dtype=torch.int64)
    embedding(ids, weight, check_bounds=False)
