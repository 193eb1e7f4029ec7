"""Where a name of a Python module is bound (``bound_values``): how ``launch_params`` follows a launch argument
back through names, parameters' defaults and module functions' returns to the literals that set it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

ScopeNode = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_NEW_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def bound_values(name: str, scopes: tuple[ScopeNode, ...]) -> list[tuple[ast.expr, tuple[ScopeNode, ...], str]]:
    """Every value ``name`` is bound to in its scope, with the scopes to read that value in and how ("name", or
    "returned" by a function); none when the name is bound any other way too (a loop variable, an augmented
    assignment, an import...), so it is not a set of literals.

    The scope is the innermost enclosing function that binds the name, else the module (Python's rule, except
    that class bodies are not searched; they are not visible from methods either). A name unpacked from what a
    module function returns (``BLOCK, warps = settings(n)``) is bound to that element of each of its ``return``s.
    """
    for index, scope in reversed(list(enumerate(scopes))):
        bindings = list(_bindings(scope, name))
        if bindings or scope is scopes[0]:
            if not bindings or any(b is None for b in bindings):
                return []
            outer = scopes[: index + 1]
            resolved: list[tuple[ast.expr, tuple[ScopeNode, ...], str]] = []
            for binding in bindings:
                assert binding is not None
                if isinstance(binding, _Unpacked):
                    resolved += [(value, inner, "returned") for value, inner in _unpacked(binding, scopes[0])]
                else:
                    resolved.append((binding, outer, "name"))
            return resolved
    return []


@dataclass(frozen=True)
class _Unpacked:
    """``a, b = f(...)``: the name is element `index` of what the call returns."""

    call: ast.Call
    index: int
    width: int


def _unpacked(binding: _Unpacked, module: ScopeNode) -> list[tuple[ast.expr, tuple[ScopeNode, ...]]]:
    assert isinstance(module, ast.Module)
    if not isinstance(binding.call.func, ast.Name):
        return []
    function = module_function(module, binding.call.func.id)
    if function is None:
        return []
    found = []
    for returned in returned_values(function):
        if not (isinstance(returned, ast.Tuple) and len(returned.elts) == binding.width):
            return []
        found.append((returned.elts[binding.index], (module, function)))
    return found


def module_function(module: ast.Module, name: str) -> ast.FunctionDef | None:
    defs = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return defs[0] if len(defs) == 1 else None


def returned_values(function: ast.FunctionDef) -> list[ast.expr]:
    """The values of a function's own ``return`` statements (not those of functions nested in it)."""
    return [n.value for n in _scope_nodes(list(function.body)) if isinstance(n, ast.Return) and n.value is not None]


def _bindings(scope: ScopeNode, name: str) -> Iterator[ast.expr | _Unpacked | None]:
    """Each binding of ``name`` directly in ``scope``: the value of a simple assignment, the default of a
    parameter, an element unpacked from a call's result, else None."""
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        yield from _parameter_bindings(scope.args, name)
    body: list[ast.AST] = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)
    simple_targets: set[int] = set()  # ids of the `Name` targets of simple assignments already yielded
    for node in _scope_nodes(body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _is_name(node.targets[0], name):
            simple_targets.add(id(node.targets[0]))
            yield node.value
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Call)
            and any(_is_name(t, name) for t in node.targets[0].elts)
        ):
            elts = node.targets[0].elts
            index = next(i for i, t in enumerate(elts) if _is_name(t, name))
            simple_targets.add(id(elts[index]))
            yield _Unpacked(node.value, index, len(elts))
        elif isinstance(node, ast.AnnAssign) and _is_name(node.target, name):
            simple_targets.add(id(node.target))
            yield node.value
        elif _binds_otherwise(node, name) and id(node) not in simple_targets:
            yield None


def _parameter_bindings(arguments: ast.arguments, name: str) -> Iterator[ast.expr | None]:
    """The default value of parameter ``name`` (None when it has none)."""
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += arguments.defaults
    keyword_only = list(zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True))
    for argument, default in [*zip(positional, defaults, strict=True), *keyword_only]:
        if argument.arg == name:
            yield default
    for argument in (arguments.vararg, arguments.kwarg):
        if argument is not None and argument.arg == name:
            yield None


def _binds_otherwise(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds ``name`` (or makes it non-local) other than as an assignment's value."""
    if isinstance(node, ast.Name):
        return node.id == name and not isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.Global | ast.Nonlocal):
        return name in node.names
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == name
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.ExceptHandler):
        return node.name == name
    return False


def _scope_nodes(body: list[ast.AST]) -> Iterator[ast.AST]:
    """All nodes of a scope's body in pre-order, not descending into nested scopes (they have own names)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NEW_SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
