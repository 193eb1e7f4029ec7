"""Diagnostics: problems visible in the source at once (on open and edit), the check's findings after a save.

What is published for a document is always a function of its current content: the static problems of that text
plus the check report cached for that exact content (so an edit drops the findings of the old code, and an undo
brings them back).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from geak.evaluator.results import CheckResult

from .analysis import TEST_HINT, DocumentModel, Problem
from .checks import FileReport
from .positions import Positions
from .requests import command_args, document_uri

if TYPE_CHECKING:
    from .lsp_server import GeakServer

log = logging.getLogger(__name__)
SOURCE = "geak"
CHECK, CHECK_COMMAND = "geak/check", "geak.server.checkFile"
MAX_DISK_CHARS = 2_000_000
EDIT_DEBOUNCE_S = 0.2
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


async def publish(server: GeakServer, uri: str, *, disk: bool = False) -> None:
    """Publish the diagnostics of the document's current content (or, with `disk`, of the file on disk)."""
    snap = await server.snapshot(uri, disk=disk)
    if snap is None:
        return
    if not snap.model.triton:
        if server.published.pop(uri, None):
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        return
    positions = Positions(snap.text, server.workspace.position_codec)
    found = static_diagnostics(snap.model, positions)
    report = server.report_for(snap.model)
    if report is not None:
        found += run_diagnostics(report, snap.model, positions, snap.path)
    if snap.version is not None and not server.is_current(uri, snap.model.key):
        return  # the document changed while this was computed: its own publish follows
    server.published[uri] = True
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=found, version=snap.version)
    )


def check_summary(ok: bool, stage: str, message: str, backend: str | None = None) -> dict:
    return {"ok": ok, "stage": stage, "message": message, "backend": backend}


async def check_now(server: GeakServer, uri: str) -> dict:
    """`geak/check`: check the document now (even with checks on save off), publish, and summarize."""
    snap = await server.snapshot(uri, disk=True)
    if snap is None:
        return check_summary(False, "parse", f"cannot read {uri}")
    name = snap.path.rsplit("/", 1)[-1]
    if not snap.model.triton:
        syntax = [p.message for p in snap.model.problems if p.code == "syntax"]
        return check_summary(False, "parse", syntax[0] if syntax else f"{name} is not a Triton file")
    if not snap.model.has_tests:
        return check_summary(False, "parse", f"{name}: {TEST_HINT}")
    await server.ready.wait()
    if not await server.trust.ensure():
        return check_summary(False, "untrusted", "the workspace is not trusted: GEAK runs no code from it")
    if snap.version is None:
        server.published[uri] = True  # not open: diagnostics for the file on disk
    checked: asyncio.Future = asyncio.get_running_loop().create_future()
    server.checks.request(
        uri, snap.path, snap.text, timing=server.settings.time_on_save, debounce=False, checked=checked
    )
    try:
        report = await asyncio.shield(checked)
    except asyncio.CancelledError:
        if checked.cancelled():  # a newer edit or save replaced this check
            return check_summary(False, "cancelled", "the document changed during the check")
        raise
    if report is None or report.check is None:
        return check_summary(False, "parse", report.error if report else "not checked")
    check = report.check
    return check_summary(check.ok, check.stage, check.message, check.backend)


def register(server: GeakServer) -> None:
    @server.feature(CHECK)
    async def check_request(params: Any) -> dict:
        return await check_now(server, document_uri(params, CHECK))

    @server.command(CHECK_COMMAND)
    async def check_command(*args) -> dict:
        (uri,) = command_args(args, CHECK_COMMAND, 1)
        return await check_now(server, uri)

    pending: dict[str, asyncio.TimerHandle] = {}

    def later(uri: str) -> None:
        handle = pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        pending[uri] = loop.call_later(EDIT_DEBOUNCE_S, lambda: server.spawn(publish(server, uri)))

    async def open_or_save(uri: str) -> None:
        snap = await server.snapshot(uri)
        if snap is None:
            return
        await publish(server, uri)
        await server.ready.wait()  # the client's settings decide whether to check
        snap = await server.snapshot(uri)
        if snap is not None:
            server.request_check(snap)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: types.DidOpenTextDocumentParams) -> None:
        await open_or_save(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        server.checks.cancel(uri)  # a check of the old text must not publish for the new one
        later(uri)
        doc = server.open_document(uri)
        if doc is not None and server.watcher.buffer_changed(uri, doc.source):  # reloaded from a change on disk
            server.spawn(open_or_save(uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: types.DidSaveTextDocumentParams) -> None:
        await open_or_save(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        server.checks.cancel(uri)
        handle = pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        if server.published.pop(uri, None):
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
