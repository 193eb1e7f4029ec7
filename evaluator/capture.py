"""Worker-side capture of wrapper calls: what the tests and benches call, with which arguments.

Captured calls are replayed with fresh random inputs (correctness beyond the given test) and timed (perf).
Only outermost calls are recorded, so a wrapper that calls another wrapper counts once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

_DEPTH = threading.local()
MAX_RANGE_INT = 2**31


@dataclass
class RecordedCall:
    wrapper: str
    spec: dict[str, Any]
    signature: str
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


class CallRecorder:
    """Replaces a module's wrapper functions by recording proxies. `keep_args` keeps cloned arguments for replay."""

    def __init__(self, module: ModuleType, wrappers: list[str], *, keep_args: bool = False, limit: int = 64):
        self.module = module
        self.keep_args = keep_args
        self.limit = limit
        self.calls: list[RecordedCall] = []
        self.recording = False
        self.originals: dict[str, Callable] = {}
        for name in wrappers:
            fn = getattr(module, name, None)
            if callable(fn) and not isinstance(fn, type):
                self.originals[name] = fn
                setattr(module, name, self._proxy(name, fn))

    def _proxy(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def proxy(*args, **kwargs):
            depth = getattr(_DEPTH, "value", 0)
            if self.recording and depth == 0 and len(self.calls) < self.limit:
                self._record(name, args, kwargs)
            _DEPTH.value = depth + 1
            try:
                return fn(*args, **kwargs)
            finally:
                _DEPTH.value = depth

        return proxy

    def _record(self, name: str, args: tuple, kwargs: dict) -> None:
        spec = {"args": [arg_spec(a) for a in args], "kwargs": {k: arg_spec(v) for k, v in kwargs.items()}}
        call = RecordedCall(name, spec, signature(name, args, kwargs))
        if self.keep_args:
            call.args = tuple(_clone(a) for a in args)
            call.kwargs = {k: _clone(v) for k, v in kwargs.items()}
        self.calls.append(call)

    def unique_calls(self, limit: int) -> list[RecordedCall]:
        seen, out = set(), []
        for call in self.calls:
            if call.signature not in seen:
                seen.add(call.signature)
                out.append(call)
        return out[:limit]


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
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


def arg_spec(value: Any) -> dict[str, Any]:
    """A JSON description of an argument, enough to draw fresh values of the same kind."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        spec: dict[str, Any] = {
            "t": "tensor",
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "dtype": dtype_name(t.dtype),
            "contiguous": t.is_contiguous(),
        }
        if t.numel() and not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool:
            spec["min"], spec["max"] = int(t.min()), int(t.max())
        elif t.numel() and t.is_floating_point():
            finite = t[torch.isfinite(t)].float()
            spec["nonneg"] = bool(finite.numel() and finite.min() >= 0)
            spec["scale"] = float(finite.abs().max()) if finite.numel() else 1.0
        return spec
    if isinstance(value, (list, tuple)):
        return {"t": type(value).__name__, "items": [arg_spec(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"t": "dict", "items": {k: arg_spec(v) for k, v in value.items()}}
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


def fresh_args(spec: dict[str, Any], seed: int, device: str) -> tuple[tuple, dict]:
    """Draw new random arguments of the same shapes, dtypes and value ranges (same seed → same values)."""
    gen = torch.Generator().manual_seed(seed)
    args = tuple(_fresh(s, gen, device) for s in spec["args"])
    kwargs = {k: _fresh(s, gen, device) for k, s in spec["kwargs"].items()}
    return args, kwargs


def _fresh(spec: dict[str, Any], gen: torch.Generator, device: str) -> Any:
    kind = spec["t"]
    if kind == "value":
        return spec["v"]
    if kind == "dtype":
        return getattr(torch, spec["v"])
    if kind in ("list", "tuple"):
        items = [_fresh(s, gen, device) for s in spec["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _fresh(s, gen, device) for k, s in spec["items"].items()}
    return _fresh_tensor(spec, gen, device)


def _fresh_tensor(spec: dict[str, Any], gen: torch.Generator, device: str) -> torch.Tensor:
    dtype = getattr(torch, spec["dtype"])
    shape = spec["shape"]
    if dtype == torch.bool:
        values = torch.rand(shape, generator=gen) < 0.5
    elif dtype.is_floating_point:
        scale = min(max(spec.get("scale", 1.0), 1e-3), 1e4)  # largest |value| of the original
        if spec.get("nonneg"):
            values = torch.rand(shape, generator=gen) * scale
        else:
            values = torch.randn(shape, generator=gen) * (scale / 3.0)
    elif "min" in spec:
        low, high = spec["min"], spec["max"]
        if high - low >= MAX_RANGE_INT:
            raise ValueError("integer range too wide to redraw")
        values = torch.randint(low, high + 1, shape, generator=gen, dtype=torch.int64)
    else:
        values = torch.zeros(shape, dtype=torch.int64)
    values = values.to(dtype)
    if not spec.get("contiguous", True):
        out = torch.empty_strided(shape, spec["stride"], dtype=dtype)
        out.copy_(values)
        values = out
    return values.to(device)


# ----------------------------------------------------------------------------------------- outputs


def to_portable(obj: Any) -> Any:
    """Outputs as CPU tensors and plain containers, loadable with `torch.load(weights_only=True)`."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.dtype.is_complex:
            t = torch.view_as_real(t)
        return t.to("cpu").contiguous().clone()
    if isinstance(obj, torch.Size):
        return list(obj)
    if isinstance(obj, list):
        return [to_portable(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(to_portable(v) for v in obj)
    if isinstance(obj, dict):
        return {str(k): to_portable(v) for k, v in obj.items()}
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
    return {"__opaque__": type(obj).__name__}


def call_outputs(result: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """What a wrapper call produced: its return value and every tensor argument after the call."""
    return {
        "return": to_portable(result),
        "args": [to_portable(a) if isinstance(a, torch.Tensor) else None for a in args],
        "kwargs": {k: to_portable(v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)},
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

    def visit(v: Any) -> None:
        nonlocal total
        if isinstance(v, torch.Tensor):
            key = v.data_ptr()
            if key not in seen and v.numel():
                seen.add(key)
                total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    for v in (*args, *kwargs.values(), result):
        visit(v)
    return total
