"""What GEAK says of a document, as LSP diagnostics, and sending it: the problems visible in the source plus the
check report cached for that exact content — always a function of the document's current content, so an edit drops
the findings of the old code and an undo brings them back. `DiagnosticsPublisher` also remembers which documents
carry GEAK diagnostics on the client."""

from __future__ import annotations

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from geak.evaluator import CheckResult

from .analysis import DocumentModel, Problem
from .checks import CheckManager, FileReport
from .documents import Documents
from .positions import Positions

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
    def __init__(self, server: LanguageServer, documents: Documents, checks: CheckManager):
        self.server = server
        self.documents = documents
        self.checks = checks
        self.published: dict[str, bool] = {}  # uris with GEAK diagnostics on the client

    async def publish(self, uri: str, *, disk: bool = False) -> None:
        """Publish the diagnostics of the document's current content (or, with `disk`, of the file on disk)."""
        snap = await self.documents.snapshot(uri, disk=disk)
        if snap is None:
            return
        if not snap.model.triton:
            self.clear(uri)
            return
        positions = Positions(snap.text, self.server.workspace.position_codec)
        found = static_diagnostics(snap.model, positions)
        report = self.checks.cache.get(snap.model.key)
        if report is not None:
            found += run_diagnostics(report, snap.model, positions, snap.path)
        if snap.version is not None and not self.documents.is_current(uri, snap.model.key):
            return  # the document changed while this was computed: its own publish follows
        self.published[uri] = True
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=snap.version)
        )

    def clear(self, uri: str) -> None:
        """Take GEAK's diagnostics of `uri` off the client (if it has any)."""
        if self.published.pop(uri, None):
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
