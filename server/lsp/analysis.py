"""What the server knows of a document without running it: is it a Triton file, its kernels and tests, and the
problems visible in the source (no embedded test, a non-power-of-two `tl.arange`, a kernel never launched).

Pure functions of the text (run in a thread, cached by content hash); they never raise for any input.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

from geak.evaluator import KernelInfo, TritonFile, TritonFileError, parse_triton_file
from geak.evaluator import parse_python as parse

MAX_CHARS = 2_000_000  # larger files are not analysed (nobody writes a kernel file this big)
TEST_HINT = (
    "no embedded test: GEAK can neither check nor time this file. Add top-level test_* functions that call the "
    "wrappers (or a line of 146 '#' followed by test_* functions, TritonBench style)"
)


@dataclass(frozen=True)
class Problem:
    """A problem found in the source. Lines 1-based, columns 0-based characters (AST convention)."""

    line: int
    column: int
    end_line: int
    end_column: int
    severity: str  # error | warning | information
    message: str
    code: str


@dataclass(frozen=True)
class DocumentModel:
    key: str
    triton: bool
    tfile: TritonFile | None = None
    problems: tuple[Problem, ...] = ()
    note: str = ""  # why a file that looks like Triton was not analysed
    starts: dict[str, int] = field(default_factory=dict)  # kernel name -> first line (its first decorator)

    @property
    def kernels(self) -> tuple[KernelInfo, ...]:
        return self.tfile.kernels if self.tfile else ()

    @property
    def has_tests(self) -> bool:
        return bool(self.tfile and self.tfile.tests)

    def kernel_at(self, line: int) -> KernelInfo | None:
        """The kernel whose definition (decorators included) contains 1-based `line`."""
        for k in self.kernels:
            first = self.starts.get(k.name, k.line)
            if first <= line <= k.end_line:
                return k
        return None

    def kernel(self, name: str) -> KernelInfo | None:
        return next((k for k in self.kernels if k.name == name), None)


def content_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_triton(text: str) -> bool:
    return "jit" in text and "triton" in text


def analyze(text: str, path: str) -> DocumentModel:
    key = content_key(text)
    if not looks_like_triton(text):
        return DocumentModel(key, False)
    if len(text) > MAX_CHARS:
        return DocumentModel(key, False, note=f"not analysed: larger than {MAX_CHARS // 1_000_000} MB")
    try:
        tree = parse(text, filename=path)
    except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes (Python < 3.12)
        line = getattr(e, "lineno", None) or 1
        column = max((getattr(e, "offset", None) or 1) - 1, 0)
        message = f"syntax error: {getattr(e, 'msg', None) or e}"
        problem = Problem(line, column, line, column + 1, "error", message, "syntax")
        return DocumentModel(key, True, problems=(problem,), note="syntax error")
    except RecursionError:
        return DocumentModel(key, False, note="not analysed: nested too deeply")
    try:
        tfile = parse_triton_file(text, path, require_tests=False)
    except TritonFileError:
        return DocumentModel(key, False)  # no @triton.jit kernel: not a Triton file
    problems = [*_arange_problems(tree), *_unlaunched_kernels(tree, tfile)]
    if not tfile.tests:
        first = tfile.kernels[0]
        problems.insert(0, Problem(first.line, 0, first.line, 10_000, "warning", TEST_HINT, "no-test"))
    starts = _decorated_starts(tree, {k.name for k in tfile.kernels})
    return DocumentModel(key, True, tfile, tuple(problems), starts=starts)


def _decorated_starts(tree: ast.Module, names: set[str]) -> dict[str, int]:
    starts = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in names and node.name not in starts:
            starts[node.name] = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return starts


def _int_value(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _is_arange(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute) and func.attr == "arange":
        owner = func.value
        return (isinstance(owner, ast.Name) and owner.id in ("tl", "language")) or (
            isinstance(owner, ast.Attribute) and owner.attr == "language"
        )
    return False


def _arange_problems(tree: ast.Module):
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_arange(node.func)):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        start = _int_value(node.args[0] if node.args else keywords.get("start"))
        end = _int_value(node.args[1] if len(node.args) > 1 else keywords.get("end"))
        if start is None or end is None:
            continue
        size = end - start
        if size <= 0 or size & (size - 1):
            yield Problem(
                node.lineno,
                node.col_offset,
                node.end_lineno or node.lineno,
                node.end_col_offset or node.col_offset + 1,
                "error",
                f"tl.arange({start}, {end}) has {size} elements: Triton needs a power of two "
                "(pad to the next power of two and mask the extra lanes)",
                "arange-power-of-two",
            )


def _unlaunched_kernels(tree: ast.Module, tfile: TritonFile):
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in {k.name for k in tfile.kernels} and node.name not in used:
            line = node.lineno
            column = len("def ") + (node.col_offset or 0)
            yield Problem(
                line,
                column,
                line,
                column + len(node.name),
                "warning",
                f"kernel {node.name} is never launched or called in this file: its test cannot exercise it",
                "kernel-unused",
            )
