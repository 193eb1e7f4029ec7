"""The two poisons of new allocations, as both sides know them: a job fills what `torch.empty*` returns with the
first poison (NaN for floats, the largest value for integers, True for booleans: PyTorch's deterministic fill), and
the reference's second run on the same inputs with the second (the largest finite float, the smallest integer,
False). An output element that holds the first poison after the first run and the second after the second was
written by nothing: it is undefined, and the caller leaves it out of the comparison (``unwritten``).

torch is imported inside the functions: the caller reads outputs with it, the job runs them.
"""

from __future__ import annotations

from typing import Any


def second_poison(dtype: Any) -> float | int | bool:
    """What the second run's new allocations of `dtype` hold."""
    import torch

    if dtype == torch.bool:
        return False
    if dtype.is_floating_point or dtype.is_complex:
        return torch.finfo(dtype).max
    return torch.iinfo(dtype).min


def unwritten(first: Any, again: Any) -> Any:
    """The elements of an output (two CPU tensors of one shape and dtype, from the two runs) that hold the first
    poison in the first run and no longer do in the second (floats: NaN, then a number; integers: the largest value,
    then the smallest; booleans: True, then False): a boolean tensor of their shape."""
    import torch

    if first.dtype == torch.bool:
        return first & ~again
    if first.dtype.is_floating_point or first.dtype.is_complex:
        return torch.isnan(first) & ~torch.isnan(again)
    info = torch.iinfo(first.dtype)
    return (first == info.max) & (again == info.min)
