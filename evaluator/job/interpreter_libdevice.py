"""Vendor libdevice math (`tl.extra.cuda/hip.libdevice`, `triton.language.extra.libdevice`) under the CPU
interpreter, computed with NumPy/SciPy."""

from __future__ import annotations

import re
import sys
from types import ModuleType
from typing import Any

import numpy as np


def _np_erf(x: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.erf(x)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _special(name: str):
    def fn(*args: np.ndarray) -> np.ndarray:
        from scipy import special

        return getattr(special, name)(*args)

    return fn


# libdevice function (without the __nv_ / __ocml_ prefix and the f / _f32 / _f64 suffix) -> NumPy
LIBDEVICE_NUMPY: dict[str, Any] = {
    "abs": np.abs,
    "fabs": np.abs,
    "llabs": np.abs,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "atanh": np.arctanh,
    "cbrt": np.cbrt,
    "ceil": np.ceil,
    "copysign": np.copysign,
    "cos": np.cos,
    "cosh": np.cosh,
    "erf": _np_erf,
    "erfc": _special("erfc"),
    "erfinv": _special("erfinv"),
    "exp": np.exp,
    "exp2": np.exp2,
    "exp10": lambda x: np.power(x.dtype.type(10), x),
    "expm1": np.expm1,
    "fast_exp": np.exp,
    "fast_log": np.log,
    "fdim": lambda x, y: np.maximum(x - y, 0),
    "floor": np.floor,
    "fma": lambda x, y, z: x * y + z,
    "fmax": np.fmax,
    "fmin": np.fmin,
    "fmod": np.fmod,
    "hypot": np.hypot,
    "isinf": np.isinf,
    "isnan": np.isnan,
    "isfinite": np.isfinite,
    "isfinited": np.isfinite,
    "finite": np.isfinite,
    "lgamma": _special("gammaln"),
    "llrint": np.rint,
    "lrint": np.rint,
    "rint": np.rint,
    "nearbyint": np.rint,
    "llround": _round_half_away,
    "round": _round_half_away,
    "log": np.log,
    "log10": np.log10,
    "log1p": np.log1p,
    "log2": np.log2,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
    "powi": np.power,
    "pown": np.power,
    "rcbrt": lambda x: 1 / np.cbrt(x),
    "remainder": np.remainder,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "signbit": np.signbit,
    "sin": np.sin,
    "sinh": np.sinh,
    "sqrt": np.sqrt,
    "tan": np.tan,
    "tanh": np.tanh,
    "tgamma": _special("gamma"),
    "trunc": np.trunc,
    "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x),
    "saturate": lambda x: np.clip(x, 0, 1),
    "rhypot": lambda x, y: 1 / np.hypot(x, y),
    "ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "scalbn": lambda x, e: np.ldexp(x, e.astype(np.int32)),
    "nextafter": np.nextafter,
    "normcdf": _special("ndtr"),
    "normcdfinv": _special("ndtri"),
    "erfcinv": _special("erfcinv"),
    "erfcx": _special("erfcx"),
    "i0": _special("i0"),
    "i1": _special("i1"),
    "cyl_bessel_i0": _special("i0"),
    "cyl_bessel_i1": _special("i1"),
    "j0": _special("j0"),
    "j1": _special("j1"),
    "y0": _special("y0"),
    "y1": _special("y1"),
    "fast_cos": np.cos,
    "fast_sin": np.sin,
    "fast_tan": np.tan,
    "fast_tanh": np.tanh,
    "fast_exp10": lambda x: np.power(x.dtype.type(10), x),
    "fast_log2": np.log2,
    "fast_log10": np.log10,
    "fast_pow": np.power,
    "fast_fdivide": np.divide,
    # the round-to-nearest forms of the rounding-mode family are IEEE's default rounding (the _rz/_rd/_ru forms
    # are left out: NumPy cannot round another way)
    **{f"{p}{op}_rn": fn for p in "fd" for op, fn in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply))},
    **{f"{p}{op}_rn": fn for p in "fd" for op, fn in (("div", np.divide), ("sqrt", np.sqrt))},
    "frcp_rn": lambda x: 1 / x,
    "drcp_rn": lambda x: 1 / x,
    "frsqrt_rn": lambda x: 1 / np.sqrt(x),
    "fma_rn": lambda x, y, z: x * y + z,
    "fmaf_rn": lambda x, y, z: x * y + z,
}


def libdevice_function(symbol: str) -> Any:
    """The NumPy function for a libdevice/OCML symbol (`__nv_powf`, `__ocml_pow_f32`, `__nv_isfinited`,
    `__triton_hip_llrint`), or None."""
    name = re.sub(r"^__(nv|ocml|triton_hip)_", "", symbol)
    for suffix in ("", "_f16", "_f32", "_f64", "f", "d"):
        base = name.removesuffix(suffix) if suffix else name
        if base in LIBDEVICE_NUMPY:
            return LIBDEVICE_NUMPY[base]
    return None


def map_libdevice() -> None:
    """Vendor libdevice calls (`tl.extra.cuda.libdevice.pow`, `tl.extra.hip.libdevice.llrint`,
    `triton.language.extra.libdevice.tanh`) run through NumPy; an unknown one still raises the interpreter's
    NotImplementedError (reported as not checkable on CPU)."""
    import triton.language as tl
    from triton.runtime import interpreter

    names = ("triton.language.extra.cuda.libdevice", "triton.language.extra.hip.libdevice")
    backends = [m for m in map(_import, names) if m is not None]
    generic = _import("triton.language.extra.libdevice")
    builder_cls = type(interpreter.interpreter_builder)
    refuse = builder_cls.create_extern_elementwise

    def create_extern_elementwise(self, lib_name, lib_path, symbol, args, ret_type, is_pure):
        fn = libdevice_function(symbol)
        if fn is None:
            return refuse(self, lib_name, lib_path, symbol, args, ret_type, is_pure)
        with np.errstate(all="ignore"):
            out = fn(*(a.data for a in args))
        return interpreter.TensorHandle(np.asarray(out).astype(interpreter._get_np_dtype(ret_type)), ret_type.scalar)

    builder_cls.create_extern_elementwise = create_extern_elementwise

    def bound(member: Any) -> Any:
        semantic = interpreter.interpreter_semantic
        return lambda *a, **k: member(*a, **{n: v for n, v in k.items() if n != "_semantic"}, _semantic=semantic)

    by_name: dict[str, Any] = {}
    for module in reversed(backends):  # the CUDA version wins where both have a function
        by_name.update({n: m for n, m in vars(module).items() if tl.core.is_builtin(m)})
    stub_names = [n for n, v in vars(generic).items() if callable(v) and n in by_name] if generic else []
    imported = {id(m): m for module in backends for m in vars(module).values() if tl.core.is_builtin(m)}
    known = imported | {id(getattr(generic, n)): by_name[n] for n in stub_names}  # also HIP's where CUDA has one
    patch_lang = interpreter._patch_lang

    def patch_lang_with_libdevice(fn):
        scope = patch_lang(fn)
        for module in backends:
            for name, member in list(vars(module).items()):
                if tl.core.is_builtin(member):
                    scope.set_attr(module, name, bound(member))
        for name in stub_names:
            scope.set_attr(generic, name, bound(by_name[name]))
        names = _GlobalNames(fn.__globals__)
        for name, value in list(fn.__globals__.items()):  # `from ...libdevice import tanh`
            if id(value) in known:
                scope.set_attr(names, name, bound(known[id(value)]))
        return scope

    interpreter._patch_lang = patch_lang_with_libdevice


class _GlobalNames:
    """A module's globals as attributes, so the interpreter's patch scope can set and restore them."""

    def __init__(self, names: dict[str, Any]) -> None:
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._names[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._names[name] = value

    def __delattr__(self, name: str) -> None:
        self._names.pop(name, None)


def _import(name: str) -> ModuleType | None:
    try:
        __import__(name)
    except ImportError:
        return None
    return sys.modules[name]
