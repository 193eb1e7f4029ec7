"""What GEAK says of a document, as LSP diagnostics, and sending it: the problems visible in the source plus the check
report cached for that exact content, and its comparison with the base revision (warnings: a difference from the base's
outputs may be the point of the edit) — always a function of the document's current content, so an edit drops the
findings of the old code and an undo brings them back. A module of a repository (``modules``) shows a summary of its
repository tests' verdict, and each failing test shows at its definition in its own file (``module_diagnostics``), as do
the tests at which its outputs differ from the base's. `DiagnosticsPublisher` also remembers which documents carry GEAK
diagnostics on the client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from geak.evaluator import CheckResult

from ..base_comparison import too_slow
from .analysis import TEST_HINT, DocumentModel, Problem
from .base_compare import BaseReport
from .checks import CheckManager, FileReport
from .documents import Documents, Snapshot
from .module_diagnostics import (
    FailedTest,
    ModuleDiagnostics,
    at_failing_tests,
    base_findings,
    base_nodes,
    definition_lines,
    failed_tests,
    failing,
    first_line,
)
from .modules import NOT_A_MODULE, ModuleFinding, ModuleTargets
from .positions import Positions
from .timing_text import against_base, slower_kernels

SOURCE = "geak"
SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
}


def static_diagnostics(model: DocumentModel, positions: Positions) -> list[types.Diagnostic]:
    return [_problem(p, positions) for p in model.problems]


def _problem(p: Problem, positions: Positions) -> types.Diagnostic:
    return types.Diagnostic(
        range=positions.span(p.line, p.column, p.end_line, p.end_column),
        message=p.message,
        severity=SEVERITY[p.severity],
        source=SOURCE,
        code=p.code,
    )


def run_diagnostics(
    report: FileReport, model: DocumentModel, positions: Positions, path: str
) -> list[types.Diagnostic]:
    """The check's findings on this file: errors at their lines, each failing test at its definition too,
    caveats (interpreter, "not checkable on CPU") as information."""
    anchor = model.kernels[0].line if model.kernels else 1
    if report.check is None:
        if not report.error or any(p.code == "no-test" for p in model.problems):
            return []
        return [_at(positions, anchor, 1, report.error, "warning", "not-run")]
    check = report.check
    found = [
        _at(positions, d.line, d.column, d.message, d.severity, check.stage, d.end_line)
        for d in check.diagnostics
        if d.file in (None, path, check.file)
    ]
    if check.not_checkable:  # neither passed nor failed: the evaluator's notes are information, no test "failed"
        found = [d for d in found if d.severity == types.DiagnosticSeverity.Information] or [
            _at(positions, anchor, 1, check.message, "information", "not-checkable")
        ]
        return found + [_at(positions, anchor, 1, caveat, "information", "caveat") for caveat in _caveats(check)]
    lines = {d.range.start.line for d in found}
    tfile = model.tfile
    for test in check.tests:
        line = tfile.def_lines.get(test.name) if tfile else None
        if test.ok or line is None or line - 1 in lines:
            continue
        first = (test.message or test.kind).strip().splitlines()
        found.append(
            _at(positions, line, 1, f"{test.name} failed: {first[0] if first else test.kind}", "error", check.stage)
        )
        lines.add(line - 1)
    if not check.ok and not found:
        found.append(_at(positions, anchor, 1, _first_line(check.message), "error", check.stage))
    found += [_at(positions, anchor, 1, f"{caveat}", "information", "caveat") for caveat in _caveats(check)]
    return found


def module_problems(model: DocumentModel, found: ModuleFinding | None) -> tuple[Problem, ...]:
    """The problems of a module's source: no "no embedded test" warning where the repository's tests judge it, and
    where none were found, why."""
    if found is None or model.has_tests:
        return model.problems
    if found.target is not None:
        return tuple(p for p in model.problems if p.code != "no-test")
    if found.problem == NOT_A_MODULE:
        return model.problems
    said = f"{TEST_HINT}; as a module of its repository: {found.problem}"
    return tuple(replace(p, message=said) if p.code == "no-test" else p for p in model.problems)


def module_diagnostics(
    report: FileReport, model: DocumentModel, positions: Positions, path: str, at_tests: list[FailedTest]
) -> list[types.Diagnostic]:
    """A module's check by its repository's tests, on the module: errors the evaluator located in it, a summary of
    the failing tests (related information at each, `at_tests`) at the first kernel they launched, caveats."""
    anchor = model.kernels[0].line if model.kernels else 1
    check = report.check
    if check is None:
        return [_at(positions, anchor, 1, report.error, "warning", "not-run")] if report.error else []
    found = [
        _at(positions, d.line, d.column, d.message, d.severity, check.stage, d.end_line)
        for d in check.diagnostics
        if d.file in (path, check.file) and d.line > 1  # line 1: a test's failure, not placed in the module
    ]
    if check.not_checkable:
        found.append(_at(positions, anchor, 1, check.message, "information", "not-checkable"))
    elif not check.ok:
        bad = failing(check)
        ran = [t for t in check.tests if t.kind != "left out"]
        if bad:
            first = bad[0]
            said = f"{len(bad)} of {len(ran)} repository test case(s) fail: {first.name}: "
            said += first_line(first.message, first.kind)
        else:
            said = first_line(check.message, "the check failed")
        launched = [k.line for k in model.kernels if any(k.name in t.launches for t in bad)]
        summary = _at(positions, launched[0] if launched else anchor, 1, said, "error", "repository-tests")
        summary.related_information = at_failing_tests(at_tests) or None
        found.append(summary)
    return found + [_at(positions, anchor, 1, caveat, "information", "caveat") for caveat in _caveats(check)]


def base_diagnostics(compared: BaseReport, model: DocumentModel, positions: Positions) -> list[types.Diagnostic]:
    """Warnings from the comparison with the base: outputs that differ at each test of this file that shows it (else
    one warning at the first kernel), and a significant slowdown at the kernels whose time grew. What is said once
    (new, the same code, a base that is no reference) is the hover's and the status's, never a diagnostic."""
    anchor = model.kernels[0].line if model.kernels else 1
    found = []
    result = compared.result
    if compared.outcome == "differs" and result is not None:
        tests = model.tfile.def_lines if model.tfile else {}
        at_tests: dict[str, str] = {}
        elsewhere = []
        mismatches = result.comparison.mismatches if result.comparison is not None else ()
        for m in mismatches:
            test = _test_of(m.where)
            said = f"outputs differ from {compared.rev}'s in {m.where}: {m.message}"
            if test in tests:
                at_tests.setdefault(test, said)
            else:
                elsewhere.append(said)
        for test in result.tests:
            name = _test_of(test.name)
            if not test.ok and not mismatches and name in tests:
                said = (test.message or test.kind).strip().splitlines()
                at_tests.setdefault(name, f"{compared.label}'s {test.name} fails with these kernels: "
                                          f"{said[0] if said else test.kind}")  # fmt: skip
        found += [_at(positions, tests[name], 1, said, "warning", "base") for name, said in at_tests.items()]
        if not found:
            more = f" (+{len(elsewhere) - 1} more)" if len(elsewhere) > 1 else ""
            found.append(_at(positions, anchor, 1, (elsewhere[0] + more) if elsewhere else compared.message,
                             "warning", "base"))  # fmt: skip
    bench = compared.bench
    if bench is not None and too_slow(bench, 1.0):
        said = f"{against_base(bench, compared.rev)}: significantly slower"
        lines = {k.name: k.line for k in model.kernels}
        for kernel in slower_kernels(bench, list(lines)):
            found.append(_at(positions, lines[kernel], 1, said, "warning", "base-slower"))
    return found


def _test_of(where: str) -> str:
    """The test a comparison's `where` (`test_x → return`, `test_x[4-fp16] → out`) or a test id names."""
    return where.split(" → ")[0].split("[")[0].strip()


def _caveats(check: CheckResult) -> list[str]:
    notes = list(check.caveats)
    if check.comparison is not None:
        notes += list(check.comparison.notes)
    return notes


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "the check failed"


def _at(
    positions: Positions,
    line: int,
    column: int,
    message: str,
    severity: str,
    code: str,
    end_line: int | None = None,
) -> types.Diagnostic:
    return types.Diagnostic(
        range=positions.line_range(line, column, end_line),
        message=message,
        severity=SEVERITY.get(severity, types.DiagnosticSeverity.Error),
        source=SOURCE,
        code=code,
    )


class DiagnosticsPublisher:
    def __init__(
        self,
        server: LanguageServer,
        documents: Documents,
        checks: CheckManager,
        compared: Callable[[FileReport | None], BaseReport | None],
        modules: ModuleTargets,
    ):
        self.server = server
        self.documents = documents
        self.checks = checks
        self.compared = compared  # a report's comparison with the base the settings name now
        self.modules = modules
        self.at_tests = ModuleDiagnostics()  # the modules' failing tests, in their test files
        self.published: dict[str, bool] = {}  # uris with GEAK diagnostics on the client

    async def publish(self, uri: str, *, disk: bool = False) -> None:
        """Publish the diagnostics of the document's current content (or, with `disk`, of the file on disk)."""
        snap = await self.documents.snapshot(uri, disk=disk)
        if snap is None:
            return
        positions = Positions(snap.text, self.server.workspace.position_codec)
        found = [f.diagnostic(positions) for f in self.at_tests.at(uri)]  # a test file of a module
        if not snap.model.triton:
            if not found:
                self.clear(uri)
                return
        else:
            found += await self._own(snap, positions)
        if snap.version is not None and not self.documents.is_current(uri, snap.model.key):
            return  # the document changed while this was computed: its own publish follows
        self.published[uri] = True
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=snap.version)
        )

    async def _own(self, snap: Snapshot, positions: Positions) -> list[types.Diagnostic]:
        """A Triton document's diagnostics; a module's failing tests go to their own files meanwhile."""
        model, uri = snap.model, snap.uri
        module = self.modules.known(snap.path) if not model.has_tests else None
        found = [_problem(p, positions) for p in module_problems(model, module)]
        report = self.checks.cache.get(model.key)
        target = module.target if module is not None else None
        compared = self.compared(report)
        if report is not None and target is not None and report.module == target:
            check = report.check
            at_tests: list[FailedTest] = []
            at_base: list[FailedTest] = []
            said = base_nodes(compared) if compared is not None else {}
            if check is not None:
                nodes = [t.name for t in failing(check)] + list(said)
                lines = await asyncio.to_thread(definition_lines, target.tests.repository.root, nodes)
                at_tests = failed_tests(check, target, uri, model, positions, lines)
                at_base = base_findings(said, target, uri, model, positions, lines)
            found += module_diagnostics(report, model, positions, snap.path, at_tests)
            if compared is not None:  # on the module: a slowdown, and a difference no test could show
                found += [d for d in base_diagnostics(compared, model, positions) if d.code != "base" or not at_base]
            await self._publish_tests(self.at_tests.set(uri, at_tests + at_base))
            return found
        await self._publish_tests(self.at_tests.set(uri, []))
        if report is not None and report.module is None:
            found += run_diagnostics(report, model, positions, snap.path)
        if compared is not None:
            found += base_diagnostics(compared, model, positions)
        return found

    async def _publish_tests(self, uris: set[str]) -> None:
        """Publish the test files whose modules' findings changed (open or not)."""
        for uri in uris:
            await self.publish(uri, disk=True)

    async def closed(self, uri: str) -> None:
        """A document was closed: its diagnostics, and its failing tests in their files, go."""
        self.clear(uri)
        await self._publish_tests(self.at_tests.set(uri, []))

    def clear(self, uri: str) -> None:
        """Take GEAK's diagnostics of `uri` off the client (if it has any)."""
        if self.published.pop(uri, None):
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
