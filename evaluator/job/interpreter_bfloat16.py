"""bfloat16 arithmetic in Triton's CPU interpreter, as a GPU does it.

The interpreter holds a bf16 value as its 16 bits in a NumPy ``uint16`` array and hands those arrays to NumPy as they
are: `a + b`, `a * b`, `tl.sum(a)`, `tl.maximum(a, b)`, `a < b`, `tl.exp(a)` or `tl.dot(a, b)` on bf16 operands
compute on the bit patterns (1.5 + 0.5 gives 1.3e38), and a cast from fp32 truncates where a GPU rounds to nearest
even. Every such operation here decodes its bf16 operands to float32 (exact), computes there and rounds the result
back to bf16, to nearest even: for `+ - * /` and `sqrt` that is the correctly rounded bf16 result a GPU gives
(float32 has more than twice bf16's precision, so the double rounding never shows). Operations that only move bits
(loads, stores, `tl.where`, reshapes, `abs`) are left as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np


def decode(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) → their float32 values, exactly."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def encode(values: Any) -> np.ndarray:
    """float values → bf16 bit patterns (uint16), rounded to nearest even; NaN stays a (quiet) NaN."""
    values = np.asarray(values, dtype=np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def install() -> None:
    """Patch the interpreter's builder, reductions and scans (see the module docstring)."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder, handle = interpreter.InterpreterBuilder, interpreter.TensorHandle
    bf16 = tl.bfloat16

    def is_bf16(value: Any) -> bool:
        return value.dtype.scalar == bf16 and value.data.dtype == np.uint16

    def as_float32(value: Any) -> Any:
        return handle(decode(value.data), tl.float32) if is_bf16(value) else value

    def result(out: np.ndarray) -> Any:
        """An operation's float32 result as bf16; a comparison's booleans as the interpreter leaves them (0/1
        held in the operands' type)."""
        out = np.asarray(out)
        return handle(out.astype(np.uint16) if out.dtype == np.bool_ else encode(out), bf16)

    binary_op, unary_op, ternary_op = builder.binary_op, builder.unary_op, builder.ternary_op
    fma, dot, cast = builder.create_fma, builder.create_dot, builder.cast_impl
    rsqrt, erf = builder.create_rsqrt, builder.create_erf

    def bf16_binary_op(self, lhs, rhs, op):
        if not (is_bf16(lhs) and is_bf16(rhs)):
            return binary_op(self, lhs, rhs, op)
        return result(op(decode(lhs.data), decode(rhs.data)))

    def bf16_unary_op(self, arg, op):
        return result(op(decode(arg.data))) if is_bf16(arg) else unary_op(self, arg, op)

    def bf16_ternary_op(self, lhs, rhs, other, op):
        if op is np.where or not is_bf16(other):  # a select moves bits; a clamp compares values
            return ternary_op(self, lhs, rhs, other, op)
        return result(op(*(as_float32(v).data for v in (lhs, rhs, other))))

    def bf16_fma(self, x, y, z):
        if not is_bf16(z):
            return fma(self, x, y, z)
        return result(fma(self, as_float32(x), as_float32(y), as_float32(z)).data)

    def bf16_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = dot(self, as_float32(a), as_float32(b), as_float32(d), input_precision, max_num_imprecise_acc)
        return result(out.data) if is_bf16(d) else out

    def bf16_cast(self, src, dst_type):
        """bf16 from or to anything: through float32, rounded to nearest even (the interpreter truncates)."""
        src_bf16, dst_bf16 = is_bf16(src), dst_type.scalar == bf16
        if src_bf16 and dst_bf16:
            return src
        if dst_bf16:
            wide = src if src.dtype.scalar == tl.float32 else cast(self, src, tl.float32)
            return handle(encode(wide.data), bf16)
        return cast(self, as_float32(src), dst_type) if src_bf16 else cast(self, src, dst_type)

    def unary(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self, arg):
            return result(method(self, as_float32(arg)).data) if is_bf16(arg) else method(self, arg)

        return run

    builder.binary_op, builder.unary_op, builder.ternary_op = bf16_binary_op, bf16_unary_op, bf16_ternary_op
    builder.create_fma, builder.create_dot, builder.cast_impl = bf16_fma, bf16_dot, bf16_cast
    builder.create_rsqrt, builder.create_erf = unary(rsqrt), unary(erf)
    # the casts (create_fp_ext, create_fp_trunc, create_si_to_fp...) call self.cast_impl by name: patched with it
    _reductions_in_float32(interpreter, tl)


def _reductions_in_float32(interpreter: Any, tl: Any) -> None:
    """`tl.sum`, `tl.max`, `tl.min`, `tl.argmax`, `tl.cumsum`... of a bf16 tensor: NumPy reduces decoded values (in
    float32, as a GPU accumulates), and the result is rounded to bf16."""

    def to_float32(tensor: Any) -> Any:
        if tensor.dtype.scalar != tl.bfloat16 or tensor.handle.data.dtype != np.uint16:
            return tensor
        data = decode(tensor.handle.data)
        kind = tl.block_type(tl.float32, list(tensor.shape)) if tensor.type.is_block() else tl.float32
        return tl.core.tensor(interpreter.TensorHandle(data, tl.float32), kind)

    def to_bf16(tensor: Any) -> Any:
        if not isinstance(tensor, tl.core.tensor) or tensor.dtype.scalar != tl.float32:
            return tensor  # an index
        kind = tl.block_type(tl.bfloat16, list(tensor.shape)) if tensor.type.is_block() else tl.bfloat16
        return tl.core.tensor(interpreter.TensorHandle(encode(tensor.handle.data), tl.bfloat16), kind)

    def in_float32(method: Callable) -> Callable:
        @functools.wraps(method)
        def run(self, input, *args, **kwargs):
            if to_float32(input) is input:
                return method(self, input, *args, **kwargs)
            out = method(self, to_float32(input), *args, **kwargs)
            return type(out)(to_bf16(t) for t in out) if isinstance(out, (list, tuple)) else to_bf16(out)

        return run

    for cls, names in ((interpreter.ReduceOps, ("sum", "min_max")), (interpreter.ScanOps, ("cumsum", "cumprod"))):
        for name in names:
            setattr(cls, name, in_float32(getattr(cls, name)))
