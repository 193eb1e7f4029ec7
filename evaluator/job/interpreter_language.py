"""Triton language the CPU interpreter refuses and GPUs accept: string annotations, list grids, float and
storageless pointer arguments, integer-held masks, `and` / `or` on tensors, surplus full slices."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np


def accept_string_annotations() -> None:
    """`BLOCK: "tl.constexpr"`: the interpreter re-parses kernels and sees the annotation quoted twice
    (`"'tl.constexpr'"`), so it takes BLOCK for a runtime argument; unquote it first."""
    from triton.runtime import jit

    normalize = jit._normalize_ty

    def normalize_unquoted(ty: Any) -> str:
        if isinstance(ty, str) and len(ty) > 1 and ty[0] == ty[-1] and ty[0] in "'\"":
            with contextlib.suppress(ValueError, SyntaxError):
                ty = ast.literal_eval(ty)
        return normalize(ty)

    jit._normalize_ty = normalize_unquoted


def accept_list_grids() -> None:
    """`kernel[[m, n]](...)` or a grid function returning a list: a GPU launch takes any sequence, the interpreter
    only tuples."""
    from triton.runtime import interpreter

    init = interpreter.GridExecutor.__init__

    def init_with_tuple_grid(self, fn, arg_names, grid, *args, **kwargs):
        if isinstance(grid, list):
            grid = tuple(grid)
        elif callable(grid):
            grid = _tuple_grid(grid)
        init(self, fn, arg_names, grid, *args, **kwargs)

    interpreter.GridExecutor.__init__ = init_with_tuple_grid


def float_arguments() -> None:
    """A Python float passed to a kernel is an fp32 scalar on a GPU (`x.to(...)` works, `scale * h` with an fp16 `h`
    is fp32); the interpreter would hand the kernel the bare float."""
    import triton.language as tl
    from triton.runtime import interpreter

    convert = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    interpreter._implicit_cvt = implicit_cvt  # also used, by name, for the items of a tuple argument


def storageless_pointer_arguments() -> None:
    """A kernel argument with `data_ptr()` and `dtype` but no torch storage (a strided view class of the file's own)
    is a pointer on a GPU; the interpreter, which copies every tensor argument's storage to the host and back,
    would fail on it. On CPU its address is host memory already, so it passes through as it is."""
    from triton.runtime import interpreter

    executor = interpreter.GridExecutor
    to_host, back = executor._init_args_hst, executor._restore_args_dev

    def storageless(arg: Any) -> bool:
        return hasattr(arg, "data_ptr") and not hasattr(interpreter._unwrap_tensor(arg), "untyped_storage")

    def without(args: Any, kwargs: dict) -> tuple[list, dict]:
        keep = {k: None if storageless(v) else v for k, v in kwargs.items()}
        return [None if storageless(a) else a for a in args], keep

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = to_host(self, *without(args_dev, kwargs))
        args_hst = [a if storageless(a) else h for a, h in zip(args_dev, args_hst, strict=True)]
        return args_hst, {k: v if storageless(v) else kwargs_hst[k] for k, v in kwargs.items()}

    def restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
        (args_dev, kwargs), (args_hst, kwargs_hst) = without(args_dev, kwargs), without(args_hst, kwargs_hst)
        back(self, args_dev, args_hst, kwargs, kwargs_hst)

    executor._init_args_hst, executor._restore_args_dev = init_args_hst, restore_args_dev


def _tuple_grid(grid: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def as_tuple(meta: Any) -> Any:
        value = grid(meta)
        return tuple(value) if isinstance(value, list) else value

    return as_tuple


def boolean_masks() -> None:
    """A mask is int1 to Triton, but the interpreter sometimes holds it as int32 data (a scalar comparison broadcast
    to a block), which its load and store then refuse ("mask has unsupported dtype")."""
    from triton.runtime import interpreter

    builder_cls = type(interpreter.interpreter_builder)
    load, store = builder_cls.create_masked_load, builder_cls.create_masked_store

    def as_bool(mask: Any) -> Any:
        if mask is not None and mask.data.dtype != np.bool_:
            return interpreter.TensorHandle(mask.data.astype(np.bool_), mask.dtype)
        return mask

    builder_cls.create_masked_load = lambda self, ptrs, mask, *rest: load(self, ptrs, as_bool(mask), *rest)
    builder_cls.create_masked_store = lambda self, ptrs, value, mask, *rest: store(
        self, ptrs, value, as_bool(mask), *rest
    )


def tensor_boolean_operators() -> None:
    """`mask = (rows < M) and (cols < N)` in a kernel: Triton's compiler makes `and` / `or` on tensors elementwise
    (constexpr operands still short-circuit); plain Python, which the interpreter runs, would keep only one operand
    (a block tensor is always truthy), so masks lose a bound and loads run out of bounds. Rewrite them as the
    compiler reads them."""
    from triton.runtime import interpreter

    rewriter = interpreter.FunctionRewriter
    first = rewriter.ast_transformer

    class BooleanOperators(ast.NodeTransformer):
        def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
            self.generic_visit(node)
            method = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
            no_args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
            thunks = [ast.Lambda(args=no_args, body=value) for value in node.values]
            call = ast.Call(ast.Name("_interpreted_boolean_op", ast.Load()), [ast.Constant(method), *thunks], [])
            return ast.copy_location(call, node)

    class Both:
        def visit(self, tree: ast.AST) -> ast.AST:
            return BooleanOperators().visit(first.visit(tree))

    rewriter.ast_transformer = Both()
    interpreter._interpreted_boolean_op = _boolean_op  # the interpreter hands its globals to the kernels it rewrites


def surplus_full_slices() -> None:
    """`cond[:, None]` on a scalar: Tritons up to 3.6 (what GPUs run) skip a `:` past a tensor's rank, later ones
    raise "too many indices"; files written for the former use it to broadcast a scalar condition as a column."""
    import builtins

    from triton.language import core

    getitem = core.tensor.__getitem__
    full_slice_types = (builtins.slice, core.slice)

    @core.builtin
    def lenient_getitem(self, slices, _semantic=None):
        try:
            return getitem(self, slices, _semantic=_semantic)
        except ValueError as e:
            if "too many indices" not in str(e):
                raise
        items = slices.values if isinstance(slices, core.tuple) else slices
        result = self
        for dim, item in enumerate(items if isinstance(items, (list, tuple)) else [items]):
            if core._unwrap_if_constexpr(item) is None:
                result = _semantic.expand_dims(result, min(dim, len(result.shape)))  # 3.6: list.insert's rule
            elif not isinstance(item, full_slice_types) or (item.start, item.stop, item.step) != (None, None, None):
                raise ValueError(f"unsupported tensor index: {item}")
        return result

    core.tensor.__getitem__ = lenient_getitem


def _boolean_op(method: str, *operands: Callable[[], Any]) -> Any:
    """`a and b` / `a or b` as Triton's compiler evaluates them: Python values short-circuit, tensors combine
    elementwise (`logical_and` / `logical_or`)."""
    import triton.language as tl

    tensors: list[Any] = []
    value: Any = None
    for operand in operands:
        value = operand()
        if isinstance(value, tl.core.tensor):
            tensors.append(value)
        elif bool(value) is (method == "logical_or"):
            return value
    if not tensors:
        return value
    result = tensors[0]
    for other in tensors[1:]:
        result = getattr(result, method)(other)
    return result
