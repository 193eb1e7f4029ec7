"""Worker-side capture of wrapper calls: what the tests and benches call, with which arguments.

Captured calls are replayed with fresh random inputs (correctness beyond the given test) and timed (perf).
Only outermost calls are recorded, so a wrapper that calls another wrapper counts once.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

_DEPTH = threading.local()
RECORDED_CALLS = 64  # the wrapper calls a recorder keeps at most


@dataclass
class RecordedCall:
    """A wrapper call with its arguments; `flops`: one call's work where the file's benchmark declares it;
    `launched`: the Triton launches it made (None: not counted, or it did not return)."""

    wrapper: str
    spec: dict[str, Any]
    signature: str
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    flops: int | None = None
    launched: int | None = None


class CallRecorder:
    """Replaces a module's wrapper functions by recording proxies. `keep_args` keeps cloned arguments for replay
    (True: all of them; "integers": only the integer and boolean tensors of the first call of each signature, which
    fresh probes permute). `limit`: the calls recorded at most (0: none). `describe_values`: the first call of each
    signature (``unique_calls``: those fresh probes are drawn for) also describes its tensors' values (``arg_spec``),
    each read back from the device; a timing's capture, which draws no probe, need not. `launches()`: the Triton
    launches made so far, by which each recorded call counts its own (``launched``)."""

    def __init__(
        self,
        module: ModuleType,
        wrappers: list[str],
        *,
        keep_args: bool | str = False,
        limit: int = RECORDED_CALLS,
        describe_values: bool = True,
        launches: Callable[[], int] | None = None,
    ):
        self.module = module
        self.keep_args = keep_args
        self.limit = limit
        self.describe_values = describe_values
        self.launches = launches
        self.calls: list[RecordedCall] = []
        self.recording = False
        self.originals: dict[str, Callable] = {}
        for name in wrappers:  # "fn", or "Class.apply" (an autograd.Function's entry point)
            owner_name, _, attr = name.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            fn = getattr(owner, attr, None)
            if owner is not None and callable(fn) and not isinstance(fn, type):
                self.originals[name] = fn
                setattr(owner, attr, self._proxy(name, fn))

    def _proxy(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def proxy(*args, **kwargs):
            depth = getattr(_DEPTH, "value", 0)
            call = None
            if self.recording and depth == 0 and len(self.calls) < self.limit:
                call = self._record(name, args, kwargs)
            before = self.launches() if call is not None and self.launches is not None else None
            _DEPTH.value = depth + 1
            try:
                out = fn(*args, **kwargs)
                if before is not None:
                    call.launched = self.launches() - before
                return out
            except BaseException:  # a call that raised (a test of the wrapper's own checks) is no call to replay
                if call is not None:
                    self.calls.remove(call)
                raise
            finally:
                _DEPTH.value = depth

        return proxy

    def _record(self, name: str, args: tuple, kwargs: dict) -> RecordedCall:
        called = signature(name, args, kwargs)
        first = all(c.signature != called for c in self.calls)
        values = self.describe_values and first
        spec = {
            "args": [arg_spec(a, values) for a in args],
            "kwargs": {k: arg_spec(v, values) for k, v in kwargs.items()},
        }
        call = RecordedCall(name, spec, called)
        if self.keep_args is True or (self.keep_args == "integers" and first):
            only_integers = self.keep_args == "integers"
            call.args = tuple(_clone(a, only_integers) for a in args)
            call.kwargs = {k: _clone(v, only_integers) for k, v in kwargs.items()}
        self.calls.append(call)
        return call

    def unique_calls(self, limit: int) -> list[RecordedCall]:
        return unique_calls(self.calls, limit)


def unique_calls(calls: list[RecordedCall], limit: int) -> list[RecordedCall]:
    """The first call of each signature, at most `limit`."""
    seen, out = set(), []
    for call in calls:
        if call.signature not in seen:
            seen.add(call.signature)
            out.append(call)
    return out[:limit]


def _clone(value: Any, only_integers: bool = False) -> Any:
    """A detached copy of the tensors in `value`; with `only_integers`, floating tensors become None (a probe
    draws those anew and needs only the integer ones)."""
    if isinstance(value, torch.Tensor):
        if only_integers and (value.is_floating_point() or value.is_complex()):
            return None
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return (
            [_clone(v, only_integers) for v in value]
            if isinstance(value, list)
            else tuple(_clone(v, only_integers) for v in value)
        )
    if isinstance(value, dict):
        return {k: _clone(v, only_integers) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------------------- specs

_SHORT = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.int16: "i16",
    torch.bool: "bool",
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def short_dtype(dtype: torch.dtype) -> str:
    return _SHORT.get(dtype, dtype_name(dtype))


def signature(name: str, args: tuple, kwargs: dict) -> str:
    def show(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"{short_dtype(v.dtype)}[{','.join(map(str, v.shape))}]"
        if isinstance(v, (list, tuple)):
            return "(" + ", ".join(show(x) for x in v) + ")"
        if isinstance(v, (int, float, bool, str)) or v is None:
            return repr(v)
        if isinstance(v, torch.dtype):
            return short_dtype(v)
        return type(v).__name__

    parts = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def arg_spec(value: Any, values: bool = True) -> dict[str, Any]:
    """A JSON description of an argument, enough to draw fresh values of the same kind; without `values`, a tensor's
    layout only (no range, sign or scale, each of which waits for the device)."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        spec: dict[str, Any] = {
            "t": "tensor",
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "dtype": dtype_name(t.dtype),
            "contiguous": t.is_contiguous(),
        }
        if not values:
            return spec
        if t.numel() and not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool:
            spec["min"], spec["max"] = int(t.min()), int(t.max())
        elif t.numel() and t.is_floating_point():
            finite = t[torch.isfinite(t)].float()
            spec["nonneg"] = bool(finite.numel() and finite.min() >= 0)
            spec["scale"] = float(finite.abs().max()) if finite.numel() else 1.0
        return spec
    if isinstance(value, (list, tuple)):
        return {"t": type(value).__name__, "items": [arg_spec(v, values) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"t": "dict", "items": {k: arg_spec(v, values) for k, v in value.items()}}
    if isinstance(value, torch.dtype):
        return {"t": "dtype", "v": dtype_name(value)}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return {"t": "value", "v": value}
    return {"t": "opaque", "type": type(value).__name__}


def replayable(spec: dict[str, Any]) -> bool:
    if spec.get("t") == "opaque":
        return False
    items = spec.get("items")
    if isinstance(items, list):
        return all(replayable(s) for s in items)
    if isinstance(items, dict):
        return all(replayable(s) for s in items.values())
    if "args" in spec:
        return all(replayable(s) for s in spec["args"]) and all(replayable(s) for s in spec["kwargs"].values())
    return True


# ----------------------------------------------------------------------------------------- fresh probes


@dataclass(frozen=True)
class FloatDraw:
    """How a probe draws floating tensors: the original's scale times `magnitude`; `sign` +1 or -1: every value of
    that sign (a tensor whose values were all non-negative stays so), 0: the original's signs."""

    magnitude: float = 1.0
    sign: int = 0


def draw_probe(
    call: RecordedCall, seed: int, spec: dict[str, Any] | None = None, floats: FloatDraw = FloatDraw()
) -> tuple[tuple, dict]:
    """Fresh CPU arguments for a captured call, drawn with `seed`: floating tensors anew (same shape, strides,
    sign and scale, or as `floats` says), integer and boolean tensors as a permutation of the call's own values (in
    range, unique where they were unique; a sorted tensor such as offsets keeps its order; a boolean tensor of
    another shape: drawn with the original's share of True), everything else as it was. `spec`: the call's, or one
    of other shapes and scalars (``probe_variants``). Needs a recorder that kept the call's integer arguments
    (``keep_args="integers"`` or True)."""
    gen = torch.Generator().manual_seed(seed)
    spec = spec or call.spec
    draw = lambda s, original: _draw(s, original, gen, floats)
    args = tuple(draw(s, a) for s, a in zip(spec["args"], _padded(call.args, len(spec["args"])), strict=True))
    kwargs = {k: draw(s, call.kwargs.get(k)) for k, s in spec["kwargs"].items()}
    return args, kwargs


def _padded(values: tuple, n: int) -> tuple:
    return tuple(values) + (None,) * (n - len(values))


def _draw(spec: dict[str, Any], original: Any, gen: torch.Generator, floats: FloatDraw) -> Any:
    kind = spec["t"]
    if kind == "value":
        return spec["v"]
    if kind == "dtype":
        return getattr(torch, spec["v"])
    if kind in ("list", "tuple"):
        originals = _padded(tuple(original or ()), len(spec["items"]))
        items = [_draw(s, o, gen, floats) for s, o in zip(spec["items"], originals, strict=True)]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _draw(s, (original or {}).get(k), gen, floats) for k, s in spec["items"].items()}
    return _draw_tensor(spec, original, gen, floats)


def _draw_tensor(
    spec: dict[str, Any], original: torch.Tensor | None, gen: torch.Generator, floats: FloatDraw
) -> torch.Tensor:
    dtype = getattr(torch, spec["dtype"])
    shape = spec["shape"]
    if dtype.is_floating_point:
        scale = min(max(spec.get("scale", 1.0), 1e-3), 1e4) * floats.magnitude  # largest |value| of the original
        if spec.get("nonneg") or floats.sign:
            sign = -1.0 if floats.sign < 0 and not spec.get("nonneg") else 1.0
            values = (torch.rand(shape, generator=gen) * (scale * sign)).to(dtype)
        else:
            values = (torch.randn(shape, generator=gen) * (scale / 3.0)).to(dtype)
    elif not isinstance(original, torch.Tensor):
        raise ValueError(f"the original values of a {spec['dtype']} argument were not kept")
    elif original.numel() == math.prod(shape):
        values = _permuted(original.detach().to("cpu"), gen)
    elif dtype == torch.bool:
        values = torch.rand(shape, generator=gen) < original.detach().to("cpu").float().mean()
    else:
        raise ValueError(f"a {spec['dtype']} argument cannot take another shape")
    out = torch.empty_strided(shape, spec["stride"], dtype=dtype)
    out.copy_(values.reshape(shape))
    return out


def _permuted(values: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    flat = values.reshape(-1)
    if flat.numel() < 2 or _sorted(flat):
        return values.clone()
    return flat[torch.randperm(flat.numel(), generator=gen)].reshape(values.shape)


def _sorted(flat: torch.Tensor) -> bool:
    as_int = flat.to(torch.int64)
    return bool((as_int[1:] >= as_int[:-1]).all()) or bool((as_int[1:] <= as_int[:-1]).all())


def probe_tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors of a probe's arguments in a fixed order (args, then kwargs), for `torch.save`."""
    return list(iter_tensors((*args, *kwargs.values())))


def iter_tensors(values: Iterable[Any]) -> Iterator[torch.Tensor]:
    """The tensors in `values`, in order, also inside lists, tuples and dicts."""
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from iter_tensors(v)
        elif isinstance(v, dict):
            yield from iter_tensors(v.values())


def rebuild_probe(spec: dict[str, Any], tensors: list[torch.Tensor], device: str) -> tuple[tuple, dict]:
    """The arguments of a saved probe: `spec` gives the structure and non-tensor values, `tensors` (as saved by
    `probe_tensors`) the tensors, moved to `device` with their strides kept."""
    queue = iter(tensors)

    def build(s: dict[str, Any]) -> Any:
        kind = s["t"]
        if kind == "value":
            return s["v"]
        if kind == "dtype":
            return getattr(torch, s["v"])
        if kind in ("list", "tuple"):
            items = [build(x) for x in s["items"]]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            return {k: build(x) for k, x in s["items"].items()}
        t = next(queue)
        if list(t.shape) != s["shape"] or dtype_name(t.dtype) != s["dtype"]:
            raise ValueError("the saved probe does not match its call")
        out = torch.empty_strided(s["shape"], s["stride"], dtype=t.dtype, device=device)
        out.copy_(t)
        return out

    args = tuple(build(s) for s in spec["args"])
    kwargs = {k: build(s) for k, s in spec["kwargs"].items()}
    return args, kwargs


# ----------------------------------------------------------------------------------------- outputs


MAX_OBJECT_DEPTH = 3


def to_portable(obj: Any, depth: int = 0) -> Any:
    """Outputs as CPU tensors and plain containers, loadable with `torch.load(weights_only=True)`."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.dtype.is_complex:
            t = torch.view_as_real(t)
        if t.device.type != "cpu":  # the copy to the host is a tensor of its own (cloning it: 47 ms a 256 MB)
            return t.to("cpu").contiguous()
        return t.contiguous().clone()  # a view saved alone, not with the rest of its storage
    if isinstance(obj, torch.Size):
        return list(obj)
    if isinstance(obj, list):
        return [to_portable(v, depth) for v in obj]
    if isinstance(obj, tuple):
        return tuple(to_portable(v, depth) for v in obj)
    if isinstance(obj, dict):
        return {str(k): to_portable(v, depth) for k, v in obj.items()}
    if isinstance(obj, (bool, int, float, str)) or obj is None:
        return obj
    if isinstance(obj, torch.dtype):
        return dtype_name(obj)
    try:
        import numpy as np

        if isinstance(obj, np.ndarray):
            return torch.from_numpy(obj.copy())
        if isinstance(obj, np.generic):
            return obj.item()
    except ImportError:  # pragma: no cover - numpy ships with torch
        pass
    return _object_fields(obj, depth)


def _object_fields(obj: Any, depth: int) -> dict[str, Any]:
    """Another object: its class name and the tensors it holds (directly, in containers, or in nested objects up
    to a few levels), so that an object a wrapper returns is compared by its tensors. Other fields (handles,
    addresses, counters) say nothing about correctness and may differ from run to run."""
    fields: dict[str, Any] = {"__class__": type(obj).__name__}
    if depth >= MAX_OBJECT_DEPTH or type(obj).__module__.split(".")[0] == "triton":
        return fields
    for key, value in _attributes(obj).items():
        if _holds_tensor(value, depth + 1):
            fields[str(key)] = to_portable(value, depth + 1)
    return fields


def _attributes(obj: Any) -> dict[str, Any]:
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict):
        return attrs
    return {k: getattr(obj, k) for k in getattr(type(obj), "__slots__", ()) if hasattr(obj, k)}


def _holds_tensor(value: Any, depth: int) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if depth >= MAX_OBJECT_DEPTH:
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v, depth + 1) for v in value.values())
    if isinstance(value, (bool, int, float, str, bytes)) or value is None or callable(value):
        return False
    return any(_holds_tensor(v, depth + 1) for v in _attributes(value).values())


_equal = torch.equal  # bound before any user code: whether two runs' outputs are the same (``same_outputs``)


def same_outputs(first: Any, second: Any) -> bool:
    """Are two portable outputs (``to_portable``) the same, bit for bit where they hold tensors?"""
    if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
        return (
            isinstance(first, torch.Tensor)
            and isinstance(second, torch.Tensor)
            and first.dtype == second.dtype
            and first.shape == second.shape
            and _equal(first, second)
        )
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(same_outputs(first[k], second[k]) for k in first)
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return len(first) == len(second) and all(map(same_outputs, first, second))
    return type(first) is type(second) and first == second


def call_outputs(result: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """What a wrapper call produced: its return value and every tensor argument after the call (a string in place of
    a tensor argument stands for it, e.g. ``timing.UNTOUCHED``)."""
    return {
        "return": to_portable(result),
        "args": [to_portable(a) if isinstance(a, (torch.Tensor, str)) else None for a in args],
        "kwargs": {k: to_portable(v) for k, v in kwargs.items() if isinstance(v, (torch.Tensor, str))},
    }


def output_bytes(args: tuple, kwargs: dict, result: Any) -> int:
    """Bytes a correct call must have written: its returned tensors that are not its arguments. A lower
    bound on the traffic (inputs may be read sparsely, e.g. a gather), so sound for rejecting a timing."""
    inputs = {v.data_ptr() for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)}
    return bytes_moved((), {}, result) - sum(
        t.numel() * t.element_size()
        for t in (result if isinstance(result, (list, tuple)) else [result])
        if isinstance(t, torch.Tensor) and t.data_ptr() in inputs
    )


def bytes_moved(args: tuple, kwargs: dict, result: Any) -> int:
    """Bytes of the distinct tensors read and written by a call (inputs and outputs, each counted once)."""
    seen: set[int] = set()
    total = 0
    for t in iter_tensors((*args, *kwargs.values(), result)):
        if t.data_ptr() not in seen and t.numel():
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total
