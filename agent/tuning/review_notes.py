"""What a reviewer must hear of a launch-configuration change that the file's test cannot show.

- A constexpr that takes its kernel onto a path that adds into memory with `tl.atomic_*` (a split-K matmul's
  `SPLIT_K 1→2`, say, leaves `tl.store` for `tl.atomic_add`). The check passes where the test's
  outputs start at zero; a caller that hands the kernel a buffer of its own must zero it first, and the sums' order,
  so their last bits, then varies from run to run.
- An autotuned kernel pinned to the config timed here: every size then runs it, sizes the test never times too.
- Launch options set at a kernel's definition (``definition_options``): they override what any launch passes.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterable
from dataclasses import dataclass

from geak.evaluator import decorator_name, is_kernel_def
from geak.evaluator import parse_python as parse

_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}  # fmt: skip


@dataclass(frozen=True)
class ParamChange:
    """One constexpr parameter of a kernel, set from `old` to `new` by a launch-configuration change."""

    kernel: str
    param: str
    old: int
    new: int


def atomic_path_notes(source: str, changes: Iterable[ParamChange]) -> list[str]:
    """A note per change whose new value, and not its old one, takes a branch of its kernel that calls
    `tl.atomic_*` (the branch's test read with the parameter's value; a test that reads anything else is left
    alone)."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return []
    kernels = {node.name: node for node in ast.walk(tree) if is_kernel_def(node)}
    notes = []
    for change in changes:
        kernel = kernels.get(change.kernel)
        if kernel is None:
            continue
        for branch in ast.walk(kernel):
            if not isinstance(branch, ast.If) or not _reads(branch.test, change.param):
                continue
            before, after = (_truth(branch.test, change.param, v) for v in (change.old, change.new))
            if before is None or after is None or before == after:
                continue
            atomic = _first_atomic(branch.body if after else branch.orelse)
            if atomic is not None and _first_atomic(branch.body if before else branch.orelse) is None:
                name, line = atomic
                start = "start at zero" if name.endswith("atomic_add") else "hold its starting value first"
                notes.append(
                    f"{change.kernel}: {change.param} {change.old}→{change.new} takes its `{name}` path (line {line}): "
                    f"it updates memory atomically, which must {start} (the test's did; so must a buffer a caller "
                    "passes in), and the order of the updates, so the last bits of sums, varies from run to run"
                )
    return notes


def definition_note(kernel: str, options: list[str]) -> str:
    """The note for a kernel whose definition now sets `options` (``definition_options``) for every launch of it."""
    said = " and ".join(options)
    return (f"{kernel}: its definition now sets {said} (`@triton.heuristics`) for every launch of it, overriding "
            "what a launch passes: the test's launches pass none; other code that launches it must not")  # fmt: skip


def pinned_note(kernel: str, configs: int) -> str:
    """The note for an autotuned kernel whose `configs` configs the change replaces by the one it timed."""
    return (f"{kernel}: its autotuner's {configs} configs are replaced by the one timed here, so every size runs it, "
            "sizes the test does not time too (keep the others beside it where those matter)")  # fmt: skip


def _reads(test: ast.expr, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(test))


def _truth(test: ast.expr, name: str, value: int) -> bool | None:
    """The test's value with `name` set to `value`; None where it reads anything else or is not a comparison."""

    def value_of(node: ast.expr) -> object:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | bool):
            return node.value
        if isinstance(node, ast.Name) and node.id == name:
            return value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = value_of(node.operand)
            return None if inner is None else not inner
        if isinstance(node, ast.BoolOp):
            parts = [value_of(v) for v in node.values]
            if any(p is None for p in parts):
                return None
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        if isinstance(node, ast.Compare):
            left = value_of(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = value_of(right_node)
                if left is None or right is None or type(op) not in _COMPARE:
                    return None
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        return None

    result = value_of(test)
    return None if result is None else bool(result)


def _first_atomic(body: list[ast.stmt]) -> tuple[str, int] | None:
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and decorator_name(node).rsplit(".", 1)[-1].startswith("atomic_"):
                return decorator_name(node), node.lineno
    return None
