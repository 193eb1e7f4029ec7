"""Tunable launch parameters of a Triton module, found and rewritten by pure source analysis.

A parameter is tunable when its value at a launch site ``kernel[grid](...)`` of a non-autotuned
``@triton.jit`` kernel comes from integer literals the source sets it with: written in the call; bound to a name in
the enclosing scope (``BLOCK = 1024``; a wrapper parameter's default ``block_size: int = 1024``; assignments in the
branches of an ``if``, each its own parameter; then that binding is rewritten, and every other use of the name
follows); a row of a table (``configs[dtype]["BLOCK_SIZE_M"]``: one parameter per row a runtime key can select); a
branch of a conditional expression (``4 if n <= 64 else 8``); the literal bound of the common
``min(4096, triton.next_power_of_2(n))`` / ``max(...)`` pattern; an element of what a module function returns into a
tuple (``BLOCK, num_warps = calculate_settings(n)``); or a value a ``@triton.heuristics`` function gives. Where one
launch passes one name to several meta-parameters (``BLOCK_M=BLOCK, BLOCK_N=BLOCK``), the first owns the name's
literal (and every other use of the name, the grid's among them) and each other one is tuned on its own too: a change
writes its literal in place of the name in that keyword alone (``BLOCK_N=64``). Tunable are:

- ``tl.constexpr`` arguments (keyword or positional) holding a power of two from 16 to 65536 (smaller
  values are usually flags or row counts);
- ``num_warps`` and ``num_stages``; when a launch omits them they are still tunable, starting from Triton's
  default on the device (``num_warps=4``; ``num_stages=3`` on NVIDIA, 2 on AMD; marked ``default``), and a change
  inserts the keyword into the call; ``num_ctas`` where the launch sets it;
- on ROCm, its compile options ``waves_per_eu``, ``matrix_instr_nonkdim`` and ``kpack`` over the values the device
  accepts (``device_target``), inserted like the two above where a launch omits them.

``@triton.autotune`` kernels are tuned through their config lists instead (``autotune_configs``).
Rewriting touches only the changed literals (or inserts the missing keyword); every other byte is preserved.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Literal

from geak.evaluator import AUTOTUNE_DECORATORS, constexpr_params, decorator_name, is_kernel_def
from geak.evaluator import parse_python as parse

from .device_target import ROCM_OPTIONS, DeviceTarget
from .name_bindings import ScopeNode, bound_values, module_function, returned_values

HEURISTICS_DECORATORS = frozenset({"triton.heuristics", "heuristics"})

ParamKind = Literal["constexpr", "num_warps", "num_stages", "num_ctas", "waves_per_eu", "matrix_instr_nonkdim", "kpack"]

NUM_WARPS_CHOICES = (1, 2, 4, 8, 16)
NUM_STAGES_CHOICES = (1, 2, 3, 4, 5)
MIN_BLOCK = 16
MAX_BLOCK = 65536
_BLOCK_FACTORS = (0.25, 0.5, 1, 2, 4)
_OPTION_CHOICES: dict[str, tuple[int, ...]] = {
    "num_warps": NUM_WARPS_CHOICES,
    "num_stages": NUM_STAGES_CHOICES,
    "num_ctas": (1, 2),
}
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")
INSERTED_OPTIONS: tuple[ParamKind, ...] = ("num_warps", "num_stages")  # tunable even where a launch omits them
_INSERTION_ORDER = (*INSERTED_OPTIONS, *ROCM_OPTIONS)
_NO_DEVICE = DeviceTarget()
_MAX_DEPTH = 8  # names and tables followed through at most this many steps


def inserted_options(device: DeviceTarget) -> tuple[ParamKind, ...]:
    """The options tunable on `device` where a launch omits them: warps and stages, and ROCm's compile options with
    values to try there."""
    return (*INSERTED_OPTIONS, *device.tuned_rocm_options)  # type: ignore[return-value]


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
    group: str = ""  # the launch configuration it belongs to: its launch site, and the table row or branch it sets
    via: str = "literal"  # how the launch reaches its literal (``VIAS``); "default" for an omitted option
    tied_to: str = ""  # a keyword passed a name another parameter of its launch owns: that one's key (followed)


@dataclass(frozen=True)
class _Kernel:
    name: str
    positional: tuple[str, ...]  # parameter names that can be passed by position, in order
    constexprs: frozenset[str]
    autotuned: bool
    heuristics: tuple[tuple[str, ast.expr], ...] = ()  # (name, function) of its `@triton.heuristics({...})`

    @property
    def set_by_heuristics(self) -> frozenset[str]:
        """The names its heuristics set: Triton overwrites what a launch passes for them, so a launch's value of one
        (written or inserted) changes nothing."""
        return frozenset(name for name, _ in self.heuristics)


@dataclass(frozen=True)
class KernelLaunches:
    """A ``@triton.jit`` kernel of a module and its ``kernel[grid](...)`` calls (``_launch_sites``)."""

    name: str
    autotuned: bool
    set_by_heuristics: frozenset[str]
    calls: tuple[ast.Call, ...]


def kernel_launches(tree: ast.Module) -> list[KernelLaunches]:
    """Every ``@triton.jit`` kernel of the module, autotuned or not, with its launches (none for one launched
    otherwise)."""
    kernels = _kernels(tree)
    calls: dict[str, list[ast.Call]] = {name: [] for name in kernels}
    for call, name, _ in _launch_sites(tree, kernels):
        calls[name].append(call)
    return [KernelLaunches(k.name, k.autotuned, k.set_by_heuristics, tuple(calls[k.name])) for k in kernels.values()]


def autotuned_kernels(source: str) -> list[str]:
    """Names of the ``@triton.jit`` kernels under ``@triton.autotune`` (their configs are tuned by Triton)."""
    return [k.name for k in _kernels(_parse(source)).values() if k.autotuned]


def find_tunable_params(source: str, device: DeviceTarget | str | None = None) -> list[TunableParam]:
    """All tunable launch parameters of the module, in source order of their launch sites (then the heuristics'), on
    `device` (a ``DeviceTarget`` or a backend's name; ROCm adds its compile options)."""
    tree = _parse(source)
    target = DeviceTarget.of(device)
    kernels = {name: k for name, k in _kernels(tree).items() if not k.autotuned}
    options = (*_LAUNCH_OPTIONS, *target.tuned_rocm_options)
    params: list[TunableParam] = []
    claimed: dict[tuple[int, int], TunableParam] = {}  # literal -> the parameter that owns it (a name shared)
    seen_keys: Counter[str] = Counter()
    sites = _launch_sites(tree, kernels)
    found = [p for call, name, scopes in sites for p in _call_params(call, kernels[name], scopes, target, options)]
    found += [p for kernel in kernels.values() for p in _heuristic_params(tree, kernel, target)]
    for param in found:
        owns = None  # the literal this parameter owns, if it is one's first
        if isinstance(param, _SplitCandidate):
            owner = claimed.get(param.literal)
            if owner is None or owner.group != param.param.group or owner.name == param.param.name:
                continue  # the keyword owns the name's literal, or another launch does: nothing to split from
            param = replace(param.param, tied_to=owner.key)
        elif not param._edit.is_insertion:
            owns = (param._edit.line, param._edit.col)
            if owns in claimed:
                continue
        seen_keys[param.key] += 1
        if seen_keys[param.key] > 1:  # two launches of one kernel on one line: number them in order
            param = replace(param, key=f"{param.key}#{seen_keys[param.key]}")
        if owns is not None:
            claimed[owns] = param  # under its numbered key, which a tied keyword follows
        params.append(param)
    return params


def apply_params(source: str, values: Mapping[str, int], device: DeviceTarget | str | None = None) -> str:
    """Return ``source`` with the given parameters (by key) set to the given values.

    Only changed values are rewritten. Raises ``ValueError`` for an unknown key, a value outside the
    parameter's choices, or a result that does not parse back to the requested values.
    """
    params = {p.key: p for p in find_tunable_params(source, device)}
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
        follows = values.get(param.tied_to, params[param.tied_to].current) if param.tied_to else param.current
        if value == follows:  # as it is (a tied keyword: as the name it is passed gives it)
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
        keywords.sort(key=lambda keyword: _INSERTION_ORDER.index(keyword.split("=")[0]))
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
    _verify(result, values, device)
    return result


def _verify(result: str, values: Mapping[str, int], device: DeviceTarget | str | None) -> None:
    try:
        rewritten = {p.key: p.current for p in find_tunable_params(result, device)}
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


def _kernels(tree: ast.Module) -> dict[str, _Kernel]:
    kernels: dict[str, _Kernel] = {}
    for node in ast.walk(tree):
        if not is_kernel_def(node) or node.name in kernels:
            continue
        decorators = {decorator_name(d) for d in node.decorator_list}
        positional = [*node.args.posonlyargs, *node.args.args]
        constexprs = frozenset(constexpr_params(node))
        heuristics = tuple(
            (key.value, value)
            for d in node.decorator_list
            if isinstance(d, ast.Call) and decorator_name(d) in HEURISTICS_DECORATORS and d.args
            and isinstance(d.args[0], ast.Dict)
            for key, value in zip(d.args[0].keys, d.args[0].values, strict=True)
            if isinstance(key, ast.Constant) and isinstance(key.value, str)
        )  # fmt: skip
        kernels[node.name] = _Kernel(
            node.name,
            tuple(a.arg for a in positional),
            constexprs,
            autotuned=bool(decorators & AUTOTUNE_DECORATORS),
            heuristics=heuristics,
        )
    return kernels


# --- launch sites ----------------------------------------------------------------------------------------


_LaunchSite = tuple[ast.Call, str, tuple[ScopeNode, ...]]


def _launch_sites(tree: ast.Module, kernels: Mapping[str, _Kernel]) -> Iterator[_LaunchSite]:
    """Every ``kernel[grid](...)`` call, with the kernel's name and the enclosing scopes (innermost last)."""

    def visit(node: ast.AST, scopes: tuple[ScopeNode, ...]) -> Iterator[_LaunchSite]:
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


def _call_params(
    call: ast.Call, kernel: _Kernel, scopes: tuple[ScopeNode, ...], device: DeviceTarget, options: tuple[str, ...]
) -> Iterator[TunableParam | _SplitCandidate]:
    overwritten = kernel.set_by_heuristics
    keywords = {kw.arg: kw for kw in call.keywords if kw.arg is not None and kw.arg not in overwritten}
    spread = any(kw.arg is None for kw in call.keywords)  # `**kwargs`: what it holds is unknown
    passed = [*_positional_arguments(call, kernel), *((kw.arg, kw.value) for kw in call.keywords)]
    site = f"{kernel.name}@L{call.lineno}"
    for name, value in passed:
        if name in kernel.constexprs and name not in overwritten:
            literals = _literals(value, scopes, "constexpr")
            for found in literals:
                linked = _grid_literals(call, found.value) if found.node is value else ()
                yield _make_param(kernel.name, name, "constexpr", found, site, device, linked)
            if isinstance(value, ast.Name) and len(literals) == 1:
                yield _split_candidate(kernel.name, name, value, literals[0], site)
    for option in options:
        if option in keywords:
            for found in _literals(keywords[option].value, scopes, option):
                yield _make_param(kernel.name, option, option, found, site, device)  # type: ignore[arg-type]
        elif option in inserted_options(device) and option not in overwritten and not spread:
            yield _default_param(call, kernel.name, option, site, device)  # type: ignore[arg-type]


def _heuristic_params(tree: ast.Module, kernel: _Kernel, device: DeviceTarget) -> Iterator[TunableParam]:
    """Values a ``@triton.heuristics({...})`` of the kernel gives its meta-parameters: the literal results of a lambda,
    or of a module function it names."""
    for name, value in kernel.heuristics:
        kind: ParamKind = name if name in ("num_warps", "num_stages") else "constexpr"  # type: ignore[assignment]
        if kind == "constexpr" and name not in kernel.constexprs:
            continue
        if isinstance(value, ast.Lambda):
            results, scopes = [value.body], (tree, value)
        elif isinstance(value, ast.Name) and (function := module_function(tree, value.id)) is not None:
            results, scopes = returned_values(function), (tree, function)
        else:
            continue
        site = f"{kernel.name}:heuristics@L{value.lineno}"
        for result in results:
            for found in _literals(result, scopes, kind):
                yield _make_param(kernel.name, name, kind, found.reached("heuristics"), site, device)


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
    kernel: str,
    name: str,
    kind: ParamKind,
    literal: _Literal,
    site: str,
    device: DeviceTarget,
    linked: tuple[tuple[int, int, int, int], ...] = (),
) -> TunableParam:
    node = literal.node
    edit = _Edit(node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, linked=linked)
    return TunableParam(
        key=f"{kernel}:{name}{literal.row}@L{node.lineno}",
        kernel=kernel,
        name=name,
        kind=kind,
        current=literal.value,
        line=node.lineno,
        choices=_choices(kind, literal.value, device),
        default=False,
        _edit=edit,
        group=site + literal.row,
        via=literal.via,
    )


@dataclass(frozen=True)
class _SplitCandidate:
    """A keyword passed a name (`param`: its own literal written in place of the name), kept where another
    parameter of its launch owns the name's literal at `literal` (line, column)."""

    param: TunableParam
    literal: tuple[int, int]


def _split_candidate(kernel: str, name: str, value: ast.Name, literal: _Literal, site: str) -> _SplitCandidate:
    edit = _Edit(value.lineno, value.col_offset, value.end_lineno or value.lineno, value.end_col_offset or 0)
    param = TunableParam(
        key=f"{kernel}:{name}@L{value.lineno}",
        kernel=kernel,
        name=name,
        kind="constexpr",
        current=literal.value,
        line=value.lineno,
        choices=_choices("constexpr", literal.value),
        default=False,
        _edit=edit,
        group=site,
        via="name",
    )
    return _SplitCandidate(param, (literal.node.lineno, literal.node.col_offset))


def _default_param(call: ast.Call, kernel: str, option: ParamKind, site: str, device: DeviceTarget) -> TunableParam:
    """A launch option the call omits (Triton's default on `device`): inserted after the last argument when changed."""
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if arguments:
        last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
        line, col = last.end_lineno or call.lineno, last.end_col_offset or 0
    else:  # `kernel[grid]()`: the closing parenthesis is the last byte of the call
        line, col = call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1
    current = device.option_default(option)
    return TunableParam(
        key=f"{kernel}:{option}@L{line}",
        kernel=kernel,
        name=option,
        kind=option,
        current=current,
        line=line,
        choices=_choices(option, current, device),
        default=True,
        _edit=_Edit(line, col, line, col, keyword=option, after_argument=bool(arguments)),
        group=site,
        via="default",
    )


def _choices(kind: ParamKind, current: int, device: DeviceTarget = _NO_DEVICE) -> tuple[int, ...]:
    """The values to try for a parameter now at `current` (a tile's do not depend on the device)."""
    if kind == "constexpr":
        scaled = (int(current * factor) for factor in _BLOCK_FACTORS)
        candidates = {v for v in scaled if MIN_BLOCK <= v <= MAX_BLOCK and _is_power_of_two(v)}
    elif kind in ROCM_OPTIONS:
        candidates = set(device.rocm_choices(kind))
    else:
        candidates = set(_OPTION_CHOICES[kind])
    return tuple(sorted(candidates | {current}))


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class _Literal:
    node: ast.Constant
    value: int
    row: str = ""  # the table row it sits in (``[torch.float16]``), for a value taken from a table
    via: str = "literal"  # how the launch reaches it: one of VIAS

    def reached(self, how: str) -> _Literal:
        """This literal, reached one step further out through `how` (the most telling step is kept)."""
        return self if VIAS.index(self.via) >= VIAS.index(how) else replace(self, via=how)


# How a launch reaches a parameter's literal, least telling first: written in the call, bound to a name, the bound of
# a clamped next_power_of_2, a branch of a conditional, a heuristics function's result, an element a function
# returns, a table row.
VIAS = ("literal", "name", "capped", "branch", "heuristics", "returned", "table")


def _accepted(kind: ParamKind, value: int) -> bool:
    """Could `value` be tuned as a `kind`? Block sizes are powers of two in [MIN_BLOCK, MAX_BLOCK]."""
    if kind == "constexpr":
        return MIN_BLOCK <= value <= MAX_BLOCK and _is_power_of_two(value)
    return value >= 0 if kind == "waves_per_eu" else value >= 1


def _literals(value: ast.expr, scopes: tuple[ScopeNode, ...], kind: ParamKind, depth: int = 0) -> list[_Literal]:
    """The integer literals that set an argument's value (see the module's docstring for where they may sit), those
    a `kind` can take; none where the value is computed."""
    if depth > _MAX_DEPTH:
        return []
    found: list[_Literal] = []
    if isinstance(value, ast.Constant) and type(value.value) is int:
        found = [_Literal(value, value.value)]
    elif isinstance(value, ast.IfExp):
        branches = _literals(value.body, scopes, kind, depth + 1) + _literals(value.orelse, scopes, kind, depth + 1)
        found = [lit.reached("branch") for lit in branches]
    elif isinstance(value, ast.Call) and (bound := _clamped_power_of_two_bound(value)) is not None:
        found = [bound.reached("capped")]
    elif isinstance(value, ast.Name):
        for bound, inner, how in bound_values(value.id, scopes):
            found += [lit.reached(how) for lit in _literals(bound, inner, kind, depth + 1)]
    elif isinstance(value, ast.Subscript):
        for entry, row, inner in _table_entries(value, scopes, depth):
            found += [replace(lit, row=lit.row or row).reached("table") for lit in _literals(entry, inner, kind,
                                                                                             depth + 1)]  # fmt: skip
    return [lit for lit in found if _accepted(kind, lit.value)]


_Entry = tuple[ast.expr, str, tuple[ScopeNode, ...]]  # a table entry, its row label, the scopes to read it in


def _table_entries(value: ast.Subscript, scopes: tuple[ScopeNode, ...], depth: int) -> list[_Entry]:
    """What ``table[key]`` can be, with its row label: the entry of a constant key, or every entry for a runtime key
    (``configs[dtype]``), through names bound to dict literals and nested tables."""
    key = value.slice
    found: list[_Entry] = []
    for table, row, inner in _dicts(value.value, scopes, depth + 1):
        for entry_key, entry in zip(table.keys, table.values, strict=True):
            if entry_key is None:  # `**other` in the literal: not a table we can read
                return []
            if isinstance(key, ast.Constant):
                if isinstance(entry_key, ast.Constant) and entry_key.value == key.value:
                    found.append((entry, row, inner))
            else:
                found.append((entry, row or f"[{ast.unparse(entry_key)}]", inner))
    return found


def _dicts(value: ast.expr, scopes: tuple[ScopeNode, ...], depth: int) -> list[tuple[ast.Dict, str, tuple]]:
    """The dict literals an expression can be (through names and tables), with row labels and their scopes."""
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, ast.Dict):
        return [(value, "", scopes)]
    if isinstance(value, ast.Name):
        return [d for bound, inner, _ in bound_values(value.id, scopes) for d in _dicts(bound, inner, depth + 1)]
    if isinstance(value, ast.Subscript):
        return [
            (table, row or inner_row, where)
            for entry, row, inner in _table_entries(value, scopes, depth)
            for table, inner_row, where in _dicts(entry, inner, depth + 1)
        ]
    return []


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
        if literal is not None and isinstance(other, ast.Call) and decorator_name(other).endswith("next_power_of_2"):
            return literal
    return None
