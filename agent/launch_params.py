"""Tunable launch parameters of a Triton module, found and rewritten by pure source analysis.

A parameter is tunable when its value at a launch site ``kernel[grid](...)`` of a non-autotuned
``@triton.jit`` kernel is an integer literal, either written in the call or bound once to a literal in
the enclosing scope (``BLOCK = 1024``, or a wrapper parameter's default ``block_size: int = 1024``; then
that binding is rewritten, and every other use of the name follows). Tunable are:

- ``tl.constexpr`` arguments (keyword or positional) holding a power of two from 16 to 65536 (smaller
  values are usually flags or row counts), also as the literal bound of the common
  ``min(4096, triton.next_power_of_2(n))`` / ``max(...)`` pattern;
- ``num_warps`` and ``num_stages``; when a launch omits them they are still tunable, starting from Triton's
  default (``num_warps=4``; ``num_stages=3`` on NVIDIA, 2 on AMD, reported as 3 and marked ``default``), and a
  change inserts the keyword into the call.

Rewriting touches only the changed literals (or inserts the missing keyword); every other byte is preserved.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Literal

from geak.evaluator.python_source import parse
from geak.evaluator.triton_file import AUTOTUNE_DECORATORS, decorator_name, is_kernel_def

ParamKind = Literal["constexpr", "num_warps", "num_stages"]

NUM_WARPS_CHOICES = (1, 2, 4, 8, 16)
NUM_STAGES_CHOICES = (1, 2, 3, 4, 5)
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
MIN_BLOCK = 16
MAX_BLOCK = 65536
_BLOCK_FACTORS = (0.25, 0.5, 1, 2, 4)
_LAUNCH_OPTIONS: tuple[ParamKind, ...] = ("num_warps", "num_stages")
_DEFAULTS = {"num_warps": DEFAULT_NUM_WARPS, "num_stages": DEFAULT_NUM_STAGES}

_ScopeNode = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
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


@dataclass(frozen=True)
class _Edit:
    """Where a parameter's value lives in the source: a literal to replace, or a keyword to insert."""

    line: int
    col: int  # UTF-8 byte offset, as `ast` reports it
    end_line: int
    end_col: int
    keyword: str = ""  # for an absent launch option: the keyword to insert at (line, col)
    after_argument: bool = False  # the insertion follows an argument, so it starts with ", "
    linked: tuple[tuple[int, int, int, int], ...] = ()  # equal literals in the launch's grid, rewritten too

    @property
    def is_insertion(self) -> bool:
        return bool(self.keyword)


@dataclass(frozen=True)
class TunableParam:
    """One launch parameter that can be changed by rewriting the source.

    ``key`` is stable under `apply_params` (rewrites never add lines), so it identifies the parameter in both
    the original and the rewritten source. ``default`` is True for a ``num_warps``/``num_stages`` the launch
    omits.
    """

    key: str
    kernel: str
    name: str
    kind: ParamKind
    current: int
    line: int
    choices: tuple[int, ...]
    default: bool
    _edit: _Edit = field(repr=False, compare=False)


@dataclass(frozen=True)
class _Kernel:
    name: str
    positional: tuple[str, ...]  # parameter names that can be passed by position, in order
    constexprs: frozenset[str]
    autotuned: bool


def autotuned_kernels(source: str) -> list[str]:
    """Names of the ``@triton.jit`` kernels under ``@triton.autotune`` (their configs are tuned by Triton)."""
    return [k.name for k in _kernels(_parse(source)).values() if k.autotuned]


def find_tunable_params(source: str) -> list[TunableParam]:
    """All tunable launch parameters of the module, in source order of their launch sites."""
    tree = _parse(source)
    kernels = {name: k for name, k in _kernels(tree).items() if not k.autotuned}
    params: list[TunableParam] = []
    claimed: set[tuple[int, int]] = set()  # literals already owned by a parameter (a name shared by launches)
    seen_keys: Counter[str] = Counter()
    for call, kernel_name, scopes in _launch_sites(tree, kernels):
        for param in _call_params(call, kernels[kernel_name], scopes):
            location = (param._edit.line, param._edit.col)
            if not param._edit.is_insertion:
                if location in claimed:
                    continue
                claimed.add(location)
            seen_keys[param.key] += 1
            if seen_keys[param.key] > 1:  # two launches of one kernel on one line: number them in order
                param = replace(param, key=f"{param.key}#{seen_keys[param.key]}")
            params.append(param)
    return params


def apply_params(source: str, values: Mapping[str, int]) -> str:
    """Return ``source`` with the given parameters (by key) set to the given values.

    Only changed values are rewritten. Raises ``ValueError`` for an unknown key, a value outside the
    parameter's choices, or a result that does not parse back to the requested values.
    """
    params = {p.key: p for p in find_tunable_params(source)}
    unknown = sorted(set(values) - set(params))
    if unknown:
        known = ", ".join(params) or "none"
        raise ValueError(f"unknown launch parameter(s) {', '.join(unknown)}; tunable here: {known}")
    edits: list[tuple[int, int, str]] = []  # (start, end) byte range and its new text
    insertions: dict[int, tuple[bool, list[str]]] = {}  # position -> (after an argument, keywords)
    line_starts = _line_starts(source)
    for key, value in values.items():
        param = params[key]
        if isinstance(value, bool) or not isinstance(value, int) or value not in param.choices:
            raise ValueError(f"{key}: value {value!r} is not one of the choices {param.choices}")
        if value == param.current:
            continue
        edit = param._edit
        start = line_starts[edit.line - 1] + edit.col
        if edit.is_insertion:
            insertions.setdefault(start, (edit.after_argument, []))[1].append(f"{edit.keyword}={value}")
        else:
            edits.append((start, line_starts[edit.end_line - 1] + edit.end_col, str(value)))
            for line, col, end_line, end_col in edit.linked:
                edits.append((line_starts[line - 1] + col, line_starts[end_line - 1] + end_col, str(value)))
    for position, (after_argument, keywords) in insertions.items():
        keywords.sort(key=lambda keyword: _LAUNCH_OPTIONS.index(keyword.split("=")[0]))
        edits.append((position, position, (", " if after_argument else "") + ", ".join(keywords)))
    if not edits:
        return source
    edits = sorted(set(edits))
    clashes = [a for a, b in pairwise(edits) if b[0] < a[1]]
    if clashes:
        raise ValueError("two parameters rewrite the same grid literal with different values")
    encoded = source.encode("utf-8")
    pieces: list[bytes] = []
    position = 0
    for start, end, text in sorted(edits):
        pieces += [encoded[position:start], text.encode("utf-8")]
        position = end
    pieces.append(encoded[position:])
    result = b"".join(pieces).decode("utf-8")
    _verify(result, values)
    return result


def _verify(result: str, values: Mapping[str, int]) -> None:
    try:
        rewritten = {p.key: p.current for p in find_tunable_params(result)}
    except ValueError as exc:
        raise ValueError(f"rewriting launch parameters produced invalid Python: {exc}") from exc
    wrong = [key for key, value in values.items() if rewritten.get(key) != value]
    if wrong:
        raise ValueError(f"rewriting launch parameters did not take effect for: {', '.join(wrong)}")


def _parse(source: str) -> ast.Module:
    try:
        return parse(source)
    except SyntaxError as exc:
        raise ValueError(f"source is not valid Python (line {exc.lineno}): {exc.msg}") from exc


def _line_starts(source: str) -> list[int]:
    """Byte offset of the start of every line (``ast`` columns are UTF-8 byte offsets)."""
    starts = [0]
    for index, byte in enumerate(source.encode("utf-8")):
        if byte == ord("\n"):
            starts.append(index + 1)
    return starts


# --- kernels ---------------------------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_constexpr(annotation: ast.expr | None) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split(".")[-1] == "constexpr"
    return annotation is not None and _dotted(annotation).split(".")[-1] == "constexpr"


def _kernels(tree: ast.Module) -> dict[str, _Kernel]:
    kernels: dict[str, _Kernel] = {}
    for node in ast.walk(tree):
        if not is_kernel_def(node) or node.name in kernels:
            continue
        decorators = {decorator_name(d) for d in node.decorator_list}
        positional = [*node.args.posonlyargs, *node.args.args]
        constexprs = frozenset(a.arg for a in [*positional, *node.args.kwonlyargs] if _is_constexpr(a.annotation))
        kernels[node.name] = _Kernel(
            node.name,
            tuple(a.arg for a in positional),
            constexprs,
            autotuned=bool(decorators & AUTOTUNE_DECORATORS),
        )
    return kernels


# --- launch sites ----------------------------------------------------------------------------------------


_LaunchSite = tuple[ast.Call, str, tuple[_ScopeNode, ...]]


def _launch_sites(tree: ast.Module, kernels: Mapping[str, _Kernel]) -> Iterator[_LaunchSite]:
    """Every ``kernel[grid](...)`` call, with the kernel's name and the enclosing scopes (innermost last)."""

    def visit(node: ast.AST, scopes: tuple[_ScopeNode, ...]) -> Iterator[_LaunchSite]:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in kernels
        ):
            yield node, node.func.value.id, scopes
        inner = (*scopes, node) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else scopes
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)

    yield from visit(tree, (tree,))


def _call_params(call: ast.Call, kernel: _Kernel, scopes: tuple[_ScopeNode, ...]) -> Iterator[TunableParam]:
    keywords = {kw.arg: kw for kw in call.keywords if kw.arg is not None}
    passed = [*_positional_arguments(call, kernel), *((kw.arg, kw.value) for kw in call.keywords)]
    for name, value in passed:
        if name in kernel.constexprs:
            found = _tunable_literal(value, scopes, block_size=True)
            if found is not None:
                linked = _grid_literals(call, found.value) if found.node is value else ()
                yield _make_param(kernel.name, name, "constexpr", found, linked)
    for option in _LAUNCH_OPTIONS:
        if option in keywords:
            found = _tunable_literal(keywords[option].value, scopes, block_size=False)
            if found is not None:
                yield _make_param(kernel.name, option, option, found)
        elif not any(kw.arg is None for kw in call.keywords):  # no **kwargs that could carry it
            yield _default_param(call, kernel.name, option)


def _positional_arguments(call: ast.Call, kernel: _Kernel) -> Iterator[tuple[str, ast.expr]]:
    """(parameter name, value) of the positional arguments, up to the first ``*args``."""
    for name, value in zip(kernel.positional, call.args, strict=False):
        if isinstance(value, ast.Starred):
            return
        yield name, value


def _grid_literals(call: ast.Call, value: int) -> tuple[tuple[int, int, int, int], ...]:
    """Integer literals equal to `value` in the launch's grid (`k[(triton.cdiv(n, 256),)](..., BLOCK=256)`),
    which must change together with the block size for the launch to stay correct."""
    assert isinstance(call.func, ast.Subscript)
    return tuple(
        (n.lineno, n.col_offset, n.end_lineno or n.lineno, n.end_col_offset or 0)
        for n in ast.walk(call.func.slice)
        if isinstance(n, ast.Constant) and type(n.value) is int and n.value == value
    )


def _make_param(
    kernel: str, name: str, kind: ParamKind, literal: _Literal, linked: tuple[tuple[int, int, int, int], ...] = ()
) -> TunableParam:
    node = literal.node
    edit = _Edit(node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, linked=linked)
    return TunableParam(
        key=f"{kernel}:{name}@L{node.lineno}",
        kernel=kernel,
        name=name,
        kind=kind,
        current=literal.value,
        line=node.lineno,
        choices=_choices(kind, literal.value),
        default=False,
        _edit=edit,
    )


def _default_param(call: ast.Call, kernel: str, option: ParamKind) -> TunableParam:
    """A launch option the call omits: inserted after the last argument when changed."""
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if arguments:
        last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
        line, col = last.end_lineno or call.lineno, last.end_col_offset or 0
    else:  # `kernel[grid]()`: the closing parenthesis is the last byte of the call
        line, col = call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1
    current = _DEFAULTS[option]
    return TunableParam(
        key=f"{kernel}:{option}@L{line}",
        kernel=kernel,
        name=option,
        kind=option,
        current=current,
        line=line,
        choices=_choices(option, current),
        default=True,
        _edit=_Edit(line, col, line, col, keyword=option, after_argument=bool(arguments)),
    )


def _choices(kind: ParamKind, current: int) -> tuple[int, ...]:
    if kind == "num_warps":
        candidates = set(NUM_WARPS_CHOICES)
    elif kind == "num_stages":
        candidates = set(NUM_STAGES_CHOICES)
    else:
        scaled = (int(current * factor) for factor in _BLOCK_FACTORS)
        candidates = {v for v in scaled if MIN_BLOCK <= v <= MAX_BLOCK and _is_power_of_two(v)}
    return tuple(sorted(candidates | {current}))


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class _Literal:
    node: ast.Constant
    value: int


def _int_literal(node: ast.expr) -> _Literal | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _Literal(node, node.value)
    return None


def _clamped_power_of_two_bound(node: ast.expr) -> _Literal | None:
    """The literal of ``min(LIT, triton.next_power_of_2(n))`` or ``max(...)`` (either argument order)."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("min", "max")
        and len(node.args) == 2
        and not node.keywords
    ):
        return None
    first, second = node.args
    for literal_node, other in ((first, second), (second, first)):
        literal = _int_literal(literal_node)
        if literal is not None and isinstance(other, ast.Call) and _dotted(other.func).endswith("next_power_of_2"):
            return literal
    return None


def _tunable_literal(value: ast.expr, scopes: tuple[_ScopeNode, ...], *, block_size: bool) -> _Literal | None:
    """The literal that sets an argument's value: in the call itself, or in the single binding of a name.

    Block sizes must be powers of two in [MIN_BLOCK, MAX_BLOCK] and may also be the literal bound of a
    clamped ``next_power_of_2``.
    """
    bound = _single_binding(value.id, scopes) if isinstance(value, ast.Name) else value
    if bound is None:
        return None
    literal = _int_literal(bound)
    if block_size:
        literal = literal or _clamped_power_of_two_bound(bound)
        in_range = literal is not None and MIN_BLOCK <= literal.value <= MAX_BLOCK
        return literal if in_range and _is_power_of_two(literal.value) else None
    return literal if literal is not None and literal.value >= 1 else None


# --- name resolution -------------------------------------------------------------------------------------


def _single_binding(name: str, scopes: tuple[_ScopeNode, ...]) -> ast.expr | None:
    """The value of ``name`` if its scope binds it exactly once, by ``name = value`` (or ``name: T = value``,
    or as a parameter with a default value, which is then what gets rewritten).

    The scope is the innermost enclosing function that binds the name, else the module (Python's rule, except
    that class bodies are not searched; they are not visible from methods either).
    """
    for scope in reversed(scopes):
        bindings = list(_bindings(scope, name))
        if bindings or scope is scopes[0]:
            if len(bindings) != 1:
                return None
            return bindings[0]
    return None


def _bindings(scope: _ScopeNode, name: str) -> Iterator[ast.expr | None]:
    """Each binding of ``name`` directly in ``scope``: the value of a simple assignment or the default of a
    parameter, else None."""
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        yield from _parameter_bindings(scope.args, name)
    body: list[ast.AST] = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)
    simple_targets: set[int] = set()  # ids of the `Name` targets of simple assignments already yielded
    for node in _scope_nodes(body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _is_name(node.targets[0], name):
            simple_targets.add(id(node.targets[0]))
            yield node.value
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
