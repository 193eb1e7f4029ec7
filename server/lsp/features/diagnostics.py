"""Diagnostics: problems visible in the source at once (on open and edit), the check's findings after a save, and
`geak/check` — thin handlers over the state's `CheckManager` and `DiagnosticsPublisher` (``publishing``: what is
published is always a function of the document's current content). A module of a repository has its tests looked
for when it opens (``modules``); saving one of its test files checks it again."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from ..analysis import TEST_HINT
from ..requests import command_args, document_uri
from ..state import ServerState

CHECK, CHECK_COMMAND = "geak/check", "geak.server.checkFile"
EDIT_DEBOUNCE_S = 0.2


def check_summary(ok: bool, stage: str, message: str, backend: str | None = None) -> dict:
    return {"ok": ok, "stage": stage, "message": message, "backend": backend}


async def check_now(state: ServerState, uri: str) -> dict:
    """`geak/check`: check the document now (even with checks on save off), publish, and summarize."""
    snap = await state.documents.snapshot(uri, disk=True)
    if snap is None:
        return check_summary(False, "parse", f"cannot read {uri}")
    name = snap.path.rsplit("/", 1)[-1]
    if not snap.model.triton:
        syntax = [p.message for p in snap.model.problems if p.code == "syntax"]
        return check_summary(False, "parse", syntax[0] if syntax else f"{name} is not a Triton file")
    module = None
    if not snap.model.has_tests:
        found = await state.modules.find(snap.path)
        if found.target is None:
            return check_summary(False, "parse", f"{name}: {TEST_HINT} ({found.problem})")
        module = found.target
    await state.ready.wait()
    if not await state.trust.ensure():
        return check_summary(False, "untrusted", "the workspace is not trusted: GEAK runs no code from it")
    if snap.version is None:
        state.publisher.published[uri] = True  # not open: diagnostics for the file on disk
    checked: asyncio.Future = asyncio.get_running_loop().create_future()
    settings = state.settings
    state.checks.request(
        uri, snap.path, snap.text, timing=settings.time_on_save, base=settings.base, debounce=False, checked=checked,
        module=module,
    )  # fmt: skip
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


def register(state: ServerState) -> None:
    server, documents, publisher = state.server, state.documents, state.publisher

    @server.feature(CHECK)
    async def check_request(params: Any) -> dict:
        return await check_now(state, document_uri(params, CHECK))

    @server.command(CHECK_COMMAND)
    async def check_command(*args) -> dict:
        (uri,) = command_args(args, CHECK_COMMAND, 1)
        return await check_now(state, uri)

    pending: dict[str, asyncio.TimerHandle] = {}

    def later(uri: str) -> None:
        handle = pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        loop = asyncio.get_running_loop()
        pending[uri] = loop.call_later(EDIT_DEBOUNCE_S, lambda: state.spawn(publisher.publish(uri)))

    async def open_or_save(uri: str, *, opened: bool = False) -> None:
        snap = await documents.snapshot(uri)
        if snap is None:
            return
        if snap.model.triton and not snap.model.has_tests:  # a module: its repository's tests (again when opened)
            await state.modules.find(snap.path, again=opened)
        await publisher.publish(uri)
        await state.ready.wait()  # the client's settings decide whether to check
        snap = await documents.snapshot(uri)
        if snap is not None:
            state.request_check(snap)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(params: types.DidOpenTextDocumentParams) -> None:
        await open_or_save(params.text_document.uri, opened=True)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        state.checks.cancel(uri)  # a check of the old text must not publish for the new one
        later(uri)
        doc = documents.open_document(uri)
        if doc is not None and documents.caught_up_with_disk(uri, doc.source):  # reloaded from a change on disk
            state.spawn(open_or_save(uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        await state.file_saved(documents.path_of(uri))  # a test file of an open module: the module is checked again
        await open_or_save(uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        state.checks.cancel(uri)
        handle = pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        state.spawn(publisher.closed(uri))
