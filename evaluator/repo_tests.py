"""A module's tests in its repository: where the repository is, how it imports, and which of its pytest tests reach
the module.

A kernel of a library lives in a package module (`src/liger_kernel/ops/rms_norm.py`) and its tests elsewhere
(`test/transformers/test_rms_norm.py`). This finds them without running anything:

* the repository: the nearest folder up from the module with `pyproject.toml`, `pytest.ini`, `setup.cfg`,
  `tox.ini` or `.git`; its pytest configuration (`testpaths`, `pythonpath`, `python_files`) and `[tool.geak]`;
* the tests: pytest files under `testpaths` (else the whole repository) that import the module directly or through
  the package's public API, followed name by name through the package (``from liger_kernel.transformers import
  LigerRMSNorm`` reaches `ops/rms_norm.py` when `LigerRMSNorm` is defined in a module that imports it), narrowed to
  the test functions whose body, parameters or decorators use such a name (directly, or through a helper or fixture
  of the same file that does);
* or the user's choice: `[tool.geak.tests]` in `pyproject.toml` (module → node ids) or `--tests PATH[::NODE]`.

Every test found carries why (`FoundTest.why`), and an empty search says where it looked.
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import os
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .compile_store import default_root
from .python_source import parse
from .results import NOT_RUN_KINDS, TestOutcome
from .shared.test_ids import test_function
from .triton_file import TritonFile, TritonFileError, _asserts, parse_triton_file, read_source

MARKERS = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", ".git")
# pytest's own `norecursedirs` default, and the folders of an environment or a build
SKIPPED_DIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}", "__pycache__",
                "*.egg-info", "site-packages")  # fmt: skip


class RepositoryError(ValueError):
    """A module whose tests cannot be found or named: the message says what and where."""


@dataclass(frozen=True)
class Repository:
    """The repository a module lives in, as pytest would see it. Paths are absolute."""

    root: Path
    config: Path | None  # the file holding pytest's configuration (None: pytest's defaults)
    testpaths: tuple[Path, ...]
    pythonpath: tuple[Path, ...]
    python_files: tuple[str, ...]
    geak_tests: dict[str, tuple[str, ...]] = field(default_factory=dict)  # [tool.geak.tests]: module -> node ids


@dataclass(frozen=True)
class FoundTest:
    node: str  # a pytest node id relative to the repository's root: `test/test_x.py::test_y`, `...::TestK::test_z`
    why: str
    asserts: bool = True  # its body asserts something (else it only shows that the kernels run)


@dataclass(frozen=True)
class ModuleTests:
    """A module and the tests that judge it."""

    path: Path
    module: str  # its dotted name: `liger_kernel.ops.rms_norm`
    import_root: Path  # the folder its top-level package lies in (`src`)
    repository: Repository
    tests: tuple[FoundTest, ...]
    source: str  # "imports" (found), "[tool.geak]" or "--tests"
    searched: tuple[Path, ...]  # the folders whose pytest files were read
    every_case: bool = False  # run every case whatever the evaluator's limits (a proposal's confirmation)

    @property
    def sys_path(self) -> list[str]:
        """Folders a job puts first on `sys.path`: the module's import root, then the configured `pythonpath`."""
        return list(dict.fromkeys(str(p) for p in (self.import_root, *self.repository.pythonpath)))

    def to_job(self) -> dict[str, Any]:
        """What a job needs to run the tests with a candidate in the module's place (``job/repository.py``)."""
        return {
            "root": str(self.repository.root),
            "config": str(self.repository.config) if self.repository.config else None,
            "module": self.module,
            "sys_path": self.sys_path,
            "nodes": [t.node for t in self.tests],
            "every_case": self.every_case,
        }

    def with_every_case(self) -> ModuleTests:
        """The same tests, every case of them run whatever the evaluator's limits (``EvalOptions.cases_per_test``,
        ``tests_budget_s``): what confirms a proposal."""
        return replace(self, every_case=True)

    def to_dict(self) -> dict[str, Any]:
        """What was found and why, as data (`geak check --json`)."""
        return {
            "module": self.module,
            "repository": str(self.repository.root),
            "source": self.source,
            "searched": [str(p) for p in self.searched],
            "tests": [{"node": t.node, "why": t.why} for t in self.tests],
        }

    def describe(self) -> list[str]:
        """One line per test: its node id and why it was chosen."""
        return [f"{t.node}: {t.why}" for t in self.tests]


def cases_run(tests: Sequence[TestOutcome], budget_s: float | None = None, shown: int = 3) -> str:
    """What of a module's selected cases ran, and what a limit left out (``EvalOptions.cases_per_test``,
    ``tests_budget_s``): `ran 4 of 7 selected case(s) within 20 s; left out: 3 not sampled (tests/t.py::f[2], ...)`."""
    left = [t for t in tests if t.kind == "left out"]
    ran = [t for t in tests if t.kind not in NOT_RUN_KINDS]
    within = f" within {budget_s:g} s" if budget_s is not None else ""
    line = f"ran {len(ran)} of {len(tests)} selected case(s){within}"
    if not left:
        return line + "; none left out"
    parts = []
    for why, words in (("not sampled", "not sampled"), ("past the budget", "past the budget")):
        names = [t.name for t in left if why in t.message]
        if names:
            more = f", and {len(names) - shown} more" if len(names) > shown else ""
            parts.append(f"{len(names)} {words} ({', '.join(names[:shown])}{more})")
    return f"{line}; left out: {'; '.join(parts)}"


def as_module(target: ModuleTests, text: str, label: str) -> TritonFile:
    """`text` as the module under check (the original or a candidate): its kernels and entry points as a file's,
    its tests the repository's (pytest runs them), carried to the job with where the repository lies."""
    parsed = parse_triton_file(text, label, require_tests=False)
    return replace(
        parsed,
        tests=tuple(t.node for t in target.tests),
        benches=(),
        test_style="pytest",
        asserting_tests=tuple(dict.fromkeys(test_function(t.node) for t in target.tests if t.asserts)),
        repository=target.to_job(),
    )


# ----------------------------------------------------------------------------------------- the repository


def find_repository(path: Path) -> Repository:
    """The repository holding `path`: the nearest folder up with one of `MARKERS`, with its pytest configuration. Jobs
    read the whole repository, so a folder that holds a place they must never read (the home folder, the temporary
    directory, the compile cache: a home kept as a git repository, say) is refused as one."""
    path = path.resolve()
    for folder in path.parents:
        if any((folder / marker).exists() for marker in MARKERS):
            private = next((p for p in _private_places() if p == folder or folder in p.parents), None)
            if private is not None:
                raise RepositoryError(
                    f"{path}: its nearest repository marker is in {folder}, which holds {private}; jobs never read "
                    "that: give the module's repository a pyproject.toml or pytest.ini of its own"
                )
            return _read_configuration(folder)
    raise RepositoryError(f"{path}: no repository around it (no {', '.join(MARKERS)} in any folder above it)")


def _private_places() -> list[Path]:
    """What the sandbox hides from every job and a repository shown to jobs must not hold."""
    places = [os.path.expanduser("~"), tempfile.gettempdir(), default_root()]
    return [Path(p).resolve() for p in places if p]


def _read_configuration(root: Path) -> Repository:
    pytest_config: dict[str, Any] = {}
    config: Path | None = None
    geak: dict[str, Any] = {}
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise RepositoryError(f"{pyproject}: not valid TOML: {e}") from None
        tool = data.get("tool", {})
        geak = tool.get("geak", {})
        if "ini_options" in tool.get("pytest", {}):
            pytest_config, config = tool["pytest"]["ini_options"], pyproject
    for name, section in (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        if config is None and (root / name).is_file():
            parser = configparser.ConfigParser(interpolation=None)
            try:
                parser.read(root / name)
            except configparser.Error as e:
                raise RepositoryError(f"{root / name}: {e}") from None
            if parser.has_section(section) or name == "pytest.ini":
                pytest_config = dict(parser[section]) if parser.has_section(section) else {}
                config = root / name
    return Repository(
        root=root,
        config=config,
        testpaths=tuple(root / p for p in _words(pytest_config.get("testpaths"))),
        pythonpath=tuple((root / p).resolve() for p in _words(pytest_config.get("pythonpath"))),
        python_files=tuple(_words(pytest_config.get("python_files"))) or ("test_*.py", "*_test.py"),
        geak_tests=_geak_tests(geak, pyproject),
    )


def _words(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else str(value).split()


def _geak_tests(geak: dict[str, Any], pyproject: Path) -> dict[str, tuple[str, ...]]:
    tests = geak.get("tests", {})
    if not isinstance(tests, dict):
        raise RepositoryError(f"{pyproject}: [tool.geak] tests must be a table of module = [test node ids]")
    chosen = {}
    for module, nodes in tests.items():
        nodes = [nodes] if isinstance(nodes, str) else nodes
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            raise RepositoryError(f"{pyproject}: [tool.geak.tests] {module!r} must be a node id or a list of them")
        chosen[module] = tuple(nodes)
    return chosen


def module_name(path: Path) -> tuple[str, Path]:
    """The dotted name a module file imports as, and its import root: the folder above its outermost package."""
    path = path.resolve()
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    if not parts:
        raise RepositoryError(f"{path}: a package's __init__.py cannot be checked alone; name one of its modules")
    return ".".join(parts), folder


# ----------------------------------------------------------------------------------------- finding the tests


def needs_repository_tests(path: Path) -> bool:
    """Is `path` a module with Triton kernels and no test of its own (so the repository's tests judge it)?"""
    try:
        parsed = parse_triton_file(read_source(path), str(path), require_tests=False)  # never blocks on a pipe
    except (TritonFileError, OSError, UnicodeDecodeError):
        return False  # not a kernel module: the file's own check says why
    return not parsed.tests and not parsed.benches


def module_tests(path: Path, chosen: list[str] | None = None) -> ModuleTests:
    """The tests of the module at `path`: `chosen` (`--tests PATH[::NODE]`, paths as given on the command line),
    else `[tool.geak.tests]`, else those found through the import graph. RepositoryError where there are none."""
    path = path.resolve()
    repo = find_repository(path)
    dotted, import_root = module_name(path)
    if chosen:
        tests = tuple(_chosen_test(repo, spec) for spec in chosen)
        return ModuleTests(path, dotted, import_root, repo, _judged(repo, _expanded(repo, tests)), "--tests", ())
    relative = path.relative_to(repo.root).as_posix()
    for key in (dotted, relative):
        if key in repo.geak_tests:
            why = f"[tool.geak.tests] {key!r} in pyproject.toml"
            tests = _judged(repo, _expanded(repo, tuple(FoundTest(n, why) for n in repo.geak_tests[key])))
            return ModuleTests(path, dotted, import_root, repo, tests, "[tool.geak]", ())
    searched = repo.testpaths or (repo.root,)
    graph = ImportGraph((import_root, *repo.pythonpath, repo.root))
    found: list[FoundTest] = []
    for test_file in test_files(repo, searched):
        found += tests_reaching(test_file, repo.root, dotted, graph)
    if not found:
        where = ", ".join(str(p) for p in searched)
        raise RepositoryError(
            f"no test of {dotted} found: no pytest file ({' or '.join(repo.python_files)}) under {where} imports it "
            "or a name that leads to it; name them with --tests PATH[::NODE] or [tool.geak.tests] in pyproject.toml"
        )
    return ModuleTests(path, dotted, import_root, repo, _judged(repo, tuple(found)), "imports", tuple(searched))


def _judged(repo: Repository, tests: tuple[FoundTest, ...]) -> tuple[FoundTest, ...]:
    """The tests, each marked by whether its function asserts anything (one it cannot find is taken to)."""
    out = []
    trees: dict[str, ast.Module | None] = {}
    for test in tests:
        file, _, node = test.node.partition("::")
        if file not in trees:
            trees[file] = _parsed(repo.root / file)
        tree = trees[file]
        function = node_definition(tree, node.split("[", 1)[0]) if tree is not None else None
        out.append(replace(test, asserts=function is None or _asserts(function)))
    return tuple(out)


def node_definition(tree: ast.Module, node: str) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None:
    """The definition in a test file's `tree` that a node id's tail names (`test_x`, `TestK::test_y`)."""
    scope: list[ast.stmt] = tree.body
    found = None
    for part in node.split("::"):
        found = next((s for s in scope if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and s.name == part), None)  # fmt: skip
        if found is None:
            return None
        scope = found.body
    return found


def _chosen_test(repo: Repository, spec: str) -> FoundTest:
    file, _, node = spec.partition("::")
    path = Path(file).resolve()
    if not path.is_file():
        raise RepositoryError(f"--tests {spec}: no such file {file}")
    try:
        relative = path.relative_to(repo.root).as_posix()
    except ValueError:
        raise RepositoryError(f"--tests {spec}: {file} is outside the repository {repo.root}") from None
    return FoundTest(f"{relative}::{node}" if node else relative, "named with --tests")


def _expanded(repo: Repository, tests: tuple[FoundTest, ...]) -> tuple[FoundTest, ...]:
    """Node ids naming a whole file become its test functions (a check expects each function it runs by name)."""
    out: list[FoundTest] = []
    for test in tests:
        file, _, node = test.node.partition("::")
        if not (repo.root / file).is_file():
            raise RepositoryError(f"{test.why}: no such test file {repo.root / file}")
        if node:
            out.append(test)
            continue
        functions = test_functions(_parsed(repo.root / file))
        if not functions:
            raise RepositoryError(f"{test.why}: {file} defines no test function")
        out += [FoundTest(f"{file}::{name}", test.why) for name in functions]
    return tuple(dict.fromkeys(out))


def test_files(repo: Repository, folders: tuple[Path, ...]) -> list[Path]:
    """The pytest files under `folders` (sorted), as pytest's `python_files` and `norecursedirs` defaults choose."""
    found: set[Path] = set()
    for folder in folders:
        if folder.is_file():
            found.add(folder)
            continue
        for here, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not any(fnmatch.fnmatch(d, p) for p in SKIPPED_DIRS)]
            found.update(Path(here) / f for f in files if any(fnmatch.fnmatch(f, p) for p in repo.python_files))
    return sorted(found)


def test_functions(tree: ast.Module) -> list[str]:
    """A pytest file's test functions as node id tails: `test_x`, `TestK::test_y`."""
    names = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
            names.append(stmt.name)
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            names += [f"{stmt.name}::{m.name}" for m in _methods(stmt) if m.name.startswith("test")]
    return names


def tests_reaching(test_file: Path, root: Path, target: str, graph: ImportGraph) -> list[FoundTest]:
    """The test functions of `test_file` that use a name leading to module `target`, each with why."""
    tree = _parsed(test_file)
    if tree is None:
        return []
    package = _file_package(test_file, graph)
    reaching: dict[str, str] = {}  # name bound in the test file -> why it leads to the target
    for name, origin in _bindings(tree, package).items():
        why = graph.reaches(origin, target)
        if why is not None:
            reaching[name] = why
    if not reaching:
        return []
    defs = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    changed = True
    while changed:  # helpers and fixtures of the file that use a reaching name reach too
        changed = False
        for name, stmt in defs.items():
            if name in reaching or name.startswith(("test", "Test")):
                continue
            used = _used(stmt) & reaching.keys()
            if used:
                reaching[name] = f"uses {sorted(used)[0]}, which {reaching[sorted(used)[0]]}"
                changed = True
    relative = test_file.relative_to(root).as_posix()
    found = []
    for stmt in tree.body:
        functions: list[tuple[str, set[str]]] = []  # (node id tail, the names it uses)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
            functions.append((stmt.name, _used(stmt)))
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            shared = _used_outside_methods(stmt)
            tests = [m for m in _methods(stmt) if m.name.startswith("test")]
            functions += [(f"{stmt.name}::{m.name}", _used(m) | shared) for m in tests]
        for node_name, used in functions:
            hits = sorted(used & reaching.keys())
            if hits:
                found.append(FoundTest(f"{relative}::{node_name}", f"uses {hits[0]}, which {reaching[hits[0]]}"))
    return found


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _used(node: ast.AST) -> set[str]:
    """Names a definition reads (body, decorators, defaults, bases) and the parameters it takes (fixtures by
    name)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names |= {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    return names


def _used_outside_methods(cls: ast.ClassDef) -> set[str]:
    """Names a test class reads outside its test methods (its fixtures, helpers, decorators)."""
    names = {n.id for d in cls.decorator_list for n in ast.walk(d) if isinstance(n, ast.Name)}
    for stmt in cls.body:
        if not (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test")):
            names |= _used(stmt)
    return names


def _parsed(path: Path) -> ast.Module | None:
    try:
        return parse(path.read_text(), filename=str(path))
    except (SyntaxError, ValueError, UnicodeDecodeError, OSError):
        return None  # pytest reports such a file itself when it runs


def _file_package(path: Path, graph: ImportGraph) -> str:
    """The package a file's relative imports start from ("" where it is in none)."""
    name = graph.name_of(path)
    return name.rpartition(".")[0] if name else ""


def _bindings(tree: ast.Module, package: str) -> dict[str, tuple[str, str | None]]:
    """Names a module's top-level imports bind, each with where it comes from: (module, name or None for the
    module itself). Imports under `if`/`try` at the top level count."""
    out: dict[str, tuple[str, str | None]] = {}
    for stmt in _top_level(tree.body):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    out[alias.asname] = (alias.name, None)
                else:  # `import a.b` binds `a`, and `a.b.x` reaches through it
                    out[alias.name.split(".")[0]] = (alias.name, None)
        elif isinstance(stmt, ast.ImportFrom):
            source = _absolute(stmt, package)
            for alias in stmt.names:
                if alias.name == "*":
                    out[f"*{source}"] = (source, None)
                else:
                    out[alias.asname or alias.name] = (source, alias.name)
    return out


def _top_level(body: list[ast.stmt]):
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            for part in (stmt.body, stmt.orelse, getattr(stmt, "handlers", []), getattr(stmt, "finalbody", [])):
                for inner in part:
                    yield from _top_level(inner.body if isinstance(inner, ast.ExceptHandler) else [inner])


def _absolute(stmt: ast.ImportFrom, package: str) -> str:
    if not stmt.level:
        return stmt.module or ""
    base = package.split(".") if package else []
    base = base[: len(base) - (stmt.level - 1)] if stmt.level > 1 else base
    return ".".join([*base, *([stmt.module] if stmt.module else [])])


class ImportGraph:
    """The repository's modules, found under its import roots, and which names lead to a target module."""

    def __init__(self, roots: tuple[Path, ...]):
        self.roots = tuple(dict.fromkeys(r.resolve() for r in roots if r.is_dir()))
        self._trees: dict[str, ast.Module | None] = {}
        self._files: dict[str, Path | None] = {}
        self._bindings: dict[str, dict[str, tuple[str, str | None]]] = {}
        self._definitions: dict[str, dict[str, ast.stmt]] = {}
        self._memo: dict[tuple[str, str | None, str], str | None] = {}

    def file_of(self, module: str) -> Path | None:
        if module not in self._files:
            parts = module.split(".")
            candidates = [(r.joinpath(*parts).with_suffix(".py"), r.joinpath(*parts, "__init__.py"))
                          for r in self.roots]  # fmt: skip
            self._files[module] = next((c for pair in candidates for c in pair if c.is_file()), None)
        return self._files[module]

    def bindings(self, module: str, tree: ast.Module) -> dict[str, tuple[str, str | None]]:
        """The module's top-level import bindings (``_bindings``), relative imports resolved."""
        if module not in self._bindings:
            package = module if self._is_package(module) else module.rpartition(".")[0]
            self._bindings[module] = _bindings(tree, package)
        return self._bindings[module]

    def name_of(self, path: Path) -> str | None:
        """The dotted name `path` imports as under one of the roots (its packages' `__init__.py` aside)."""
        path = path.resolve()
        for root in self.roots:
            try:
                parts = list(path.relative_to(root).with_suffix("").parts)
            except ValueError:
                continue
            if parts and parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
        return None

    def _tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            path = self.file_of(module)
            self._trees[module] = _parsed(path) if path is not None else None
        return self._trees[module]

    def reaches(self, origin: tuple[str, str | None], target: str) -> str | None:
        """Why importing `origin` (module, name) leads to `target`, or None."""
        module, name = origin
        key = (module, name, target)
        if key not in self._memo:
            self._memo[key] = None  # an import cycle reaches nothing through itself
            self._memo[key] = self._reaches(module, name, target)
        return self._memo[key]

    def _reaches(self, module: str, name: str | None, target: str) -> str | None:
        if module == target or (name is not None and f"{module}.{name}" == target):
            return f"is imported from {target}" if name is None or module == target else f"is the module {target}"
        if name is None:  # a module bound as a whole (`import pkg`) leads to its attributes, not followed here
            return None
        tree = self._tree(module)
        if tree is None:
            return None
        bindings = self.bindings(module, tree)
        if name in bindings:
            why = self.reaches(bindings[name], target)
            return f"comes from {bindings[name][0]}, and {why}" if why else None
        if self._is_package(module) and self.file_of(f"{module}.{name}") is not None:
            return self.reaches((f"{module}.{name}", None), target)
        if module not in self._definitions:
            self._definitions[module] = _definitions(tree)
        definition = self._definitions[module].get(name)
        if definition is not None:  # a function, class or assignment of the module: what its code uses
            for used in sorted(_used(definition) - {name}):
                why = self.reaches((module, used), target)
                if why:
                    return f"is defined in {module} and uses {used}, which {why}"
            return None
        for star, (source, _) in bindings.items():
            if star.startswith("*"):
                why = self.reaches((source, name), target)
                if why:
                    return f"comes from {source}, and {why}"
        return None

    def _is_package(self, module: str) -> bool:
        path = self.file_of(module)
        return path is not None and path.name == "__init__.py"


def _definitions(tree: ast.Module) -> dict[str, ast.stmt]:
    """A module's top-level definitions by name (functions, classes, assignments): the last one of each."""
    found: dict[str, ast.stmt] = {}
    for stmt in _top_level(tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            found.update({n.id: stmt for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)})
    return found
