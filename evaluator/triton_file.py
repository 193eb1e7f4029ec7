"""The Triton file contract: kernels, wrappers, and the embedded unit test, in either supported format.

* TritonBench / GEAK-eval format: kernel code, a separator line of exactly 146 ``#`` (trailing white space
  allowed), then the test code (``test_*`` functions returning outputs, often ``result_gold = test_x()``).
* Native format: top-level ``test_*`` functions anywhere (pytest style), optional ``bench_*`` functions with large
  shapes for timing, and optional ``flops_<wrapper>`` / ``bytes_<wrapper>`` functions that count one call's work.

How the tests run (``TritonFile.test_style``): "call" — the evaluator calls each ``test_*`` function with no
arguments and takes its return value as its output; "pytest" — the test uses pytest (imports it, takes parameters or
fixtures, carries marks, or is a ``Test*`` class), so pytest itself runs it inside the worker, one outcome per
collected case. In a pytest-style file, ``test_performance*`` cases are benchmarks (the perf stage runs them, the
check does not), and a file in the ROCm-benchmark layout (a module-level ``result_gold = {}``) stores its outputs in
that dict under the sanitized test id (``TritonFile.output_source``).

Everything else is the *kernel section*, the part an optimizer may rewrite. The test section of the reference is
always re-attached to candidate code (``compose``), so a candidate can never bring its own test.
"""

from __future__ import annotations

import ast
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .python_source import parse
from .results import KernelInfo
from .shared.test_ids import test_function

SEPARATOR = "#" * 146
JIT_DECORATORS = frozenset({"triton.jit", "jit", "tl.jit"})
AUTOTUNE_DECORATORS = frozenset({"triton.autotune", "autotune"})
TEST_PREFIXES = ("test_", "bench_", "flops_", "bytes_")
BENCHMARK_TEST_PREFIX = "test_performance"  # pytest-style benchmark cases (the ROCm benchmark's perf tests)
# GEAK-eval's result-saving hooks in ROCm-benchmark files: GEAK reads `result_gold` itself, so they never run.
HARNESS_TESTS = frozenset({"test_save_results", "test_save_performance_results"})

Format = Literal["tritonbench", "native"]
TestStyle = Literal["call", "pytest"]
OutputSource = Literal["return", "result_gold"]


class TritonFileError(ValueError):
    """The input is not a usable Triton file; `line`/`column` point at the problem (1-based) when known.

    `kind`: "syntax" (the file is broken) or "not_triton" (no kernel, no test, not text: wrong input)."""

    def __init__(self, message: str, line: int = 1, column: int = 1, kind: str = "not_triton"):
        super().__init__(message)
        self.line = line
        self.column = column
        self.kind = kind


@dataclass(frozen=True)
class Composed:
    """Source text of kernel code + a test section, and where each of its lines came from."""

    text: str
    origins: tuple[tuple[str, int], ...]  # per line (1-based index - 1): ("kernel" | "test", original line)

    def origin(self, line: int) -> tuple[str, int]:
        if 1 <= line <= len(self.origins):
            return self.origins[line - 1]
        return ("kernel", line)


@dataclass(frozen=True)
class TritonFile:
    path: str
    text: str
    format: Format
    kernels: tuple[KernelInfo, ...]
    wrappers: tuple[str, ...]
    tests: tuple[str, ...]
    benches: tuple[str, ...]
    counters: tuple[str, ...]
    kernel_lines: tuple[str, ...]
    test_blocks: tuple[tuple[int, tuple[str, ...]], ...] = field(repr=False)
    asserting_tests: tuple[str, ...] = ()
    autograd_functions: tuple[str, ...] = ()  # classes of the kernel section deriving from autograd.Function
    test_launchers: tuple[str, ...] = ()  # test-section functions (not tests) that launch a kernel themselves
    def_lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    test_style: TestStyle = "call"
    output_source: OutputSource = "return"
    repository: dict | None = field(default=None, compare=False)  # a repository's module: ``repo_tests.to_job``

    @property
    def entry_points(self) -> tuple[str, ...]:
        """What the evaluator records calls of: the wrappers, the test section's own kernel launchers (the ROCm
        benchmark's `*_triton_wrapper` helpers), and `Class.apply` of autograd functions."""
        return self.wrappers + self.test_launchers + tuple(f"{name}.apply" for name in self.autograd_functions)

    @property
    def kernel_section(self) -> str:
        """The rewritable part. Native format keeps line numbers (test lines are blanked)."""
        return _join(self.kernel_lines)

    def runs_under_pytest(self, function: str) -> bool:
        """Does pytest run this test or benchmark function (else the evaluator calls it with no arguments)?"""
        return self.test_style == "pytest" and (function in self.tests or is_benchmark_test(function))

    @property
    def timed_functions(self) -> list[str]:
        """The functions whose calls a timing (and a screening or profile on a GPU) captures: the file's benchmark
        functions, else its tests."""
        return list(self.benches or self.tests)

    def under_pytest(self, functions: list[str]) -> list[str]:
        """Those of `functions` pytest runs (``runs_under_pytest``)."""
        return [f for f in functions if self.runs_under_pytest(f)]

    @property
    def test_section(self) -> str:
        return _join(line for _, lines in self.test_blocks for line in lines)

    @property
    def test_line_numbers(self) -> frozenset[int]:
        """The file's lines (1-based) in its test section: a check composes every candidate with the original's test
        section, so a candidate's change on one of them never runs."""
        return frozenset(start + offset for start, lines in self.test_blocks for offset in range(len(lines)))

    def compose(self, kernel_section: str | None = None) -> Composed:
        """Candidate kernel code (default: this file's) followed by this file's test section."""
        kernel = (kernel_section if kernel_section is not None else self.kernel_section).splitlines()
        lines = list(kernel)
        origins = [("kernel", i + 1) for i in range(len(kernel))]
        if self.format == "tritonbench":
            sep_line = self.test_blocks[0][0] - 1 if self.test_blocks else 0
            lines.append(SEPARATOR)
            origins.append(("test", sep_line))
        else:
            lines.append("")
            origins.append(("kernel", len(kernel) + 1))
        for start, block in self.test_blocks:
            for offset, text in enumerate(block):
                lines.append(text)
                origins.append(("test", start + offset))
        return Composed(_join(lines), tuple(origins))


def _join(lines) -> str:
    return "\n".join(lines).rstrip("\n") + "\n"


def read_source(path: str | Path) -> str:
    """The text of a source file (UTF-8, a leading byte-order mark dropped). Never blocks: a named pipe, device or
    directory is refused before it is read. Raises FileNotFoundError, or TritonFileError with a one-line reason."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such file") from None
    except OSError as e:  # permission denied, a symlink loop, a dangling directory entry...
        raise TritonFileError(f"{p}: cannot be read ({e.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode) else "a device"
        raise TritonFileError(f"{p}: not a regular file ({kind})")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read()
        except OSError as e:
            raise TritonFileError(f"{p}: cannot be read ({e.strerror})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TritonFileError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from e


def read_triton_file(path: str | Path) -> TritonFile:
    """Read and parse a Triton file; a syntax error's message starts with `path:line:column:`."""
    try:
        return parse_triton_file(read_source(path), str(path))
    except TritonFileError as e:
        if e.kind != "syntax":
            raise
        raise TritonFileError(f"{path}:{e.line}:{e.column}: {e}", e.line, e.column, kind="syntax") from e


def separator_index(lines: list[str], *, lenient: bool = False) -> int | None:
    """The index of the test-section separator: a line of exactly 146 ``#`` (trailing white space allowed), or with
    `lenient` (text a model wrote) of 146 or more."""
    for i, line in enumerate(lines):
        text = line.rstrip()
        if text == SEPARATOR or (lenient and len(text) > len(SEPARATOR) and not text.strip("#")):
            return i
    return None


def looks_like_triton(path: str | Path) -> bool:
    """Is this a Triton file (a Python file with a `@triton.jit` kernel)? A file that does not parse counts when it
    mentions `triton.jit`, so that its syntax error is reported rather than the file ignored."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return False
    try:
        return any(True for _ in _find_kernels(parse(text)))
    except (SyntaxError, ValueError):
        return "triton.jit" in text


def parse_triton_file(text: str, path: str = "<string>", *, require_tests: bool = True) -> TritonFile:
    """Parse and split a Triton file. Raises TritonFileError naming what is missing or malformed.

    `require_tests=False` accepts kernel code alone (a candidate, whose test comes from the reference)."""
    try:
        tree = parse(text, filename=path)
    except SyntaxError as e:
        raise TritonFileError(f"syntax error: {e.msg}", e.lineno or 1, e.offset or 1, kind="syntax") from e
    lines = text.splitlines()
    sep_index = separator_index(lines)
    kernels = tuple(_find_kernels(tree))
    if not kernels:
        raise TritonFileError(f"{path}: no @triton.jit kernel found (is this a Triton file?)")

    if sep_index is not None:
        fmt: Format = "tritonbench"
        kernel_lines = tuple(lines[:sep_index])
        test_stmts = [s for s in tree.body if s.lineno > sep_index + 1]
        kernel_stmts = [s for s in tree.body if s.lineno <= sep_index + 1]
        test_lines = list(lines[sep_index + 1 :])
        for stmt in _test_invocations(test_stmts):  # `result_gold = test_x()`: the evaluator calls tests itself
            start, end = statement_span(stmt)
            test_lines[start - sep_index - 2 : end - sep_index - 1] = [""] * (end - start + 1)
        test_blocks = ((sep_index + 2, tuple(test_lines)),)
    else:
        fmt = "native"
        test_stmts, kernel_stmts = _split_native(tree, {k.name for k in kernels}, move_helpers=require_tests)
        kernel = list(lines)
        blocks = []
        for stmt in test_stmts:
            start, end = statement_span(stmt)
            blocks.append((start, tuple(lines[start - 1 : end])))
            kernel[start - 1 : end] = [""] * (end - start + 1)
        kernel_lines = tuple(kernel)
        test_blocks = tuple(blocks)

    test_funcs = [s for s in test_stmts if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    style = _test_style(test_stmts)
    output_source: OutputSource = "result_gold" if style == "pytest" and _assigns_result_gold(test_stmts) else "return"
    named = [(f.name, f) for f in test_funcs if f.name.startswith("test_")]
    if style == "pytest":
        named += [(f"{c.name}::{m.name}", m) for c in _test_classes(test_stmts) for m in _class_tests(c)]
    tests = tuple(dict.fromkeys(name for name, _ in named))  # a redefined test runs once (the last definition)
    benchmarks: tuple[str, ...] = ()
    if style == "pytest":
        benchmarks = tuple(t for t in tests if is_benchmark_test(t))
        harness = HARNESS_TESTS if output_source == "result_gold" else frozenset()
        tests = tuple(t for t in tests if t not in benchmarks and t not in harness)
    if not tests and require_tests:
        where = "after the ##### separator" if fmt == "tritonbench" else "at the top level"
        raise TritonFileError(f"{path}: no test found: define test_* functions {where}")
    kernel_names = {k.name for k in kernels}
    wrappers = tuple(name for s in kernel_stmts for name in _entry_point_names(s) if name not in kernel_names)
    return TritonFile(
        path=path,
        text=text,
        format=fmt,
        kernels=kernels,
        wrappers=wrappers,
        tests=tests,
        benches=benchmarks or tuple(f.name for f in test_funcs if f.name.startswith("bench_")),
        counters=tuple(f.name for f in test_funcs if f.name.startswith(("flops_", "bytes_"))),
        kernel_lines=kernel_lines,
        autograd_functions=tuple(s.name for s in kernel_stmts if _is_autograd_function(s)),
        test_launchers=_test_launchers(test_stmts, kernel_names),
        test_blocks=test_blocks,
        asserting_tests=tuple(name for name, f in named if name in tests and _asserts(f)),
        def_lines=_def_lines(tree),
        test_style=style,
        output_source=output_source,
    )


def _test_launchers(test_stmts: list[ast.stmt], kernel_names: set[str]) -> tuple[str, ...]:
    """Test-section code that launches a kernel itself, as the evaluator records it: functions (not tests or
    fixtures), `Class.apply` of autograd functions, and names bound to such an `apply`."""
    launchers: list[str] = []
    for s in test_stmts:
        function = isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        if function and not _is_test_def(s) and _launches(s, kernel_names):
            launchers.append(s.name)
        elif _is_autograd_function(s) and _launches(s, kernel_names):
            launchers.append(f"{s.name}.apply")
        elif _entry_point_names(s) and isinstance(s, ast.Assign):
            owner = ast.unparse(s.value).rsplit(".", 1)[0]  # `name = Class.apply`
            if f"{owner}.apply" in launchers:
                launchers += _entry_point_names(s)
    return tuple(launchers)


def _launches(func: ast.stmt, kernel_names: set[str]) -> bool:
    """Does the function (or class) launch one of the kernels itself (`kernel[grid](...)`)?"""
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id in kernel_names
        for n in ast.walk(func)
    )


def _entry_point_names(stmt: ast.stmt) -> list[str]:
    """Names a top-level statement binds to something the tests can call: a function, or `name = X.apply`."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Attribute) and stmt.value.attr == "apply":
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    return []


def _is_autograd_function(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ClassDef) and any(ast.unparse(base).split(".")[-1] == "Function" for base in stmt.bases)


def is_benchmark_test(name: str) -> bool:
    """A pytest-style case that benchmarks (`test_performance*`, also as a method): the perf stage runs it."""
    return test_function(name).rsplit("::", 1)[-1].startswith(BENCHMARK_TEST_PREFIX)


def _def_lines(tree: ast.Module) -> dict[str, int]:
    """Line of each top-level function and class, and of each method as `Class::method`."""
    lines: dict[str, int] = {}
    for s in tree.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines[s.name] = s.lineno
        if isinstance(s, ast.ClassDef):
            for m in s.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines[f"{s.name}::{m.name}"] = m.lineno
    return lines


def _test_classes(stmts: list[ast.stmt]) -> list[ast.ClassDef]:
    return [s for s in stmts if isinstance(s, ast.ClassDef) and s.name.startswith("Test")]


def _class_tests(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test")]


def _test_style(test_stmts: list[ast.stmt]) -> TestStyle:
    """`pytest` when the test needs pytest to run: it imports pytest, has test functions with parameters (fixtures,
    parametrize) or pytest decorators (marks, fixtures), test classes, or a module-level `pytestmark`."""
    for s in test_stmts:
        if isinstance(s, ast.Import) and any(a.name.split(".")[0] == "pytest" for a in s.names):
            return "pytest"
        if isinstance(s, ast.ImportFrom) and (s.module or "").split(".")[0] == "pytest":
            return "pytest"
        if isinstance(s, ast.ClassDef) and s.name.startswith("Test"):
            return "pytest"
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and "pytestmark" in defined_names(s):
            return "pytest"
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_pytest_decorated(s):
                return "pytest"
            if s.name.startswith("test_") and _required_params(s):
                return "pytest"
    return "call"


def _is_pytest_decorated(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = [decorator_name(d) for d in func.decorator_list]
    return any(n.split(".")[0] == "pytest" or n == "fixture" for n in names)


def _required_params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    required = [a.arg for a in positional[: len(positional) - len(args.defaults)]]
    return required + [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None]


def _assigns_result_gold(stmts: list[ast.stmt]) -> bool:
    """The ROCm-benchmark layout: a module-level `result_gold = {}` (or `dict()`) that the tests fill."""
    for s in stmts:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and "result_gold" in defined_names(s):
            value = s.value
            if isinstance(value, ast.Dict) or (isinstance(value, ast.Call) and getattr(value.func, "id", "") == "dict"):
                return True
    return False


def _test_invocations(stmts: list[ast.stmt]) -> list[ast.stmt]:
    names = {s.name for s in stmts if isinstance(s, ast.FunctionDef) and s.name.startswith("test_")}
    return [
        s
        for s in stmts
        if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))
        and any(isinstance(n, ast.Call) and getattr(n.func, "id", None) in names for n in ast.walk(s))
    ]


def statement_span(stmt: ast.stmt) -> tuple[int, int]:
    start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    return start, stmt.end_lineno or stmt.lineno


def is_test_code(stmt: ast.stmt) -> bool:
    """A top-level statement that belongs to the test: a test_/bench_/flops_/bytes_ function, a pytest fixture, a
    `Test*` class, a module-level `pytestmark`, or a __main__ guard."""
    return _is_test_def(stmt) or _is_main_guard(stmt)


def _is_test_def(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return stmt.name.startswith(TEST_PREFIXES) or any(
            decorator_name(d) in ("pytest.fixture", "fixture") for d in stmt.decorator_list
        )
    if isinstance(stmt, ast.ClassDef):
        return stmt.name.startswith("Test")
    return isinstance(stmt, (ast.Assign, ast.AnnAssign)) and "pytestmark" in defined_names(stmt)


def _is_main_guard(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Compare)
        and isinstance(stmt.test.left, ast.Name)
        and stmt.test.left.id == "__name__"
    )


def _split_native(
    tree: ast.Module, kernel_names: set[str], move_helpers: bool = True
) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """Test statements: test_/bench_/flops_/bytes_ functions, the __main__ guard, and (`move_helpers`) top-level
    helpers and imports used only by them, to a fixpoint. Anything that reaches a kernel stays kernel code.
    A candidate (whose own tests are discarded) keeps its helpers: `move_helpers=False`."""
    test = [s for s in tree.body if is_test_code(s)]
    rest = [s for s in tree.body if s not in test]
    if not move_helpers:
        return test, rest
    launching = set(kernel_names)
    grew = True
    while grew:
        grew = False
        for stmt in rest:
            names = defined_names(stmt)
            if (
                isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Assign))
                and not names <= launching
                and _loads(stmt) & launching
            ):
                launching |= names
                grew = True
    changed = True
    while changed:
        changed = False
        test_uses = set().union(*(_loads(s) for s in test)) if test else set()
        for stmt in list(rest):
            defined = defined_names(stmt)
            if not defined or not defined & test_uses or defined & launching or isinstance(stmt, ast.ClassDef):
                continue
            others = [s for s in rest if s is not stmt]
            kernel_uses = set().union(*(_loads(s) for s in others)) if others else set()
            if not defined & kernel_uses:
                rest.remove(stmt)
                test.append(stmt)
                changed = True
    test.sort(key=lambda s: s.lineno)
    return test, rest


def defined_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _loads(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _asserts(func: ast.AST) -> bool:
    """Does the test check anything (assert statements or assert*/allclose-style calls)?"""
    for node in ast.walk(func):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name.startswith("assert") or name in {"allclose", "equal", "isclose"} or name.startswith("check"):
                return True
        if isinstance(node, ast.Raise):
            return True
    return False


def decorator_name(dec: ast.expr) -> str:
    target = dec.func if isinstance(dec, ast.Call) else dec
    parts = []
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    return ".".join(reversed(parts))


def is_config_call(node: ast.AST) -> bool:
    """A call of `triton.Config` (or of `Config` however it was imported): the one reading of "writes a Config"."""
    return isinstance(node, ast.Call) and decorator_name(node).split(".")[-1] == "Config"


def constexpr_params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """The parameters of a function annotated `tl.constexpr` (however spelled, or as a string), in order."""
    args = node.args
    return tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if _is_constexpr(a.annotation))


def _is_constexpr(annotation: ast.expr | None) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split(".")[-1] == "constexpr"
    return isinstance(annotation, ast.Name | ast.Attribute) and decorator_name(annotation).split(".")[-1] == "constexpr"


def is_kernel_def(node: ast.AST) -> bool:
    """A `@triton.jit` function (also under `@triton.autotune` / `@triton.heuristics`)."""
    return isinstance(node, ast.FunctionDef) and any(decorator_name(d) in JIT_DECORATORS for d in node.decorator_list)


def _find_kernels(tree: ast.Module):
    for node in ast.walk(tree):
        if not is_kernel_def(node):
            continue
        names = [decorator_name(d) for d in node.decorator_list]
        params = tuple(a.arg for a in [*node.args.posonlyargs, *node.args.args])
        constexprs = constexpr_params(node)
        yield KernelInfo(
            name=node.name,
            line=node.lineno,
            end_line=node.end_lineno or node.lineno,
            autotuned=any(n in AUTOTUNE_DECORATORS for n in names),
            params=params,
            constexprs=constexprs,
        )
