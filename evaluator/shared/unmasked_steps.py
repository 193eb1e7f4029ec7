"""Where a Triton kernel steps over a dimension in tiles of a constexpr block with loads or stores that are not
masked: it is then right only where that dimension is a multiple of the block. Read from the kernel's source alone
(the standard library's `ast`), so both sides use it: a reference's job, to make probes at sizes that are multiples
of its own blocks only (``job.step_facts``), and the caller, to say what a change of such a block requires of its
inputs that the original did not (``input_contracts``).

A step is a `for` loop over `range(...)` whose arguments read the block and a dimension (a parameter that is not a
constexpr: `range(0, K, BLOCK_K)`, `range(tl.cdiv(K, BLOCK_K))`), holding a `tl.load` or `tl.store` without `mask`
(nor `boundary_check`) whose pointer depends on the block (through the kernel's assignments: `tl.arange(0, BLOCK_K)`,
`a_ptrs += BLOCK_K * stride_ak`). A kernel that covers a dimension with its grid (`pid * BLOCK + tl.arange(0, BLOCK)`,
no loop) steps too, with the dimension unknown: the grid is the caller's.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

MEMORY_CALLS = {"load": 2, "store": 3}  # the position of `mask` among each one's arguments


@dataclass(frozen=True)
class Step:
    """The product of `blocks` tiles `dims` (empty: a dimension the grid covers) with a load or store that is not
    masked at `line` (of the kernel's source as given)."""

    blocks: tuple[str, ...]
    dims: tuple[str, ...]
    line: int


def kernel_steps(kernel: ast.FunctionDef) -> list[Step]:
    """The steps of a `@triton.jit` function's definition, one per loop (the first unmasked access's line), in the
    order of the source. A loop's step is the product of the constexprs of its `range` that tile (`tl.arange(0,
    BLOCK_K)`) or multiply one that does (`tl.cdiv(K, BLOCK_K * SPLIT_K)`); one that only strides over rows (a
    persistent loop's `NUM_PROGRAMS`) needs no multiple: the loop's bound stops it."""
    params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args, *kernel.args.kwonlyargs)]
    constexprs = {a.arg for a in (*kernel.args.args, *kernel.args.kwonlyargs) if _is_constexpr(a.annotation)}
    sizes = set(params) - constexprs
    tiles = {c for c in constexprs if _tiles_with_arange(kernel, c)}
    reads = _reads(kernel)
    steps: list[Step] = []
    looped: set[str] = set()  # tiles that a loop's step covers
    for loop in (n for n in ast.walk(kernel) if isinstance(n, ast.For) and _is_range(n.iter)):
        bound = _names(loop.iter)
        dims = tuple(sorted(bound & sizes))
        stepping = bound & tiles
        access = next((line for b in sorted(stepping) if (line := _unmasked_access(loop, b, reads))), None)
        if dims and access is not None:
            blocks = stepping | _multiplying(loop.iter, stepping, constexprs)
            steps.append(Step(tuple(sorted(blocks)), dims, access))
            looped |= stepping
    for block in sorted(tiles - looped):
        access = _unmasked_access(kernel, block, reads)
        if access is not None:
            steps.append(Step((block,), (), access))
    return sorted(steps, key=lambda s: (s.line, s.blocks))


def source_steps(source: str) -> dict[str, list[Step]]:
    """The steps of every `@triton.jit` kernel defined in `source` (a module's, or one function's), by name;
    {} where it does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return {}
    kernels = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_jit(n)]
    return {k.name: found for k in kernels if (found := kernel_steps(k))}


def _multiplying(node: ast.expr, tiles: set[str], constexprs: set[str]) -> set[str]:
    """The constexprs that multiply a tile in `node` (`BLOCK_K * SPLIT_K`)."""
    found: set[str] = set()
    for product in (n for n in ast.walk(node) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult)):
        names = _names(product)
        if names & tiles:
            found |= names & constexprs
    return found


def _is_jit(node: ast.FunctionDef) -> bool:
    """Decorated `@triton.jit` / `@jit` (with or without arguments)."""
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if (isinstance(target, ast.Attribute) and target.attr == "jit") or (
            isinstance(target, ast.Name) and target.id == "jit"
        ):
            return True
    return False


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return annotation is not None and "constexpr" in ast.unparse(annotation)


def _is_range(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _callee(node) in ("range", "static_range")


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _reads(kernel: ast.FunctionDef) -> dict[str, set[str]]:
    """Each name the kernel assigns -> the names it is computed from, directly or through other assignments."""
    direct: dict[str, set[str]] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in _names(target):
                    direct.setdefault(name, set()).update(_names(node.value))
        elif isinstance(node, ast.For):
            for name in _names(node.target):
                direct.setdefault(name, set()).update(_names(node.iter))
    closed: dict[str, set[str]] = {}
    for start in direct:
        seen, todo = set(), [start]
        while todo:
            for name in direct.get(todo.pop(), ()):
                if name not in seen:
                    seen.add(name)
                    todo.append(name)
        closed[start] = seen
    return closed


def _depends_on(expr: ast.expr, name: str, reads: dict[str, set[str]]) -> bool:
    used = _names(expr)
    return name in used or any(name in reads.get(u, ()) for u in used)


def _unmasked_access(scope: ast.AST, block: str, reads: dict[str, set[str]]) -> int | None:
    """The line of the first `tl.load` / `tl.store` in `scope` without a mask whose pointer depends on `block`."""
    for node in ast.walk(scope):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        position = MEMORY_CALLS.get(node.func.attr)
        if position is None or not node.args or _masked(node, position):
            continue
        if _depends_on(node.args[0], block, reads):
            return node.lineno
    return None


def _masked(call: ast.Call, position: int) -> bool:
    keywords = {k.arg for k in call.keywords}
    if "boundary_check" in keywords:
        return True
    if "mask" in keywords:
        return not (isinstance(mask := next(k.value for k in call.keywords if k.arg == "mask"), ast.Constant)
                    and mask.value is None)  # fmt: skip
    return len(call.args) >= position


def _tiles_with_arange(kernel: ast.FunctionDef, block: str) -> bool:
    """Whether the kernel makes a range of `block` offsets (`tl.arange(0, BLOCK)`): a tile of that block."""
    return any(isinstance(n, ast.Call) and _callee(n) == "arange" and block in _names(n) for n in ast.walk(kernel))
