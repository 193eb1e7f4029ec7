"""The layout's rules, read from the source with `ast`.

- The job side of the evaluator (``evaluator/job``: what runs in a job process, beside the code under test) imports
  none of the caller's machinery: only itself, by relative imports, and the plain data both sides share
  (``evaluator/shared``: the standard library, SciPy for the timing rule's t quantile, torch for the outputs both
  sides read). Imports inside functions count: they run in the job process too.
- No package (`geak.evaluator`, `geak.agent`, `geak.server`) has an import cycle among its modules. Every import
  counts: top-level statements, those inside `if` / `try` / class bodies, under `if TYPE_CHECKING:` (a cycle for the
  type checker only is still a cycle) and inside functions (a lazy cycle is still a cycle).
- Dependencies point one way, evaluator ← agent ← server: the evaluator imports neither the agent nor the server,
  the agent does not import the server (any import, functions included). Within the agent, evaluator ← tuning ←
  loop ← batch; within the server, the language server and the service import nothing of the command line nor of
  each other.
- The agent and the server reach the evaluator only through its public surface (`geak.evaluator`'s ``__all__``).
- No module is over 700 lines, no class over 350.
"""

from __future__ import annotations

import ast
import graphlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"geak.evaluator": ROOT / "evaluator", "geak.agent": ROOT / "agent", "geak.server": ROOT / "server"}
JOB, SHARED = "geak.evaluator.job", "geak.evaluator.shared"
# GEAK-eval's module, a top-level `geak_eval` package at run time: it cannot import GEAK relatively (it is bound to
# `rocm_bench` in a job process, and imports it by name only outside one).
SHIMS = "geak.evaluator.job.shims"


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


@dataclass(frozen=True)
class Import:
    module: str  # who imports
    targets: tuple[str, ...]  # `from X import a`: X.a when that is a module, else X
    line: int
    at_import_time: bool  # False: inside a function
    relative: bool


def modules() -> dict[str, Module]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            found[name] = Module(name, path, is_package)
    return found


MODULES = modules()


def imports(module: Module) -> list[Import]:
    return list(_walk(module, ast.parse(module.path.read_text(encoding="utf-8")).body, at_import_time=True))


def _walk(module: Module, nodes: list[ast.stmt], at_import_time: bool) -> Iterator[Import]:
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = tuple(alias.name for alias in node.names)
            yield Import(module.name, targets, node.lineno, at_import_time, relative=False)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node)
            names = [f"{base}.{alias.name}" for alias in node.names]
            submodules = [name for name in names if name in MODULES]
            # X itself only where a name is read from it: a submodule loads without it (its package came first)
            targets = (*([base] if len(submodules) < len(names) else []), *submodules)
            yield Import(module.name, targets, node.lineno, at_import_time, relative=node.level > 0)
        in_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):  # blocks of if, try, with, class, def...
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _walk(module, inner, at_import_time and not in_function)


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _geak(name: str) -> bool:
    return _within(name, "geak")


def _where(i: Import) -> str:
    return f"{MODULES[i.module].path.relative_to(ROOT)}:{i.line}"


def _all_imports(package: str) -> list[Import]:
    return [i for m in MODULES.values() if _within(m.name, package) for i in imports(m)]


def test_the_layout_is_found():
    expected = {f"{JOB}.worker", f"{JOB}.sandbox", f"{SHARED}.protocol", "geak.evaluator.api", "geak.server.lsp.server"}
    assert expected <= set(MODULES)


def test_the_job_side_imports_only_itself_and_the_shared_plain_data():
    wrong = [
        f"{_where(i)} imports {target}"
        for i in _all_imports(JOB)
        for target in i.targets
        if _geak(target) and not (_within(target, JOB) or _within(target, SHARED))
    ]
    assert not wrong, "the job side reaches the caller's machinery:\n" + "\n".join(wrong)


def test_the_job_side_reaches_geak_only_by_relative_imports():
    """So the job process can load it under another name (no `geak` in its `sys.modules`)."""
    wrong = [
        f"{_where(i)} imports {', '.join(i.targets)} by name"
        for i in _all_imports(JOB)
        if not i.relative and any(map(_geak, i.targets)) and not (_within(i.module, SHIMS) and not i.at_import_time)
    ]
    assert not wrong, "\n".join(wrong)


# the t quantile of the sequential timing rule (``shared.sequential``); the output tensors both sides read
# (``shared.poison``, ``shared.probe_rules``, inside functions)
SHARED_LIBRARIES = {"scipy", "torch"}


def test_the_shared_modules_are_plain_data_of_the_standard_library():
    allowed = sys.stdlib_module_names | {"__future__"} | SHARED_LIBRARIES
    wrong = [
        f"{_where(i)} imports {target}"
        for i in _all_imports(SHARED)
        for target in i.targets
        if not _within(target, SHARED) and target.split(".")[0] not in allowed
    ]
    assert not wrong, "\n".join(wrong)


def test_the_worker_runs_a_neutral_copy_of_the_job_side_that_preloads_every_module_of_it():
    from importlib.util import resolve_name

    from geak.evaluator import job_package
    from geak.evaluator.job import worker

    assert f"{job_package.PACKAGE}.job.worker" == job_package.WORKER_MODULE
    preloaded = {resolve_name(name, JOB) for name in worker.PRELOAD if name.startswith(".")}
    assert preloaded <= set(MODULES)
    # the zygote also imports itself and what prepares it (the interpreter's shims on CPU), and what those import
    loaded = preloaded | {f"{JOB}.{name}" for name in ("worker", "sandbox", "interpreter_shims")}
    frontier = set(loaded)
    while frontier:
        found = {t for m in frontier for i in imports(MODULES[m]) if i.at_import_time for t in i.targets}
        frontier = {t for t in found if t in MODULES and not MODULES[t].is_package} - loaded
        loaded |= frontier
    job_side = {name for name in MODULES if (_within(name, JOB) or _within(name, SHARED)) and not _within(name, SHIMS)}
    assert job_side - loaded == {name for name in job_side if MODULES[name].is_package}


def test_the_job_side_names_the_evaluator_nowhere():
    """Its code is what a job process holds in memory: besides the ROCm suite's module name (which that suite's
    files import), no `geak` in it, its names, its messages or its docstrings."""
    found = []
    for name, module in MODULES.items():
        if (_within(name, JOB) or _within(name, SHARED)) and not _within(name, SHIMS):
            for number, line in enumerate(module.path.read_text().splitlines(), 1):
                if "geak" in line.lower() and not line.startswith("MODULE_NAME = "):
                    found.append(f"{module.path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_package_has_an_import_cycle(package: str):
    graph: dict[str, set[str]] = {}
    for i in _all_imports(package):
        inside = {t for t in i.targets if t in MODULES and _within(t, package) and t != i.module}
        graph.setdefault(i.module, set()).update(inside)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle in {package}: {' -> '.join(e.args[1])}")


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("geak.evaluator", ("geak.agent", "geak.server")), ("geak.agent", ("geak.server",))],
)
def test_dependencies_point_one_way(package: str, forbidden: tuple[str, ...]):
    wrong = [
        f"{_where(i)} imports {target}"
        for i in _all_imports(package)
        for target in i.targets
        if any(_within(target, f) for f in forbidden)
    ]
    assert not wrong, f"{package} must not depend on {', '.join(forbidden)}:\n" + "\n".join(wrong)


# The agent's three layers, by package: the launch search, the loop (the rest of `geak.agent`), batch runs.
TUNING, BATCH = "geak.agent.tuning", "geak.agent.batch"


def _agent_layer(name: str) -> str:
    return "tuning" if _within(name, TUNING) else "batch" if _within(name, BATCH) else "loop"


@pytest.mark.parametrize(("layer", "forbidden"), [("tuning", ("loop", "batch")), ("loop", ("batch",))])
def test_the_agents_layers_point_one_way(layer: str, forbidden: tuple[str, ...]):
    """Within the agent, evaluator ← tuning ← loop ← batch: the launch search imports nothing of the loop or of
    batch runs, the loop nothing of batch runs (any import, functions included)."""
    wrong = [
        f"{_where(i)} imports {target}"
        for i in _all_imports("geak.agent")
        if _agent_layer(i.module) == layer
        for target in i.targets
        if _within(target, "geak.agent") and _agent_layer(target) in forbidden
    ]
    assert not wrong, f"the agent's {layer} must not depend on {' or '.join(forbidden)}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", ["geak.agent", "geak.server"])
def test_callers_reach_the_evaluator_only_through_its_public_surface(package: str):
    """The agent and the server import `geak.evaluator` itself (its ``__all__``), never a module inside it."""
    wrong = [
        f"{_where(i)} imports {target}"
        for i in _all_imports(package)
        for target in i.targets
        if _within(target, "geak.evaluator") and target != "geak.evaluator"
    ]
    assert not wrong, "past the evaluator's public surface:\n" + "\n".join(wrong)


# The server's three front ends: the command line may start the language server (`geak serve`) and use the service;
# the language server and the service know nothing of the command line, nor of each other.
SERVER_FORBIDDEN = {
    "geak.server.lsp": ("geak.server.cli", "geak.server.service"),
    "geak.server.service": ("geak.server.cli", "geak.server.lsp"),
}


@pytest.mark.parametrize(("part", "forbidden"), sorted(SERVER_FORBIDDEN.items()))
def test_the_servers_front_ends_point_one_way(part: str, forbidden: tuple[str, ...]):
    wrong = [
        f"{_where(i)} imports {target}"
        for i in _all_imports(part)
        for target in i.targets
        if any(_within(target, f) for f in forbidden)
    ]
    assert not wrong, f"{part} must not depend on {' or '.join(forbidden)}:\n" + "\n".join(wrong)


MAX_MODULE_LINES, MAX_CLASS_LINES = 700, 350  # past these a module or class holds more than one thing: split it


def test_no_module_or_class_outgrows_one_responsibility():
    wrong = []
    for module in MODULES.values():
        text = module.path.read_text(encoding="utf-8")
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            wrong.append(f"{module.path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and (size := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:
                wrong.append(f"{module.path.relative_to(ROOT)}:{node.lineno}: class {node.name}, {size} lines")
    assert not wrong, "\n".join(wrong)
