"""What a change of a kernel's constexprs requires of its inputs that the original did not, read from the source
(``shared.unmasked_steps``): where loads or stores step over a dimension by a block without a mask, the dimension must
be a multiple of the step, so a step that does not divide the original's narrows the kernel's contract (`BLOCK_SIZE_K
32→128` on unmasked loads: K a multiple of 128, where the original takes any multiple of 32).

The check's probes try such a dimension at a multiple of the original's step only (``job.probe_variants``) where the
test's calls let its size change; a change they could not judge passes, and its reviewer reads the narrower contract
here instead."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol

from .shared.unmasked_steps import Step, source_steps


class KnobChange(Protocol):
    """One constexpr of a kernel, set from `old` to `new` (the search's ``ParamChange``, say)."""

    kernel: str
    param: str
    old: int
    new: int


def tightened_contracts(source: str, changes: Iterable[KnobChange]) -> list[str]:
    """A sentence per unmasked step of a changed kernel whose new step does not divide its old one: the multiple
    its dimension must now be, beside the original's."""
    by_kernel: dict[str, dict[str, tuple[int, int]]] = {}
    for change in changes:
        by_kernel.setdefault(change.kernel, {})[change.param] = (change.old, change.new)
    if not by_kernel:
        return []
    steps = source_steps(source)
    said = []
    for kernel, changed in by_kernel.items():
        for step in steps.get(kernel, []):
            sentence = _narrower(kernel, step, changed)
            if sentence is not None:
                said.append(sentence)
    return said


def _narrower(kernel: str, step: Step, changed: dict[str, tuple[int, int]]) -> str | None:
    mine = [b for b in step.blocks if b in changed]
    old = math.prod(changed[b][0] for b in mine)
    new = math.prod(changed[b][1] for b in mine)
    if not mine or min(old, new) <= 0 or old % new == 0:  # the new step divides the old: every old input still fits
        return None

    def multiple(at: int) -> str:
        return " × ".join(str(changed[b][at]) if b in changed else b for b in step.blocks)

    what = ", ".join(f"{b} {changed[b][0]}→{changed[b][1]}" for b in mine)
    dims = " and ".join(step.dims) or "the size its grid covers"
    return (
        f"{kernel}: {what} narrows what it accepts: its loads or stores at line {step.line} step over {dims} by "
        f"{' × '.join(step.blocks)} without a mask, so {dims} must now be a multiple of {multiple(1)}, where the "
        f"original takes any multiple of {multiple(0)}; other sizes read or write out of bounds"
    )
