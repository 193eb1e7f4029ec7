"""A real LSP client (pytest-lsp) driving the GEAK server in a subprocess, with a workspace folder, plus the
handlers a real editor has (applyEdit, inlay-hint refresh, showMessageRequest, registerCapability)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

HARNESS = Path(__file__).parent / "lsp_harness.py"
FIXTURES = Path(__file__).parent / "fixtures"
CPU = {"device": "interpreter"}  # checks run in Triton's interpreter even on a GPU machine (timing is scripted)


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # every publishDiagnostics, in order (with its version)

    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)
        client.diagnostics[params.uri] = params.diagnostics

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})
    client.applied_edits = []
    client.hint_refreshes = 0
    client.trust_questions = []
    client.trust_answer = None
    client.statuses = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        client.applied_edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def refresh(params: None) -> None:
        client.hint_refreshes += 1

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def ask(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        client.trust_questions.append(params)
        return types.MessageActionItem(client.trust_answer) if client.trust_answer else None

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        return None

    @client.feature("geak/status")
    def status(params: Any) -> None:
        client.statuses.append(params)

    return client


async def start(
    root: Path,
    *,
    trusted: bool | None = True,
    settings: dict | None = None,
    scripted_gpu: bool = True,
    client_commands: bool = False,
) -> LanguageClient:
    env = {**os.environ, "XDG_CACHE_HOME": str(root / ".cache")}
    command = [sys.executable, str(HARNESS), *(["--scripted-gpu"] if scripted_gpu else [])]
    client = await ClientServerConfig(command, client_factory=make_client, server_env=env).start()
    settings = {**CPU, **(settings or {})}
    options: dict[str, Any] = {"clientCommands": client_commands, "settings": settings}
    if trusted is not None:
        options["trusted"] = trusted
    client.set_configuration(settings, section="geak")
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )
    return client


def configure(client: LanguageClient, **settings: Any) -> None:
    """New editor settings (on the interpreter, as every test runs), announced as a configuration change."""
    client.set_configuration({**CPU, **settings}, section="geak")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def stop(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


async def until(condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll `condition` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text or path.read_text())
        )
    )
    return uri


def replace_all(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri=uri)))


def messages(diagnostics) -> list[str]:
    return [d.message for d in diagnostics or []]
