"""The unit test as the prompts show it: trimmed to what the checks and the timing run.

A ROCm benchmark file's test section is 7-42 k characters, mostly harness (argument parsers, model-config readers,
result savers, a ``__main__`` block). The model needs the tests the check runs, whole, with the helpers and constants
they use; of a pytest benchmark case (``test_performance*``), its parametrization (the timed shapes) and signature,
not the body that drives the benchmarking harness.
"""

from __future__ import annotations

import ast

from geak.evaluator import TritonFile, defined_names, is_benchmark_test, statement_span
from geak.evaluator import parse_python as parse

Statement = ast.stmt


def trimmed_test(original: TritonFile) -> str:
    """The test section reduced to the tests and timing functions, what they use, and the imports; as written."""
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
