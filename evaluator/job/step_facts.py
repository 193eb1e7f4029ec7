"""The sizes a launch steps over in tiles of a block without a mask (``shared.unmasked_steps``), with the block's value:
a reference's probes then try sizes that are multiples of its own blocks only, which it handles and a candidate that
needs a multiple of a larger block does not."""

from __future__ import annotations

import inspect
import math
from typing import Any

from ..shared.unmasked_steps import Step, source_steps
from .launch_modes import STATE

_STEPS: dict[int, tuple[Any, inspect.Signature | None, list[Step]]] = {}  # by id of the kernel's Python function


def note(kernel: Any, args: tuple, kwargs: dict[str, Any]) -> None:
    """Add the (dimension, step: the product of its blocks) values of `kernel`'s unmasked steps at this launch to
    ``STATE.steps``: those where the tested dimension is a multiple of the step (the kernel is right there)."""
    fn = _python_function(kernel)
    if fn is None:
        return
    signature, steps = _analysed(fn)
    if signature is None or not steps:
        return
    try:
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    except TypeError:
        return
    values = bound.arguments
    for step in steps:
        blocks = [values.get(b) for b in step.blocks]
        if not all(map(_positive_int, blocks)):
            continue
        block = math.prod(blocks)
        for dim in step.dims:
            size = values.get(dim)
            if _positive_int(size) and size % block == 0:
                STATE.steps.add((size, block))


def _python_function(kernel: Any) -> Any:
    fn = getattr(kernel, "fn", None)
    return fn if inspect.isfunction(fn) else None


def _analysed(fn: Any) -> tuple[inspect.Signature | None, list[Step]]:
    """The function's signature and steps, read once per function (the function is kept, so its id stays its own)."""
    known = _STEPS.get(id(fn))
    if known is None or known[0] is not fn:
        try:
            source, signature = inspect.getsource(fn), inspect.signature(fn)
        except (OSError, TypeError, ValueError):
            source, signature = "", None
        known = (fn, signature, source_steps(source).get(fn.__name__, []))
        _STEPS[id(fn)] = known
    return known[1], known[2]


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
