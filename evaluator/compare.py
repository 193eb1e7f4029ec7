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
# Tensors are weighed a slice of this many elements at a time: each slice's temporaries stay in the caches, where a
# whole large output's would not (a dozen passes, each faulting in a buffer of its own).
CHUNK_ELEMENTS = 1 << 20


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
SIDE_BY_SIDE = 4  # comparisons run at once at most (torch's kernels leave Python's lock)
HELD_BYTES = 2 << 30  # of loaded outputs held at once by comparisons side by side


def side_by_side(largest: int) -> int:
    """How many comparisons may run at once where the largest holds `largest` bytes of saved outputs: at most
    ``SIDE_BY_SIDE``, within ``HELD_BYTES``. Sizes are the files' own, so a forged large one only lowers it."""
    return max(1, min(SIDE_BY_SIDE, HELD_BYTES // max(1, largest)))


def output_size(path: Path) -> int:
    """A saved output's size in bytes (0 where there is none: its load says why)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


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
    if ref.numel() == 0:
        return
    tol = tolerance_for(str(ref.dtype).removeprefix("torch."), overrides)
    mask = undefined if undefined is not None and undefined.shape == ref.shape else None
    if ref.is_complex():  # weighed as its real and imaginary parts (a last dimension of 2), with its own tolerance
        ref, cand = torch.view_as_real(ref), torch.view_as_real(cand)
        mask = mask.unsqueeze(-1).expand(ref.shape) if mask is not None else None
    r, c = ref.reshape(-1), cand.reshape(-1)
    u = mask.reshape(-1) if mask is not None else None

    def piece(start: int):
        """One slice of the reference and the candidate, what the reference never wrote taken as its own."""
        rk, ck = r[start : start + CHUNK_ELEMENTS], c[start : start + CHUNK_ELEMENTS]
        if u is not None:
            ck = torch.where(u[start : start + CHUNK_ELEMENTS], rk, ck)
        return rk, ck

    starts = range(0, r.numel(), CHUNK_ELEMENTS)
    differing = [s for s in starts if not torch.equal(*piece(s))]  # bit for bit the same (NaN never equal: weighed)
    if not differing:
        return
    shape = tuple(ref.shape)
    if not ref.is_floating_point():
        exact = _Worst()
        for start in differing:
            rk, ck = piece(start)
            exact.add(start, rk, ck, rk != ck)
        yield Mismatch(where, exact.describe(shape, "values differ (exact match required)"))
        return
    # float32 arithmetic is exact enough for tolerances of 1e-5 and up, and halves the time and memory of float64
    fine = ref.dtype == torch.float64 or min(tol.rtol, tol.atol) < FLOAT32_ENOUGH
    work = torch.float64 if fine else torch.float32
    rms, finite_slices = _rms(r, work)
    nan_extra = nan_missing = 0
    infinities, beyond = _Worst(), _Worst()
    worst = 0.0
    for start in differing:
        rk, ck = piece(start)
        rw, cw = rk.to(work), ck.to(work)
        diff = (rw - cw).abs_()
        limit = torch.add(tol.atol * rms + tol.floor, rw.abs(), alpha=tol.rtol)
        if start in finite_slices:  # every difference is a number out of tolerance or a non-finite candidate
            within = diff.le(limit)
            if bool(within.all()):
                continue
            bad = within.logical_not_()
            if bool(torch.isfinite(cw[bad]).all()):
                worst = max(worst, float(diff[bad].max()))
                beyond.add(start, rk, ck, bad)
                continue
        finite = torch.isfinite(rw)  # NaN and infinities must sit where the reference has them
        r_nan, c_nan = torch.isnan(rw), torch.isnan(cw)
        nan_extra += int((c_nan & ~r_nan).sum())
        nan_missing += int((r_nan & ~c_nan).sum())
        r_inf, c_inf = torch.isinf(rw), torch.isinf(cw)
        if not torch.equal(r_inf, c_inf) or not torch.equal(rw[r_inf], cw[c_inf]):
            infinities.add(start, rk, ck, (r_inf | c_inf) & (rw != cw))
        bad = (diff > limit) & finite
        if bool(bad.any()):
            worst = max(worst, float(diff[bad].max()))
            beyond.add(start, rk, ck, bad)
    if nan_extra or nan_missing:
        yield Mismatch(
            where,
            f"NaN mismatch: {nan_extra} NaN where the reference has a number "
            f"(unwritten or invalid output?), {nan_missing} number where the reference has NaN",
        )
    elif infinities.count:
        yield Mismatch(where, infinities.describe(shape, "infinities differ"))
    elif beyond.count:
        detail = f"max |Δ| {worst:.3g} (rtol {tol.rtol:g}, atol {tol.atol:g}×rms {rms:.3g})"
        yield Mismatch(where, beyond.describe(shape, detail))


def _rms(r, work) -> tuple[float, set[int]]:
    """The root mean square of the reference's finite elements (accumulated in float64 a slice at a time), and the
    slices whose elements are all finite (by their first index)."""
    import torch

    squares, count, finite_slices = 0.0, 0, set()
    for start in range(0, r.numel(), CHUNK_ELEMENTS):
        rw = r[start : start + CHUNK_ELEMENTS].to(work)
        norm = float(torch.linalg.vector_norm(rw, dtype=torch.float64))
        if math.isfinite(norm):  # no NaN or infinity among them (float32 squares cannot overflow float64)
            finite_slices.add(start)
        else:
            rw = rw[torch.isfinite(rw)]
            norm = float(torch.linalg.vector_norm(rw, dtype=torch.float64))
        squares += norm**2
        count += rw.numel()
    return (math.sqrt(squares / count) if count else 0.0), finite_slices


class _Worst:
    """The elements found differing, slice by slice: how many, and where the one differing most is (weighed in
    float64 over those elements only: the whole tensors in float64 would cost a batch's caller much of its time)."""

    def __init__(self) -> None:
        self.count = 0
        self.diff = -1.0
        self.at = 0
        self.got = self.want = ""

    def add(self, start: int, rk, ck, bad) -> None:
        positions = bad.nonzero().flatten()
        if not positions.numel():
            return
        self.count += int(positions.numel())
        diff = (rk[positions].double() - ck[positions].double()).abs().nan_to_num(posinf=1e300)
        i = int(diff.argmax())
        if float(diff[i]) > self.diff:
            p = int(positions[i])
            self.diff, self.at = float(diff[i]), start + p
            self.got, self.want = _item(ck[p]), _item(rk[p])

    def describe(self, shape: tuple[int, ...], detail: str) -> str:
        at = ", ".join(map(str, _unravel(self.at, shape)))
        count = f"{self.count} of {math.prod(shape)} elements differ"
        return f"{count}; {detail}; at [{at}]: {self.got} vs reference {self.want}"


def _item(element) -> str:
    value = element.item()
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for dim in reversed(shape):
        out.append(flat % dim)
        flat //= dim
    return list(reversed(out))
