"""The unit test as the prompts show it: trimmed to what the checks and the timing run.

A ROCm benchmark file's test section is 7-42 k characters, mostly harness (argument parsers, model-config readers,
result savers, a ``__main__`` block). The model needs the tests the check runs, whole, with the helpers and constants
they use; of a pytest benchmark case (``test_performance*``), its parametrization (the timed shapes) and signature,
not the body that drives the benchmarking harness. Imports nothing kept reads, trailing blanks and the lines that only
save outputs for the harness (``result_gold[name] = ...``: the check captures the calls' outputs itself) go too.

Where a prompt must be shorter still (``prompts.PROMPT_CHARS``), ``helper_bodies=False`` also leaves out the bodies of
the helpers that never reach the kernel section (input preparation, reference setup) and of the test's own kernels:
their `def` lines stay.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from geak.evaluator import TritonFile, defined_names, is_benchmark_test, is_kernel_def, statement_span
from geak.evaluator import parse_python as parse

Statement = ast.stmt
Function = ast.FunctionDef | ast.AsyncFunctionDef


REPOSITORY_TESTS_CHARS = 8000  # of a repository's tests, what the prompts show at most


def trimmed_test(original: TritonFile, *, helper_bodies: bool = True) -> str:
    """The test section reduced to the tests and timing functions, what they use, and the imports they need; as
    written, less comments, docstrings and result savers. `helper_bodies` False: the helpers that reach nothing of
    the kernel section keep only their `def` lines. A repository's module: the selected tests of its repository
    (``repository_tests``)."""
    if original.repository is not None:
        return repository_tests(original.repository)
    text = original.test_section
    try:
        tree = parse(text)
    except SyntaxError:
        return text
    roots = {name.split("::")[0] for name in (*original.tests, *original.timed_functions, *original.counters)}
    defines = {name: stmt for stmt in tree.body for name in defined_names(stmt) if not _is_import(stmt)}
    headers_only = {
        stmt for stmt in tree.body if isinstance(stmt, Function)
        and is_benchmark_test(stmt.name) and original.test_style == "pytest"
    }  # fmt: skip
    if not helper_bodies:
        headers_only |= _helpers_apart_from(original, tree, {defines[name] for name in roots if name in defines})
    kept: set[Statement] = set()
    pending = [defines[name] for name in roots if name in defines]
    while pending:
        stmt = pending.pop()
        if stmt in kept:
            continue
        kept.add(stmt)
        used = _names_read(stmt, header_only=stmt in headers_only)
        pending += [defines[name] for name in used if name in defines and defines[name] not in kept]
    read = set().union(*(_names_read(s, header_only=s in headers_only) for s in kept)) if kept else set()
    imports, seen = [], set()
    for stmt in (s for s in tree.body if _is_import(s)):
        source = ast.unparse(stmt)
        if source not in seen and (defined_names(stmt) & read or _is_star(stmt)):
            imports.append(stmt)
            seen.add(source)
    kept |= set(imports)
    lines = text.split("\n")
    excerpt = ""
    for stmt in (s for s in tree.body if s in kept):
        start, end = statement_span(stmt)
        if stmt in headers_only:
            end = stmt.body[0].lineno - 1 if stmt.body[0].lineno > stmt.lineno else stmt.lineno
        source = "\n".join(lines[start - 1 : end])
        if stmt in headers_only:
            source += _omitted_body(stmt)
        joint = "\n" if _is_import(stmt) else "\n\n"
        excerpt += (joint if excerpt else "") + source
    omitted = len([s for s in tree.body if s not in kept])
    note = f"# ({omitted} statements of harness the checks do not run are omitted, and comments)\n" if omitted else ""
    return note + _without_result_savers(_without_comments(excerpt))


def _is_import(stmt: Statement) -> bool:
    return isinstance(stmt, ast.Import | ast.ImportFrom)


def _is_star(stmt: Statement) -> bool:
    return isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names)


def _omitted_body(stmt: Function) -> str:
    if is_benchmark_test(stmt.name):
        return "\n    ...  # times the calls of its parameters; body omitted"
    count = (stmt.end_lineno or stmt.lineno) - stmt.body[0].lineno + 1
    lines = f"{count} line{'s' if count != 1 else ''}"
    if is_kernel_def(stmt):
        return f"\n    ...  # {lines}: a kernel of the test's own, not part of your module; body omitted"
    return f"\n    ...  # {lines} of input preparation (calls nothing of the kernel section); body omitted"


def _helpers_apart_from(original: TritonFile, tree: ast.Module, roots: set[Statement]) -> set[Statement]:
    """The test section's own kernels, and its functions other than `roots` that reach no name of the kernel section,
    not even through other functions of the test section."""
    try:
        kernel = parse(original.kernel_section)
        kernel_names = {name for s in kernel.body if not _is_import(s) for name in defined_names(s)}
    except SyntaxError:
        return set()
    functions = {s.name: s for s in tree.body if isinstance(s, Function)}
    reaching = {name for name, f in functions.items() if not is_kernel_def(f) and _names_read(f, header_only=False)
                & kernel_names}  # fmt: skip
    grew = True
    while grew:
        more = {name for name, f in functions.items() if name not in reaching and not is_kernel_def(f)
                and _names_read(f, header_only=False) & reaching}  # fmt: skip
        reaching |= more
        grew = bool(more)
    return {f for name, f in functions.items() if name not in reaching and f not in roots}


def _without_result_savers(code: str) -> str:
    """`code` without the harness's output savers: a module-level ``NAME = {}`` that the code only stores into
    (``NAME[key] = value``), those stores, and the locals that only name their keys (read from pytest's ``request``)."""
    try:
        tree = parse(code)
    except SyntaxError:
        return code
    stores = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
    }  # fmt: skip
    empty_dicts = {
        s.targets[0].id: s for s in tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Dict) and not s.value.keys
    }  # fmt: skip
    uses: dict[str, list[bool]] = {}  # each read of a candidate saver: is it a store into it?
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in empty_dicts and isinstance(n.ctx, ast.Load):
            uses.setdefault(n.id, []).append(id(n) in stores)
    savers = {name for name in empty_dicts if uses.get(name) and all(uses[name])}
    stored = [s for s in ast.walk(tree) if isinstance(s, ast.Assign) and _stores_into(s, savers)]
    savers -= {t.value.id for s in stored if _calls_a_function(s.value) for t in s.targets}  # the call is the test
    if not savers:
        return code
    drop = [empty_dicts[name] for name in savers]
    for function in (n for n in ast.walk(tree) if isinstance(n, Function)):
        keys = {"request"}  # the locals that only name a saved output
        for stmt in function.body:
            if _stores_into(stmt, savers):
                drop.append(stmt)
            elif (
                isinstance(stmt, ast.Assign)
                and _names_read(stmt.value, header_only=False) & keys
                and all(isinstance(t, ast.Name) for t in stmt.targets)
            ):
                keys |= {t.id for t in stmt.targets}
                drop.append(stmt)
    cut = {line for stmt in drop for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)}
    kept = "\n".join(line for number, line in enumerate(code.split("\n"), 1) if number not in cut)
    return re.sub(r"\n{3,}", "\n\n", kept).strip("\n")


def _calls_a_function(value: ast.expr) -> bool:
    """`value` calls a function by its name (``copy(x)``), beyond methods (``out.clone().cpu()``, ``torch.tensor``)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) for n in ast.walk(value))


def _stores_into(stmt: Statement, savers: set[str]) -> bool:
    return isinstance(stmt, ast.Assign) and any(
        isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in savers for t in stmt.targets
    )


def _without_comments(code: str) -> str:
    """`code` without its comment lines, docstrings and trailing blanks (what it runs stays as written)."""
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
    strings = {  # lines inside multi-line strings are kept whatever they start with, and as they end
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for line in range(node.lineno + 1, (node.end_lineno or node.lineno) + 1)
    }
    lines = code.split("\n")
    kept = [
        line if number in strings else line.rstrip()
        for number, line in enumerate(lines, 1)
        if number not in drop and (number in strings or not line.lstrip().startswith("#"))
    ]
    return "\n".join(kept)


def _names_read(node: ast.AST, *, header_only: bool) -> set[str]:
    nodes: list[ast.AST] = [node]
    if header_only and isinstance(node, Function):
        nodes = [*node.decorator_list, node.args]
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
