"""What a reference's outputs pin down, from its runs on the same inputs (in one job, and in fresh processes).

Its second run in a job fills new allocations with the second poison (``shared/poison.py``): an element that holds
the first poison after the first run and not after the second was never written, so it is undefined and is left
out of the comparison element by element (`Masks`). An output that differs between runs in any other way is
nondeterministic (a race, duplicate scatter indices) and leaves the comparison as a whole (by its path).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .compare import UnreadableOutput, compare, load_output
from .options import EvalOptions
from .results import Mismatch
from .shared.poison import unwritten

Masks = dict[str, Any]  # path of a tensor in an output (its keys and indices) -> boolean mask of undefined elements


def unwritten_elements(first: Any, again: Any, path: str = "") -> Masks:
    """Masks of the elements that no run wrote, for each tensor of an output with some (same structure, shape and
    dtype in both runs; anything else is for the comparison to judge)."""
    return dict(_unwritten(first, again, path))


def _unwritten(first: Any, again: Any, path: str) -> Iterator[tuple[str, Any]]:
    import torch

    if isinstance(first, torch.Tensor):
        if isinstance(again, torch.Tensor) and again.shape == first.shape and again.dtype == first.dtype:
            mask = unwritten(first, again)
            if bool(mask.any()):
                yield path, mask
    elif isinstance(first, dict) and isinstance(again, dict):
        for key in (k for k in first if k in again):
            yield from _unwritten(first[key], again[key], f"{path}[{key!r}]")
    elif isinstance(first, (list, tuple)) and isinstance(again, (list, tuple)) and len(first) == len(again):
        for i, (a, b) in enumerate(zip(first, again, strict=True)):
            yield from _unwritten(a, b, f"{path}[{i}]")


def prefixed(masks: Masks, where: str) -> Masks:
    """`masks` keyed as `compare` names the tensors of an output compared at `where`."""
    return {where + path: mask for path, mask in masks.items()}


def two_runs(first: Path, again: Path, options: EvalOptions) -> tuple[Masks, tuple[str, ...]]:
    """One output of the reference's two runs in a job: its unwritten elements, and the paths where it differs
    otherwise (nondeterministic). Nothing when either file cannot be read (nothing to judge)."""
    try:
        later = load_output(again)  # the one most often missing (a test that did not run again)
        earlier = load_output(first)
    except UnreadableOutput:
        return {}, ()
    masks = unwritten_elements(earlier, later)
    differing = compare(earlier, later, "", options.tolerances, masks)
    return masks, tuple(dict.fromkeys(m.where for m in differing))


def differences(first: Path, second: Path, options: EvalOptions, masks: Masks, where: str = "") -> list[Mismatch]:
    """Where two saved outputs of the reference differ beyond its unwritten elements (nothing when either cannot
    be read: nothing to judge)."""
    try:
        later = load_output(second)
        earlier = load_output(first)
    except UnreadableOutput:
        return []
    return compare(earlier, later, where, options.tolerances, prefixed(masks, where))


def unwritten_summary(masks: Masks) -> str:
    """`3 of 4 element(s)`, over every tensor of an output."""
    undefined = sum(int(m.sum()) for m in masks.values())
    total = sum(m.numel() for m in masks.values())
    return f"{undefined} of {total} element(s)"
