"""``@triton.autotune`` kernels, tuned through their config lists by pure source analysis.

For each autotuned kernel: where its configs are (the ``configs`` argument of its decorator), the meta-parameters
they set (the keys of the dicts of the ``triton.Config(...)`` calls in it, wherever they sit: a list literal, a name
bound to one, what a module function returns, a comprehension; ROCm's compile options among them, which Triton takes
from that dict too), the literal configs among them, and how this file spells ``Config``. One rewrite of that
argument alone, ``pin``: the configs replaced by one (a variant then runs that config without tuning, in the screen,
the confirmation and the proposal alike).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from geak.evaluator import AUTOTUNE_DECORATORS, constexpr_params, decorator_name, is_config_call, is_kernel_def
from geak.evaluator import parse_python as parse

from .device_target import ROCM_OPTIONS, DeviceTarget

DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3  # triton.Config's defaults, which it passes on every backend (AMD's own default is 2)
_RUNS_ROCM_OPTIONS = ("rocm", "interpreter")  # NVIDIA's Triton rejects them as unrecognised keywords
_OPTIONS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class LaunchConfig:
    """One ``triton.Config``: meta-parameter values (in the order written), warps and stages."""

    meta: tuple[tuple[str, int], ...]
    num_warps: int = DEFAULT_NUM_WARPS
    num_stages: int = DEFAULT_NUM_STAGES

    def render(self, spelling: str, extra: str = "") -> str:
        meta = ", ".join(f"{key!r}: {value}" for key, value in self.meta)
        return f"{spelling}({{{meta}}}, num_warps={self.num_warps}, num_stages={self.num_stages}{extra})"

    def describe(self) -> str:
        meta = ", ".join(f"{key}={value}" for key, value in self.meta)
        return f"{meta + ', ' if meta else ''}num_warps={self.num_warps}, num_stages={self.num_stages}"


@dataclass(frozen=True)
class AutotuneSite:
    """The config list of one autotuned kernel. `known`: its literal configs; `keys`: the meta-parameters its configs
    set; `extra`: keyword arguments every literal config shares beyond warps and stages (``pre_hook=...``), kept in
    a new config."""

    kernel: str
    line: int
    keys: tuple[str, ...]
    known: tuple[LaunchConfig, ...]
    spelling: str
    extra: str = ""
    _span: tuple[int, int, int, int] = field(default=(0, 0, 0, 0), repr=False, compare=False)

    @property
    def group(self) -> str:
        return f"{self.kernel}:autotune@L{self.line}"


def find_autotune_sites(source: str, device: DeviceTarget | str | None = None) -> list[AutotuneSite]:
    """Every autotuned kernel whose config list can be read (its ``Config`` calls found), in source order. Only the
    kernel's own ``tl.constexpr`` parameters count as meta-parameters, and ROCm's compile options on a `device` that
    runs them (ROCm honours them, the CPU interpreter ignores them): a config setting anything else is one this
    device cannot run."""
    tree = parse(source)
    rocm_options = DeviceTarget.of(device).backend in _RUNS_ROCM_OPTIONS
    lines = source.splitlines(keepends=True)
    sites = []
    for node in ast.walk(tree):
        if not is_kernel_def(node):
            continue
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        allowed = set(constexpr_params(node))
        if rocm_options:
            allowed |= set(ROCM_OPTIONS)
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and decorator_name(decorator) in AUTOTUNE_DECORATORS:
                site = _site(tree, node.name, decorator, lines, allowed)
                if site is not None:
                    sites.append(site)
    return sorted(sites, key=lambda s: s.line)


def pin(source: str, site: AutotuneSite, config: LaunchConfig) -> str:
    """`source` with the kernel's configs replaced by `config` alone."""
    return _replace(source, site._span, f"[{config.render(site.spelling, site.extra)}]")


def _site(
    tree: ast.Module, kernel: str, decorator: ast.Call, lines: list[str], allowed: set[str]
) -> AutotuneSite | None:
    configs = next((kw.value for kw in decorator.keywords if kw.arg == "configs"), None)
    if configs is None and decorator.args:
        configs = decorator.args[0]
    if configs is None:
        return None
    calls = _config_calls(tree, configs, 0)
    if not calls:
        return None
    keys: dict[str, None] = {}
    for call in calls:
        meta = _meta_dict(call)
        for key in meta.keys if isinstance(meta, ast.Dict) else ():
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value in allowed:
                keys[key.value] = None
    known = tuple(
        c for c in (_literal_config(call) for call in calls) if c is not None and {k for k, _ in c.meta} <= allowed
    )
    span = (configs.lineno, configs.col_offset, configs.end_lineno or configs.lineno, configs.end_col_offset or 0)
    return AutotuneSite(
        kernel=kernel,
        line=configs.lineno,
        keys=tuple(keys),
        known=known,
        spelling=ast.unparse(calls[0].func),
        extra=_shared_extra(calls, lines),
        _span=span,
    )


def _config_calls(tree: ast.Module, configs: ast.AST, depth: int) -> list[ast.Call]:
    """The ``Config(...)`` calls the configs expression is made of: in it, in the module-level value of a name it
    uses, or in the module functions it calls (a few levels deep)."""
    calls = [n for n in ast.walk(configs) if is_config_call(n)]
    if depth > 3:
        return calls
    for node in ast.walk(configs):
        if isinstance(node, ast.Name) and node.id not in ("triton", "Config"):
            values = [
                n.value
                for n in tree.body
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)
            ]
            if len(values) == 1:
                calls += _config_calls(tree, values[0], depth + 1)
            defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == node.id]
            if len(defs) == 1 and defs[0] is not configs:
                calls += _config_calls(tree, defs[0], depth + 1)
    return calls


def _meta_dict(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    return next((kw.value for kw in call.keywords if kw.arg == "kwargs"), None)


def _literal_config(call: ast.Call) -> LaunchConfig | None:
    meta = _meta_dict(call)
    if not isinstance(meta, ast.Dict):
        return None
    values = []
    for key, value in zip(meta.keys, meta.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        if not (isinstance(value, ast.Constant) and type(value.value) is int):
            return None
        values.append((key.value, value.value))
    options = {"num_warps": DEFAULT_NUM_WARPS, "num_stages": DEFAULT_NUM_STAGES}
    for kw in call.keywords:
        if kw.arg in _OPTIONS:
            if not (isinstance(kw.value, ast.Constant) and type(kw.value.value) is int):
                return None
            options[kw.arg] = kw.value.value
    return LaunchConfig(tuple(values), options["num_warps"], options["num_stages"])


def _shared_extra(calls: list[ast.Call], lines: list[str]) -> str:
    """Keyword arguments (beyond warps, stages and the meta dict) that every Config call passes alike, as source."""
    texts = []
    for call in calls:
        kept = [kw for kw in call.keywords if kw.arg not in (*_OPTIONS, "kwargs")]
        texts.append(tuple(f"{kw.arg}={ast.unparse(kw.value)}" for kw in kept if kw.arg is not None))
    if not texts or any(t != texts[0] for t in texts):
        return ""
    return "".join(f", {t}" for t in texts[0])


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _offset(source: str, line: int, byte_col: int) -> int:
    """The character offset of a line and UTF-8 byte column (as `ast` reports them)."""
    lines = source.splitlines(keepends=True)
    return sum(len(text) for text in lines[: line - 1]) + _char_col(lines[line - 1], byte_col)


def _replace(source: str, span: tuple[int, int, int, int], text: str) -> str:
    line, col, end_line, end_col = span
    return source[: _offset(source, line, col)] + text + source[_offset(source, end_line, end_col) :]
