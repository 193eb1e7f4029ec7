"""Where a module's check by its repository's tests is shown: each failing test at its definition in its own file
(the test file's URI), with related information at the module's kernels it launched; and, on the module, a summary
with related information at the failing tests. `ModuleDiagnostics` keeps each module's findings at test files and
merges them per test file (a test file may test several open modules)."""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from geak.evaluator import CheckResult, node_definition
from geak.evaluator import parse_python as parse

from .analysis import DocumentModel
from .base_compare import BaseReport
from .modules import ModuleTarget
from .positions import Positions

CODE = "repository-test"
BASE_CODE = "base"


@dataclass(frozen=True)
class FailedTest:
    """A failing test function of the repository, at its definition: one finding for all its failing cases."""

    uri: str  # of the test file
    line: int  # 1-based line of its `def`
    message: str
    related: tuple[types.DiagnosticRelatedInformation, ...]
    code: str = CODE  # BASE_CODE: its outputs differ from the base's (a warning: that may be the point of the edit)

    def diagnostic(self, positions: Positions) -> types.Diagnostic:
        warning = self.code == BASE_CODE
        return types.Diagnostic(
            range=positions.line_range(self.line),
            message=self.message,
            severity=types.DiagnosticSeverity.Warning if warning else types.DiagnosticSeverity.Error,
            source="geak",
            code=self.code,
            related_information=list(self.related) or None,
        )


def failing(check: CheckResult) -> list:
    """The check's failing test outcomes (pytest cases)."""
    return [t for t in check.tests if not t.ok]


def first_line(text: str, default: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else default


def definition_lines(root: Path, nodes: list[str]) -> dict[str, tuple[Path, int]]:
    """Where each test node id's function is defined: (its file, the 1-based line of its `def`); nodes whose file or
    function cannot be found are left out. Reads the test files (call it in a thread)."""
    trees: dict[str, ast.Module | None] = {}
    found = {}
    for node in nodes:
        file, _, tail = node.partition("::")
        if file not in trees:
            try:
                trees[file] = parse((root / file).read_text(encoding="utf-8"), filename=str(root / file))
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                trees[file] = None
        tree = trees[file]
        defined = node_definition(tree, tail.split("[", 1)[0]) if tree is not None and tail else None
        if defined is not None:
            found[node] = (root / file, defined.lineno)
    return found


def failed_tests(
    check: CheckResult,
    target: ModuleTarget,
    module_uri: str,
    model: DocumentModel,
    positions: Positions,
    lines: dict[str, tuple[Path, int]],
) -> list[FailedTest]:
    """The failing tests of a module's check, one per test function (at `lines`, from ``definition_lines``), each
    with related information at the module's kernels its failing cases launched (all of them where none is known)."""
    groups: dict[tuple[Path, int], list] = defaultdict(list)  # (file, line) -> its failing cases
    for test in failing(check):
        if test.name in lines:
            groups[lines[test.name]].append(test)
    kernels = {k.name: k for k in model.kernels}
    module = target.tests.module
    findings = []
    for (file, line), tests in groups.items():
        uri = from_fs_path(str(file))
        if uri is None:
            continue
        first = tests[0]
        more = f" (and {len(tests) - 1} more case{'s' if len(tests) > 2 else ''})" if len(tests) > 1 else ""
        said = first_line(first.message, first.kind)
        message = f"{first.name.partition('::')[2]}{more} fails with {module} as saved: {said}"
        launched = [name for t in tests for name in t.launches if name in kernels]
        names = list(dict.fromkeys(launched)) or list(kernels)
        related = tuple(
            types.DiagnosticRelatedInformation(
                location=types.Location(uri=module_uri, range=positions.line_range(kernels[name].line)),
                message=f"kernel {name} of {module}" + (" (launched by this test)" if launched else ""),
            )
            for name in names
        )
        findings.append(FailedTest(uri, line, message, related))
    return findings


def base_nodes(compared: BaseReport) -> dict[str, str]:
    """The test (node id) at which each difference from the base's outputs is said, with what is said there (the first
    difference per test): the test a difference names (`tests/t.py::test_x[4] → return`), else — a probe, whose
    inputs the tests' calls gave — the first test that launched the module's kernels. A base's test that fails with
    the saved module (no output differs) is said at that test."""
    result = compared.result
    if compared.outcome != "differs" or result is None:
        return {}
    names = [t.name for t in result.tests]
    launching = next((t.name for t in result.tests if t.launches), names[0] if names else None)
    said: dict[str, str] = {}
    mismatches = result.comparison.mismatches if result.comparison is not None else ()
    for m in mismatches:
        named = m.where.split(" → ")[0].strip()
        node = named if named in names else launching
        if node is not None:
            said.setdefault(node, f"outputs differ from {compared.rev}'s in {m.where}: {m.message}")
    for test in result.tests if not mismatches else ():
        if not test.ok:
            why = first_line(test.message, test.kind)
            said.setdefault(test.name, f"{compared.label}'s {test.name} fails with this module: {why}")
    return said


def base_findings(
    said: dict[str, str],
    target: ModuleTarget,
    module_uri: str,
    model: DocumentModel,
    positions: Positions,
    lines: dict[str, tuple[Path, int]],
) -> list[FailedTest]:
    """The differences from the base (``base_nodes``) as warnings at their tests' definitions (`lines`, from
    ``definition_lines``), each with related information at the module's kernels."""
    findings = []
    for node, message in said.items():
        if node not in lines:
            continue
        file, line = lines[node]
        uri = from_fs_path(str(file))
        if uri is None:
            continue
        related = tuple(
            types.DiagnosticRelatedInformation(
                location=types.Location(uri=module_uri, range=positions.line_range(k.line)),
                message=f"kernel {k.name} of {target.tests.module}",
            )
            for k in model.kernels
        )
        findings.append(FailedTest(uri, line, message, related, BASE_CODE))
    return findings


def at_failing_tests(findings: list[FailedTest]) -> list[types.DiagnosticRelatedInformation]:
    """Related information for the module's summary: where each failing test is."""
    related = []
    for f in findings:
        start = types.Position(line=f.line - 1, character=0)
        where = types.Location(uri=f.uri, range=types.Range(start=start, end=start))
        related.append(types.DiagnosticRelatedInformation(location=where, message=f.message))
    return related


class ModuleDiagnostics:
    """Each module's findings at test files, merged per test file."""

    def __init__(self) -> None:
        self._by_module: dict[str, list[FailedTest]] = {}

    def set(self, module_uri: str, findings: list[FailedTest]) -> set[str]:
        """The module's findings now; returns the test files whose diagnostics changed."""
        old = self._by_module.pop(module_uri, [])
        if findings:
            self._by_module[module_uri] = findings
        if old == findings:
            return set()
        return {f.uri for f in (*old, *findings)}

    def at(self, test_uri: str) -> list[FailedTest]:
        return [f for findings in self._by_module.values() for f in findings if f.uri == test_uri]
