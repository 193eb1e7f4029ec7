"""Launch options set where a kernel is defined, for kernels whose every launch is in code a candidate cannot change.

A check composes every candidate with the original's test section, so what a launch there passes stays as it is
(the ROCm benchmark's files launch their kernels from wrappers after the separator). Where every launch of a
non-autotuned kernel lies in that section and passes no ``num_warps`` (or no ``num_stages``, or on ROCm none of its
compile options), the kernel runs with Triton's default for the device, and its own definition may set the option
instead: ``@triton.heuristics({"num_warps": lambda args:
1})`` above its ``@triton.jit``, which Triton hands to every launch of it as the launch's own keyword would be. Triton's
default can be far from a kernel's best (a kernel of 16×16 tiles launched with the default 4 warps may run much faster
with one).

Only a kernel whose name is used for nothing but its launches qualifies (a launch through another name could pass
the option, and the heuristic would overwrite it), and only where the module imports ``triton`` by that name.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from geak.evaluator import JIT_DECORATORS, decorator_name, is_kernel_def
from geak.evaluator import parse_python as parse

from .device_target import DeviceTarget
from .launch_params import inserted_options, kernel_launches


@dataclass(frozen=True)
class DefinitionSite:
    """A kernel whose launches all sit on fixed lines and omit `options`. `line`: its ``@triton.jit`` decorator's."""

    kernel: str
    line: int
    options: tuple[str, ...]

    @property
    def group(self) -> str:
        return f"{self.kernel}:definition@L{self.line}"


def find_definition_sites(
    source: str, fixed_lines: Collection[int], device: DeviceTarget | str | None = None
) -> list[DefinitionSite]:
    """The kernels of `source` whose options may be set at their definition: every launch of them on one of
    `fixed_lines` (the test section's), and their definition on none; `options`: those tunable on `device` that no
    launch passes and no heuristic of theirs sets already."""
    target = DeviceTarget.of(device)
    tree = parse(source)
    if not _imports_triton(tree):
        return []
    definitions: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if is_kernel_def(node):
            assert isinstance(node, ast.FunctionDef)
            definitions.setdefault(node.name, node)  # the first of a name, as ``kernel_launches`` reads it
    references = _name_loads(tree)
    sites = []
    for kernel in kernel_launches(tree):
        node = definitions[kernel.name]
        jit = next(d for d in node.decorator_list if decorator_name(d) in JIT_DECORATORS)
        calls = kernel.calls
        if kernel.autotuned or not calls or jit.lineno in fixed_lines or references[kernel.name] != len(calls):
            continue
        if not all(line in fixed_lines for call in calls for line in range(call.lineno, (call.end_lineno or 0) + 1)):
            continue
        if any(kw.arg is None for call in calls for kw in call.keywords):  # `**kwargs`: what it passes is unknown
            continue
        passed = {kw.arg for call in calls for kw in call.keywords}
        options = tuple(o for o in inserted_options(target) if o not in passed and o not in kernel.set_by_heuristics)
        if options:
            sites.append(DefinitionSite(kernel.name, jit.lineno, options))
    return sorted(sites, key=lambda s: s.line)


def set_at_definition(
    source: str, site: DefinitionSite, values: Mapping[str, int], device: DeviceTarget | str | None = None
) -> str:
    """`source` with the values that differ from Triton's defaults on `device` set by a ``@triton.heuristics`` line
    above the kernel's ``@triton.jit`` (its own line, so every other byte is kept); `source` itself where none
    differs."""
    target = DeviceTarget.of(device)
    unknown = set(values) - set(site.options)
    if unknown:
        raise ValueError(f"{site.kernel}: {', '.join(sorted(unknown))} cannot be set at its definition")
    changed = {o: values[o] for o in site.options if o in values and values[o] != target.option_default(o)}
    if not changed:
        return source
    lines = source.splitlines(keepends=True)
    jit_line = lines[site.line - 1]
    indent = jit_line[: len(jit_line) - len(jit_line.lstrip())]
    entries = ", ".join(f'"{option}": lambda args: {value}' for option, value in changed.items())
    newline = "\r\n" if jit_line.endswith("\r\n") else "\n"
    lines.insert(site.line - 1, f"{indent}@triton.heuristics({{{entries}}}){newline}")
    return "".join(lines)


def _imports_triton(tree: ast.Module) -> bool:
    """Whether the module binds ``triton`` to Triton itself (``import triton``) at its top level."""
    return any(
        isinstance(node, ast.Import) and any(a.name == "triton" and a.asname in (None, "triton") for a in node.names)
        for node in tree.body
    )


def _name_loads(tree: ast.Module) -> Counter[str]:
    """How often each name is read in the module."""
    return Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
