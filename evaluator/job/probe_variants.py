"""Other valid inputs for a captured call than fresh values at the tested shapes: other sizes (shape variants) and other
value ranges (value variants). The reference is the oracle: what it refuses, fails on or cannot judge is skipped by the
trusted side, never held against a candidate; this module only proposes.

Shape variants change the call's sizes consistently: each distinct size of 2 or more that its floating and boolean
tensors have (a "symbol") changes everywhere it appears, and so does an integer argument equal to it or to a tensor's
element count (unless its parameter is named like a tile: `BLOCK_SIZE`, `num_warps`...). A size that an integer tensor
has, or that its values may depend on (its largest value, that plus one, its sum: index ranges and offsets), stays as it
was; no size is shrunk to an integer tensor's largest value or below. Variants: each size that a kernel of the reference
steps over in tiles of a block without a mask to the next odd multiple of that block (a size the reference handles,
which a kernel that needs a multiple of a larger block does not), every size one above, every size one below, a wide row
(the innermost size of the largest tensor past 1024 and past twice itself, the other sizes small), every size small (3,
or one above an integer tensor's largest value; only sizes at least twice that shrink to it). "One above" is the nearest
size Triton specializes alike (``alike``): 16 above a multiple of 16, so that on a GPU the kernels need not compile
again (a wide row often needs a wider block, and does). A size stepped over without a mask moves by whole blocks in
every variant: at any other size the reference reads out of bounds and is no oracle.

Value variants draw the floating tensors at a magnitude times their original scale, all positive, or all negative (a
tensor that was non-negative stays so).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .capture import FloatDraw, RecordedCall

SMALL = 3  # a small size, not a multiple of any tile
WIDE = 1024  # a wide row is wider than this: many kernels handle up to 1024 columns in one block
TILE_NAME = re.compile(r"block|tile|warp|stage|group|chunk|split", re.IGNORECASE)


@dataclass(frozen=True)
class Variant:
    """A probe to draw: `spec` (the call's, or one of other shapes and scalars) and how its floats are drawn."""

    kind: str  # "shape" | "value"
    label: str  # what changed, e.g. "sizes one above (781→782, 1823→1824)"
    spec: dict[str, Any]
    floats: FloatDraw = field(default_factory=FloatDraw)


def shape_variants(call: RecordedCall, fn: Callable | None, steps: Iterable[tuple[int, int]] = ()) -> list[Variant]:
    """The call's shape variants, most telling first; none when it has no size to change. `fn`: the wrapper (its
    parameter names tell tiles from sizes). `steps`: (size, block) of the reference's kernels' unmasked steps in
    its tests (``job.step_facts``)."""
    tensors = list(_tensors(call.spec, (*call.args, *(call.kwargs.get(k) for k in call.spec["kwargs"]))))
    sizes = sorted({d for spec, _ in tensors if _resizable(spec) for d in spec["shape"] if d >= 2})
    fixed = _fixed_sizes(tensors)
    free = [s for s in sizes if s not in fixed]
    if not free:
        return []
    floor = max((_int_range(original)[0] for spec, original in tensors if not _resizable(spec)), default=-1)
    blocks = _stepped_blocks(free, steps)

    def moved(size: int, to: int, up: bool) -> int:
        """`to`, or for a size the reference steps over without a mask, the nearest multiple of its block that way:
        elsewhere the reference reads out of bounds, and could judge a candidate only by chance."""
        block = blocks.get(size)
        if block is None:
            return alike(to, size, up)
        return -(-to // block) * block if up else to // block * block

    small = {s: moved(s, max(SMALL, floor + 1), up=True) for s in free}  # never below what an index may reach
    shrunk = {s: small[s] for s in free if 2 * small[s] <= s}
    below = {s: moved(s, s - 1, up=False) for s in free}
    wide = _innermost_of_largest(tensors, free)
    plans = [
        ("multiples of the reference's unmasked blocks only", _odd_multiples(blocks)),
        ("sizes one above", {s: moved(s, s + 1, up=True) for s in free}),
        ("sizes one below", {s: below[s] for s in free if below[s] > max(floor, 1)}),
        ("a wide row", {**shrunk, wide: moved(wide, max(2 * wide, WIDE) + 1, up=True)} if wide else {}),
        ("small sizes", shrunk),
    ]
    tied = _tied_scalars(call, fn)
    variants, seen = [], set()
    for label, mapping in plans:
        mapping = {old: new for old, new in mapping.items() if new != old}
        key = tuple(sorted(mapping.items()))
        if not mapping or key in seen:
            continue
        seen.add(key)
        changes = ", ".join(f"{old}→{new}" for old, new in sorted(mapping.items()))
        spec = _resized(call.spec, mapping, _numels(tensors, mapping), tied)
        variants.append(Variant("shape", f"{label} ({changes})", spec))
    return variants


def _stepped_blocks(free: list[int], steps: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Each free size that a kernel steps over in tiles without a mask, with the least common multiple of its blocks."""
    blocks: dict[int, int] = {}
    for size, block in steps:
        if size in free:
            blocks[size] = math.lcm(blocks.get(size, 1), block)
    return blocks


def _odd_multiples(blocks: dict[int, int]) -> dict[int, int]:
    """Each size stepped over in `blocks` without a mask, to the next odd multiple of its block above it: a size the
    reference handles, which a kernel that needs a multiple of twice the block or more does not (K = 128 stepped by
    32: 160, not a multiple of 64 or 128)."""
    found = {}
    for size, block in blocks.items():
        times = size // block + 1
        found[size] = block * (times + 1 - times % 2)
    return found


def alike(size: int, like: int, up: bool) -> int:
    """`size`, moved (up or down) to the nearest that Triton specializes as it does `like` (a multiple of 16, or
    not one and not 1), so that the kernels need not compile again for it on a GPU: one above a multiple of 16 is
    16 above it."""
    if like % 16 == 0:
        return (size + 15) // 16 * 16 if up else size // 16 * 16
    while size % 16 == 0 or size == 1:
        size += 1 if up else -1
    return size


def value_signs(call: RecordedCall) -> tuple[int, ...]:
    """The signs of the call's value variants: positive, and negative unless every floating tensor was
    non-negative; none without a floating tensor."""
    floats = [spec for spec, _ in _tensors(call.spec, ()) if spec["dtype"].startswith(("float", "bfloat"))]
    if not floats:
        return ()
    return (1,) if all(spec.get("nonneg", True) for spec in floats) else (1, -1)


def value_variant(call: RecordedCall, sign: int, magnitude: float) -> Variant:
    """The call's floats drawn at `magnitude` times their scale, all of `sign` (non-negative ones stay so)."""
    word = "positive" if sign > 0 else "negative"
    return Variant("value", f"{word} values {magnitude:g}× larger", call.spec, FloatDraw(magnitude, sign))


def footprint(spec: dict[str, Any]) -> str:
    """What makes two calls' probes at other sizes the same probe: their shapes, strides, dtypes and other
    arguments (not the scale their values are drawn at)."""
    drawn = ("scale", "nonneg", "min", "max")

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in drawn}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return json.dumps(strip(spec), sort_keys=True, default=str)


def element_count(spec: dict[str, Any]) -> int:
    """Elements of the tensors a call's spec describes (what a probe costs, roughly)."""
    return sum(math.prod(s["shape"]) for s, _ in _tensors(spec, ()))


# ----------------------------------------------------------------------------------------- sizes


def _tensors(spec: dict[str, Any], originals: tuple) -> Iterator[tuple[dict[str, Any], Any]]:
    """Each tensor's spec, with its original value where the call kept one (None otherwise)."""
    if "args" in spec:
        specs = [*spec["args"], *spec["kwargs"].values()]
        yield from _walk(specs, _padded(originals, len(specs)))
        return
    yield from _walk([spec], (originals,))


def _walk(specs: list[dict[str, Any]], originals: tuple) -> Iterator[tuple[dict[str, Any], Any]]:
    for spec, original in zip(specs, originals, strict=True):
        kind = spec["t"]
        if kind == "tensor":
            yield spec, original
        elif kind in ("list", "tuple"):
            yield from _walk(spec["items"], _padded(tuple(original or ()), len(spec["items"])))
        elif kind == "dict":
            items = spec["items"]
            yield from _walk(list(items.values()), tuple((original or {}).get(k) for k in items))


def _padded(values: tuple, n: int) -> tuple:
    return tuple(values)[:n] + (None,) * (n - len(values))


def _resizable(spec: dict[str, Any]) -> bool:
    """Floating and boolean tensors are drawn anew at any shape; integer ones keep their values, so their shape."""
    return spec["dtype"].startswith(("float", "bfloat", "complex")) or spec["dtype"] == "bool"


def _int_range(original: Any) -> tuple[int, int]:
    """(largest, sum) of an integer tensor's values; (-1, 0) when empty or not kept."""
    if original is None or not hasattr(original, "numel") or not original.numel():
        return -1, 0
    values = original.detach().reshape(-1).to("cpu").long()
    return int(values.max()), int(values.sum())


def _fixed_sizes(tensors: list[tuple[dict[str, Any], Any]]) -> set[int]:
    """Sizes an integer tensor has, or that its values may index or count (largest, largest + 1, sum)."""
    fixed: set[int] = set()
    for spec, original in tensors:
        if _resizable(spec):
            continue
        fixed.update(spec["shape"])
        high, total = _int_range(original)
        if high >= 0:
            fixed.update((high, high + 1, total))
        if original is None:  # values unknown: every size stays
            return {d for s, _ in tensors for d in s["shape"]}
    return fixed


def _innermost_of_largest(tensors: list[tuple[dict[str, Any], Any]], free: list[int]) -> int | None:
    """The innermost (last) size of the largest resizable tensor, if it may change: the row a kernel tiles."""
    shaped = [spec["shape"] for spec, _ in tensors if _resizable(spec) and spec["shape"]]
    if not shaped:
        return None
    last = max(shaped, key=math.prod)[-1]
    return last if last in free else None


def _numels(tensors: list[tuple[dict[str, Any], Any]], mapping: dict[int, int]) -> dict[int, int]:
    """Each resizable tensor's element count before -> after (an integer argument equal to one follows it)."""
    counts = {}
    for spec, _ in tensors:
        if _resizable(spec) and len(spec["shape"]) > 1:
            before = math.prod(spec["shape"])
            if before >= 2:
                counts.setdefault(before, math.prod(mapping.get(d, d) for d in spec["shape"]))
    return counts


def _tied_scalars(call: RecordedCall, fn: Callable | None) -> Callable[[tuple[str, ...]], bool]:
    """Whether an integer argument (by its position: ("args", 2) or ("kwargs", "n")) follows the sizes: yes
    unless its parameter is named like a tile or a launch setting."""
    names: dict[tuple[Any, ...], str] = {("kwargs", k): k for k in call.spec["kwargs"]}
    try:
        parameters = list(inspect.signature(fn).parameters.values()) if fn is not None else []
    except (TypeError, ValueError):
        parameters = []
    for i, parameter in enumerate(parameters[: len(call.spec["args"])]):
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names[("args", i)] = parameter.name
    return lambda where: not TILE_NAME.search(names.get(where[:2], ""))


def _resized(
    spec: dict[str, Any], mapping: dict[int, int], numels: dict[int, int], tied: Callable[[tuple], bool]
) -> dict[str, Any]:
    """The call's spec with its sizes mapped (strides dense, in the original's order of dimensions)."""

    def scalar(value: Any, where: tuple) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not tied(where):
            return value
        return mapping.get(value, numels.get(value, value))

    def walk(s: dict[str, Any], where: tuple) -> dict[str, Any]:
        kind = s["t"]
        if kind == "value":
            return {**s, "v": scalar(s["v"], where)}
        if kind in ("list", "tuple"):
            return {**s, "items": [walk(x, (*where, i)) for i, x in enumerate(s["items"])]}
        if kind == "dict":
            return {**s, "items": {k: walk(x, (*where, k)) for k, x in s["items"].items()}}
        if kind != "tensor" or not _resizable(s):
            return s
        shape = [mapping.get(d, d) for d in s["shape"]]
        return {**s, "shape": shape, "stride": dense_strides(shape, s["stride"])}

    return {
        "args": [walk(s, ("args", i)) for i, s in enumerate(spec["args"])],
        "kwargs": {k: walk(s, ("kwargs", k)) for k, s in spec["kwargs"].items()},
    }


def dense_strides(shape: list[int], like: list[int]) -> list[int]:
    """Strides of a dense tensor of `shape` whose dimensions lie in memory in the order of strides `like` (a
    transposed tensor stays transposed; a dimension of stride 0 stays broadcast)."""
    order = sorted(range(len(shape)), key=lambda d: (like[d], -d))  # innermost first
    strides, step = [0] * len(shape), 1
    for d in order:
        if like[d] == 0 and shape[d] > 1:
            continue
        strides[d] = step
        step *= max(shape[d], 1)
    return strides
