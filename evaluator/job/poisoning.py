"""Poisoned allocations, so that an output a kernel never wrote cannot hold a right answer by chance."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import torch

from ..shared.poison import second_poison


def set_poisoning(enabled: bool) -> None:
    """Fill new allocations (torch.empty*) with NaN / the largest integer so an unwritten output cannot pass.

    Deterministic mode is set through the call `torch.use_deterministic_algorithms` makes: recent versions of that
    function also import torch._inductor (over a second, in every job process) only to flag torch.compile."""
    fast = getattr(torch._C, "_set_deterministic_algorithms", None)
    if fast is not None:
        fast(enabled, warn_only=True)
    else:  # older or newer torch without the private entry point: the public call (slower first time)
        torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = enabled


_ALLOCATORS = (
    (torch, "empty"),
    (torch, "empty_like"),
    (torch, "empty_strided"),
    (torch.Tensor, "new_empty"),
    (torch.Tensor, "new_empty_strided"),
)


@contextlib.contextmanager
def second_poison_filled():
    """Within it, what `torch.empty*` returns holds the second poison (``shared/poison.py``): a reference's second
    run on the same inputs, so that what its kernels never write differs between its two runs and is known
    undefined. The allocators are replaced where code looks them up (`torch.empty(...)`), not in a torch function
    mode: a mode would sit between user code and the CPU interpreter's device shims, and slow every torch call."""
    originals = [(owner, name, getattr(owner, name), name in vars(owner)) for owner, name in _ALLOCATORS]

    def filled(allocate: Callable[..., Any]) -> Callable[..., Any]:
        def allocate_filled(*args: Any, **kwargs: Any) -> Any:
            tensor = allocate(*args, **kwargs)
            if isinstance(tensor, torch.Tensor) and tensor.numel():
                tensor.fill_(second_poison(tensor.dtype))
            return tensor

        return functools.wraps(allocate)(allocate_filled)

    for owner, name, allocate, _ in originals:
        setattr(owner, name, filled(allocate))
    try:
        yield
    finally:
        for owner, name, allocate, own in originals:
            if own:
                setattr(owner, name, allocate)
            else:  # inherited (`Tensor.new_empty` is `TensorBase`'s)
                delattr(owner, name)
