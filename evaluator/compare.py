"""Candidate outputs against reference outputs, with tolerances per dtype (runs in the caller, on CPU tensors
loaded with ``weights_only=True``: the candidate's code never touches the comparison).

An element passes when ``|cand - ref| <= atol * rms(ref) + rtol * |ref| + floor``: the absolute term scales with
the tensor's own magnitude, so sums and GEMM outputs are judged on their scale and probabilities on theirs. NaN must
sit exactly where the reference has NaN, infinities must match, shapes and dtypes must be equal. Integers, booleans
and strings must be equal. Bit-identical tensors pass without being weighed; floats are weighed in float32
arithmetic where the tolerance is 1e-5 or looser (the RMS always accumulated in float64). Elements the reference
never wrote (`undefined`: a mask per output path, ``shared/poison.py``) are not compared.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .results import Mismatch


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float  # relative to the reference tensor's RMS
    floor: float  # absolute, for all-zero references


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(1e-7, 1e-7, 1e-12),
    "float32": Tolerance(1e-3, 1e-3, 1e-6),  # admits TF32 dots and reordered reductions
    "float16": Tolerance(5e-3, 5e-3, 1e-4),
    "bfloat16": Tolerance(2e-2, 2e-2, 1e-3),
    "float8": Tolerance(0.26, 0.26, 1e-2),  # one fp8 step
}
EXACT = Tolerance(0.0, 0.0, 0.0)
FLOAT32_ENOUGH = 1e-5  # tolerances at least this loose are weighed in float32 arithmetic


def tolerance_for(dtype: str, overrides: dict[str, Tolerance] | None = None) -> Tolerance:
    table = {**DEFAULT_TOLERANCES, **(overrides or {})}
    if dtype in table:
        return table[dtype]
    if dtype.startswith("float8"):
        return table["float8"]
    if dtype.startswith(("float", "complex")):
        return table["float32"]
    return EXACT


def parse_tolerance_overrides(items: list[str]) -> dict[str, Tolerance]:
    """`["float32=1e-4,1e-4", "bfloat16=3e-2,3e-2"]` → {dtype: Tolerance(rtol, atol)}. Raises ValueError for an
    unknown dtype name or a negative, infinite or missing value."""
    out: dict[str, Tolerance] = {}
    for item in items:
        try:
            dtype, values = item.split("=", 1)
            rtol, atol = (float(v) for v in values.split(","))
        except ValueError:
            raise ValueError(f"bad tolerance {item!r}: expected DTYPE=RTOL,ATOL (e.g. float32=1e-4,1e-4)") from None
        dtype = dtype.strip()
        if dtype not in DEFAULT_TOLERANCES and not re.fullmatch(r"float8_\w+|complex(32|64|128)", dtype):
            raise ValueError(
                f"bad tolerance {item!r}: {dtype!r} is not a floating-point dtype "
                f"({', '.join(DEFAULT_TOLERANCES)}, float8_*, complex*; integers are compared exactly)"
            )
        if not all(math.isfinite(v) and v >= 0 for v in (rtol, atol)):
            raise ValueError(f"bad tolerance {item!r}: RTOL and ATOL must be finite and not negative")
        out[dtype] = Tolerance(rtol, atol, tolerance_for(dtype).floor)
    return out


MAX_OUTPUT_BYTES = 8 << 30


class UnreadableOutput(ValueError):
    """An output file that is missing, not a plain file, too large, or not a weights-only torch file."""


def load_output(path: Path) -> Any:
    """Load an output file a job wrote, trusting nothing about it: it must be a regular file (a symbolic link could
    point at the reference's outputs) of sane size, loadable with ``weights_only=True``."""
    import os
    import stat

    import torch

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise UnreadableOutput(f"{Path(path).name}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_OUTPUT_BYTES:
            raise UnreadableOutput(f"{Path(path).name}: not a plain output file of sane size")
        try:
            return torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # any malformed or hostile content
            raise UnreadableOutput(f"{Path(path).name}: cannot be read ({type(e).__name__})") from None


def compare(
    ref: Any,
    cand: Any,
    where: str,
    overrides: dict[str, Tolerance] | None = None,
    undefined: Mapping[str, Any] | None = None,
) -> list[Mismatch]:
    """Where `cand` differs from `ref`. `undefined`: boolean masks of the elements not to compare, by the path
    of their tensor (`where` followed by its keys and indices, as mismatches name it)."""
    return list(_compare(ref, cand, where, overrides, undefined or {}))


def _compare(ref: Any, cand: Any, where: str, overrides, undefined: Mapping[str, Any]) -> Iterator[Mismatch]:
    import torch

    if isinstance(ref, torch.Tensor):
        if not isinstance(cand, torch.Tensor):
            yield Mismatch(where, f"expected a tensor, got {type(cand).__name__}")
            return
        yield from _compare_tensors(ref, cand, where, overrides, undefined.get(where))
    elif isinstance(ref, dict):
        if not isinstance(cand, dict):
            yield Mismatch(where, f"expected a dict, got {type(cand).__name__}")
            return
        missing, extra = set(ref) - set(cand), set(cand) - set(ref)
        if missing or extra:
            yield Mismatch(where, f"keys differ: missing {sorted(missing)}, unexpected {sorted(extra)}")
        for key in ref:
            if key in cand:
                yield from _compare(ref[key], cand[key], f"{where}[{key!r}]", overrides, undefined)
    elif isinstance(ref, (list, tuple)):
        if not isinstance(cand, (list, tuple)) or len(ref) != len(cand):
            got = f"{type(cand).__name__} of {len(cand)}" if isinstance(cand, (list, tuple)) else type(cand).__name__
            yield Mismatch(where, f"expected a {type(ref).__name__} of {len(ref)}, got {got}")
            return
        for i, (r, c) in enumerate(zip(ref, cand, strict=True)):
            yield from _compare(r, c, f"{where}[{i}]", overrides, undefined)
    elif isinstance(ref, float) and isinstance(cand, (int, float)) and not isinstance(cand, bool):
        if not (math.isclose(ref, cand, rel_tol=1e-5, abs_tol=1e-8) or (math.isnan(ref) and math.isnan(cand))):
            yield Mismatch(where, f"{cand!r} != {ref!r}")
    elif ref != cand or type(ref) is not type(cand):
        yield Mismatch(where, f"{_short(cand)} != {_short(ref)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def _compare_tensors(ref, cand, where: str, overrides, undefined) -> Iterator[Mismatch]:
    import torch

    if ref.shape != cand.shape:
        yield Mismatch(where, f"shape {tuple(cand.shape)} != reference {tuple(ref.shape)}")
        return
    if ref.dtype != cand.dtype:
        yield Mismatch(where, f"dtype {cand.dtype} != reference {ref.dtype}")
        return
    if undefined is not None and undefined.shape == ref.shape:  # what the reference never wrote: not compared
        cand = torch.where(undefined, ref, cand)
    if ref.numel() == 0 or torch.equal(ref, cand):  # bit for bit the same (NaN is never equal: weighed below)
        return
    dtype = str(ref.dtype).removeprefix("torch.")
    tol = tolerance_for(dtype, overrides)
    if ref.is_complex():  # weighed as its real and imaginary parts (a last dimension of 2), with its own tolerance
        ref, cand = torch.view_as_real(ref), torch.view_as_real(cand)
    if not ref.is_floating_point():
        bad = ref != cand
        if bool(bad.any()):
            yield Mismatch(where, _describe(ref, cand, bad, "values differ (exact match required)"))
        return
    # float32 arithmetic is exact enough for tolerances of 1e-5 and up, and halves the time and memory of float64
    # (a 268 MB output took 8.8 s to weigh in float64 on two cores)
    fine = ref.dtype == torch.float64 or min(tol.rtol, tol.atol) < FLOAT32_ENOUGH
    work = torch.float64 if fine else torch.float32
    r, c = ref.to(work), cand.to(work)
    finite = torch.isfinite(r)
    special = not (bool(finite.all()) and bool(torch.isfinite(c).all()))
    if special:  # NaN and infinities must sit where the reference has them
        r_nan, c_nan = torch.isnan(r), torch.isnan(c)
        if not torch.equal(r_nan, c_nan):
            extra = int((c_nan & ~r_nan).sum())
            missing = int((r_nan & ~c_nan).sum())
            yield Mismatch(
                where,
                f"NaN mismatch: {extra} NaN where the reference has a number "
                f"(unwritten or invalid output?), {missing} number where the reference has NaN",
            )
            return
        r_inf, c_inf = torch.isinf(r), torch.isinf(c)
        if not torch.equal(r_inf, c_inf) or not torch.equal(r[r_inf], c[c_inf]):
            yield Mismatch(where, _describe(ref, cand, (r_inf | c_inf) & (r != c), "infinities differ"))
            return
    rf = r[finite] if special else r
    rms = float(torch.linalg.vector_norm(rf, dtype=torch.float64)) / math.sqrt(rf.numel()) if rf.numel() else 0.0
    diff = (r - c).abs_()
    bad = diff > r.abs().mul_(tol.rtol).add_(tol.atol * rms + tol.floor)
    if special:
        bad &= finite
    if bool(bad.any()):
        worst = float(diff[bad].max())
        yield Mismatch(
            where,
            _describe(ref, cand, bad, f"max |Δ| {worst:.3g} (rtol {tol.rtol:g}, atol {tol.atol:g}×rms {rms:.3g})"),
        )


def _describe(ref, cand, bad, detail: str) -> str:
    """Where the worst of the `bad` elements is, weighed in float64 over those elements only (the whole tensors in
    float64 took 17 s of a `geak eval` caller's 250 s on an H200)."""
    positions = bad.flatten().nonzero().flatten()
    diff = (ref.flatten()[positions].double() - cand.flatten()[positions].double()).abs().nan_to_num(posinf=1e300)
    flat = int(positions[int(diff.argmax())])
    count = int(positions.numel())
    index = tuple(int(i) for i in _unravel(flat, tuple(ref.shape)))
    at = f"[{', '.join(map(str, index))}]"
    got, want = _item(cand, index), _item(ref, index)
    return f"{count} of {ref.numel()} elements differ; {detail}; at {at}: {got} vs reference {want}"


def _item(t, index: tuple[int, ...]) -> str:
    value = t[index].item() if index else t.item()
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(flat % dim)
        flat //= dim
    return list(reversed(out))
