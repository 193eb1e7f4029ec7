"""Block pointers on a Triton interpreter that no longer has them (Triton 3.9 removed ``tl.make_block_ptr`` /
``tl.advance`` and the ``boundary_check`` / ``padding_option`` arguments of ``tl.load`` / ``tl.store``), so files
written for the Tritons that GPUs run (3.x up to 3.6) are checked on CPU unchanged.

The semantics are Triton 3.6's (``semantic.make_block_ptr``, ``advance``, ``_load_block_pointer``,
``_store_block_pointer``): a block pointer names a ``block_shape`` window at ``offsets`` of a ``shape``d tensor
with ``strides`` at ``base``; ``advance`` moves the window; a load or store through it touches
``base + sum((offset_d + i_d) * stride_d)``, and only the dimensions named in ``boundary_check`` are masked to
``[0, shape_d)`` (a load pads them with zeros, or NaN for ``padding_option="nan"``); an unchecked dimension is not
masked, as on a GPU, so an out-of-bounds access stays the kernel's bug. ``order`` is a layout hint with no effect on
values. The window becomes a block of pointers and a mask that the interpreter's own load and store then use, so
element types, bool-as-int8 and everything after the load behave as for any other pointer.

``install()`` is called by ``interpreter_shims`` only when the installed interpreter lacks block pointers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np


def interpreter_lacks_block_pointers() -> bool:
    """True when this Triton's interpreter cannot build block pointers (its builder has no `create_make_block_ptr`)."""
    from triton.runtime import interpreter

    return not hasattr(type(interpreter.interpreter_builder), "create_make_block_ptr")


@dataclass(frozen=True)
class BlockPointer:
    """The handle of a block-pointer tensor: a `block_shape` window at `offsets` of a `shape`d tensor at `base`."""

    base: Any  # the interpreter's TensorHandle of the scalar base pointer
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offsets: tuple[int, ...]
    block_shape: tuple[int, ...]
    order: tuple[int, ...]

    def advanced(self, deltas: tuple[int, ...]) -> BlockPointer:
        return replace(self, offsets=tuple(o + d for o, d in zip(self.offsets, deltas, strict=True)))

    def pointers_and_mask(self, boundary_check: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None]:
        """The addresses of the window's elements, and where they lie inside `shape` on the checked dimensions
        (None when no dimension is checked)."""
        item_bytes = self.base.get_element_ty().primitive_bitwidth // 8
        ndim = len(self.block_shape)
        byte_offsets = np.zeros(self.block_shape, dtype=np.int64)
        mask = np.ones(self.block_shape, dtype=np.bool_) if boundary_check else None
        for dim, size in enumerate(self.block_shape):
            index = (self.offsets[dim] + np.arange(size, dtype=np.int64)).reshape(
                [size if d == dim else 1 for d in range(ndim)]
            )
            byte_offsets = byte_offsets + index * (self.strides[dim] * item_bytes)
            if dim in boundary_check:
                mask = mask & (index >= 0) & (index < self.shape[dim])
        base = self.base.data.reshape(()).astype(np.uint64)
        return base + byte_offsets.astype(np.uint64), mask  # two's complement: negative offsets wrap as on a GPU


def install() -> None:
    """Make `tl.make_block_ptr`, `tl.advance` / `ptr.advance`, and `tl.load` / `tl.store` with `boundary_check`
    and `padding_option` work under the interpreter (it hands `_semantic` to every `@builtin` of `tl`)."""
    import triton.language as tl
    from triton.language import core

    load, store = core.load, core.store
    builtin = core.builtin

    @builtin
    def make_block_ptr(base, shape, strides, offsets, block_shape, order, _semantic=None):
        if not isinstance(base, core.tensor) or not base.type.is_ptr() or base.type.element_ty.is_block():
            raise ValueError("Expected `base` to be a pointer type (but not a block pointer type or others)")
        if base.type.element_ty == tl.int1:  # as Triton: a bool block pointer is an int8 one
            base = _semantic.cast(base, tl.pointer_type(tl.int8, base.type.address_space))
        block_shape = [int(core._unwrap_if_constexpr(s)) for s in _as_list(block_shape)]
        order = [int(core._unwrap_if_constexpr(o)) for o in _as_list(order)]
        if sorted(order) != list(range(len(order))):
            raise ValueError("Expected a permutation of (0, 1, ..., len(order)-1) in order")
        shape, strides, offsets = (_integers(v, name) for v, name in
                                   ((shape, "shape"), (strides, "strides"), (offsets, "offsets")))  # fmt: skip
        if not all(len(v) == len(block_shape) for v in (shape, strides, offsets, order)):
            raise ValueError("Expected shape/strides/offsets/block_shape to have the same length")
        handle = BlockPointer(base.handle, shape, strides, offsets, tuple(block_shape), tuple(order))
        return core.tensor(handle, tl.pointer_type(tl.block_type(base.type.element_ty, block_shape)))

    @builtin
    def advance(base, offsets, _semantic=None):
        if not _is_block_pointer(base):
            raise ValueError(f"tl.advance expects a block pointer (tl.make_block_ptr), got {base.type}")
        deltas = _integers(offsets, "offsets")
        if len(deltas) != len(base.handle.offsets):
            raise ValueError(f"tl.advance: {len(deltas)} offsets for a {len(base.handle.offsets)}-d block pointer")
        return core.tensor(base.handle.advanced(deltas), base.type)

    @builtin
    def load_(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
              eviction_policy="", volatile=False, _semantic=None, **kwargs):  # fmt: skip
        padding_option = core._unwrap_if_constexpr(padding_option)
        boundary_check = _dims(boundary_check)
        if padding_option not in ("", "zero", "nan"):
            raise ValueError(f"Padding option {padding_option} not supported")
        options = {"cache_modifier": cache_modifier, "eviction_policy": eviction_policy, "volatile": volatile}
        if not _is_block_pointer(pointer):
            if boundary_check or padding_option:
                raise ValueError(
                    "`padding_option` or `boundary_check` argument is not supported for loading a tensor of pointers "
                    "or loading a scalar. Because the compiler does not know the boundary; please use block pointers "
                    "(defined by `make_block_ptr`) instead"
                )
            return load(pointer, mask, other, **options, **kwargs, _semantic=_semantic)
        if core._unwrap_if_constexpr(mask) is not None or core._unwrap_if_constexpr(other) is not None:
            raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
        element = pointer.type.element_ty.element_ty
        if element.is_int() and padding_option == "nan":
            raise ValueError("Padding option `nan` is not supported for integer block pointers")
        pointers, mask = _materialize(pointer, boundary_check)
        if mask is not None:
            other = _semantic.to_tensor(float("nan") if padding_option == "nan" else 0)
        return load(pointers, mask, other, **options, **kwargs, _semantic=_semantic)

    @builtin
    def store_(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="", _semantic=None,
               **kwargs):  # fmt: skip
        boundary_check = _dims(boundary_check)
        options = {"cache_modifier": cache_modifier, "eviction_policy": eviction_policy}
        if not _is_block_pointer(pointer):
            if boundary_check:
                raise ValueError(
                    "`boundary_check` argument is not supported for storing a tensor of pointers or storing a scalar. "
                    "Because the compiler does not know the boundary; please use block pointers (defined by "
                    "`make_block_ptr`) instead"
                )
            return store(pointer, value, mask, **options, **kwargs, _semantic=_semantic)
        if core._unwrap_if_constexpr(mask) is not None:
            raise ValueError("`mask` and `other` arguments cannot be specified for loading block pointers")
        block = pointer.type.element_ty
        value = _semantic.to_tensor(core._unwrap_if_constexpr(value))
        if not value.type.is_block():
            value = _semantic.broadcast_impl_shape(value, block.get_block_shapes())
        if list(block.get_block_shapes()) != list(value.type.get_block_shapes()):
            raise ValueError(f"Block shape({block.get_block_shapes()}) and value shape({value.shape}) mismatch")
        if value.type.element_ty != block.element_ty:
            raise ValueError(f"Block element type({block.element_ty}) and value element type({value.dtype}) mismatch")
        pointers, mask = _materialize(pointer, boundary_check)
        return store(pointers, value, mask, **options, **kwargs, _semantic=_semantic)

    def _materialize(pointer, boundary_check: tuple[int, ...]):
        handle: BlockPointer = pointer.handle
        if any(not 0 <= d < len(handle.block_shape) for d in boundary_check):
            raise ValueError(f"boundary_check {boundary_check} names a dimension a {len(handle.block_shape)}-d block "
                             "pointer lacks")  # fmt: skip
        from triton.runtime.interpreter import TensorHandle

        addresses, inside = handle.pointers_and_mask(boundary_check)
        block = pointer.type.element_ty
        pointers = core.tensor(TensorHandle(addresses, handle.base.dtype),
                               tl.block_type(handle.base.dtype, list(handle.block_shape)))  # fmt: skip
        if inside is None:
            return pointers, None
        return pointers, core.tensor(TensorHandle(inside, tl.int1), block.with_element_ty(tl.int1))

    load_.__name__, store_.__name__ = "load", "store"
    for module in (tl, core):
        for name, fn in (("make_block_ptr", make_block_ptr), ("advance", advance), ("load", load_), ("store", store_)):
            setattr(module, name, fn)
    core.tensor.advance = _member(advance)
    core.tensor.store = _member(store_)


def _member(fn: Any) -> Any:
    """`x.advance(...)`, `x.store(...)`: the tensor-method form of a builtin (a builtin too, so the interpreter hands
    it `_semantic`)."""
    from triton.language import core

    def method(self, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    setattr(method, core.TRITON_BUILTIN, True)
    return method


def _is_block_pointer(value: Any) -> bool:
    return isinstance(getattr(value, "handle", None), BlockPointer)


def _as_list(values: Any) -> list[Any]:
    from triton.language import core

    values = core._unwrap_if_constexpr(values)
    return list(values) if isinstance(values, (list, tuple, core.tuple)) else [values]


def _integers(values: Any, what: str) -> tuple[int, ...]:
    """Ints from ints, constexprs and scalar integer tensors (a block pointer's shape, strides and offsets)."""
    from triton.language import core

    out = []
    for value in _as_list(values):
        value = core._unwrap_if_constexpr(value)
        if isinstance(value, core.tensor):
            if value.type.is_block() or not value.dtype.is_int():
                raise ValueError(f"block pointer {what} must be integer scalars, got a {value.type}")
            value = value.handle.data.reshape(-1)[0]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"block pointer {what} must be integer scalars, got {value!r}")
        out.append(int(value))
    return tuple(out)


def _dims(boundary_check: Any) -> tuple[int, ...]:
    """`boundary_check` as sorted dimensions (an int or a sequence; as in Triton, 0 alone checks nothing and a
    duplicate is an error)."""
    from triton.language import core

    boundary_check = core._unwrap_if_constexpr(boundary_check)
    if not boundary_check:
        return ()
    dims = [int(core._unwrap_if_constexpr(d)) for d in _as_list(boundary_check)]
    if len(dims) != len(set(dims)):
        raise ValueError("Duplicate dimension in `boundary_check`")
    return tuple(sorted(dims))
