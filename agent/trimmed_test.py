"""The unit test as the prompts show it: trimmed to what the checks and the timing run.

A ROCm benchmark file's test section is 7-42 k characters, mostly harness (argument parsers, model-config readers,
result savers, a ``__main__`` block). The model needs the tests the check runs, whole, with the helpers and constants
they use; of a pytest benchmark case (``test_performance*``), its parametrization (the timed shapes) and signature,
not the body that drives the benchmarking harness.
"""

from __future__ import annotations

import ast
from pathlib import Path

from geak.evaluator import TritonFile, defined_names, is_benchmark_test, statement_span
from geak.evaluator import parse_python as parse

Statement = ast.stmt


REPOSITORY_TESTS_CHARS = 8000  # of a repository's tests, what the prompts show at most


def trimmed_test(original: TritonFile) -> str:
    """The test section reduced to the tests and timing functions, what they use, and the imports; as written. A
    repository's module: the selected tests of its repository (``repository_tests``)."""
    if original.repository is not None:
        return repository_tests(original.repository)
    text = original.test_section
    try:
        tree = parse(text)
    except SyntaxError:
        return text
    roots = {name.split("::")[0] for name in (*original.tests, *original.timed_functions, *original.counters)}
    defines = {name: stmt for stmt in tree.body for name in defined_names(stmt)}
    headers_only = {
        stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
        and is_benchmark_test(stmt.name) and original.test_style == "pytest"
    }  # fmt: skip
    kept: set[Statement] = set()
    pending = [defines[name] for name in roots if name in defines]
    while pending:
        stmt = pending.pop()
        if stmt in kept:
            continue
        kept.add(stmt)
        used = _names_read(stmt, header_only=stmt in headers_only)
        pending += [defines[name] for name in used if name in defines and defines[name] not in kept]
    kept |= {s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)}
    lines = text.split("\n")
    excerpt = ""
    for stmt in (s for s in tree.body if s in kept):
        start, end = statement_span(stmt)
        if stmt in headers_only:
            end = stmt.body[0].lineno - 1 if stmt.body[0].lineno > stmt.lineno else stmt.lineno
        source = "\n".join(lines[start - 1 : end])
        if stmt in headers_only:
            source += "\n    ...  # times the calls of its parameters; body omitted"
        joint = "\n" if isinstance(stmt, ast.Import | ast.ImportFrom) else "\n\n"
        excerpt += (joint if excerpt else "") + source
    omitted = len([s for s in tree.body if s not in kept])
    note = f"# ({omitted} statements of harness the checks do not run are omitted, and comments)\n" if omitted else ""
    return note + _without_comments(excerpt)


def _without_comments(code: str) -> str:
    """`code` without its comment lines and docstrings (what it runs stays as written)."""
    try:
        tree = parse(code)
    except SyntaxError:
        return code
    drop = {
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
        and len(node.body) > 1
        for line in range(node.body[0].lineno, (node.body[0].end_lineno or node.body[0].lineno) + 1)
    }
    strings = {  # lines inside multi-line strings are kept whatever they start with
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for line in range(node.lineno + 1, (node.end_lineno or node.lineno) + 1)
    }
    lines = code.split("\n")
    kept = [
        line
        for number, line in enumerate(lines, 1)
        if number not in drop and (number in strings or not line.lstrip().startswith("#"))
    ]
    return "\n".join(kept)


def _names_read(stmt: Statement, *, header_only: bool) -> set[str]:
    nodes: list[ast.AST] = [stmt]
    if header_only and isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        nodes = [*stmt.decorator_list, stmt.args]
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def repository_tests(repository: dict, limit: int = REPOSITORY_TESTS_CHARS) -> str:
    """The test functions a repository's module is judged by (its job dict's node ids), with the helpers of their
    files they use and the files' imports, as written, each file under its path; at most `limit` characters (what is
    left out is said)."""
    by_file: dict[str, list[str]] = {}
    for node in repository["nodes"]:
        file, _, name = node.partition("::")
        by_file.setdefault(file, []).append(name.split("::", 1)[0].split("[", 1)[0])
    parts: list[str] = []
    left = 0
    for file, names in by_file.items():
        try:
            text = (Path(repository["root"]) / file).read_text(encoding="utf-8")
            tree = parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        block = f"# {file}\n{_without_comments(_used_by(text, tree, set(names)))}"
        if parts and sum(map(len, parts)) + len(block) > limit:
            left += len(set(names))
            continue
        parts.append(block)
    note = f"\n\n# ({left} more test function(s) of the repository omitted)" if left else ""
    return "\n\n\n".join(parts) + note


def _used_by(text: str, tree: ast.Module, roots: set[str]) -> str:
    """The top-level statements of a test file that define `roots`, those they use (helpers, constants), and its
    imports, in the file's order."""
    defines = {name: stmt for stmt in tree.body for name in defined_names(stmt)}
    kept: set[Statement] = set()
    pending = [defines[name] for name in roots if name in defines]
    while pending:
        stmt = pending.pop()
        if stmt not in kept:
            kept.add(stmt)
            pending += [defines[n] for n in _names_read(stmt, header_only=False) if n in defines]
    kept |= {s for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)}
    lines = text.split("\n")
    excerpt = ""
    for stmt in (s for s in tree.body if s in kept):
        start, end = statement_span(stmt)
        joint = "\n" if isinstance(stmt, ast.Import | ast.ImportFrom) else "\n\n\n"
        excerpt += (joint if excerpt else "") + "\n".join(lines[start - 1 : end])
    return excerpt
