"""A small LSP client for the scripts (`lsp_bench.py`, `lsp_session_report.py`): pygls' client driving
`python -m geak.server` over stdio, with what an editor provides (configuration, applyEdit, progress, status)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

CAPABILITIES = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(
        configuration=True,
        workspace_edit=types.WorkspaceEditClientCapabilities(
            document_changes=True, change_annotation_support=types.ChangeAnnotationsSupportOptions(groups_on_label=True)
        ),
        inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True),
        did_change_configuration=types.DidChangeConfigurationClientCapabilities(dynamic_registration=False),
    ),
    text_document=types.TextDocumentClientCapabilities(
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
        inlay_hint=types.InlayHintClientCapabilities(),
        code_action=types.CodeActionClientCapabilities(),
    ),
    window=types.WindowClientCapabilities(work_done_progress=True),
)


class Client(LanguageClient):
    def __init__(self, settings: dict[str, Any]):
        super().__init__("geak-script", "1")
        self.settings = settings
        self.published: list[tuple[float, types.PublishDiagnosticsParams]] = []
        self.progress: list[tuple[float, Any]] = []
        self.statuses: list[Any] = []
        self.logs: list[str] = []

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.published.append((time.perf_counter(), params))

        @self.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params: types.ConfigurationParams) -> list[Any]:
            return [self.settings for _ in params.items]

        @self.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create(params: types.WorkDoneProgressCreateParams) -> None:
            return None

        @self.feature(types.PROGRESS)
        def progress(params: types.ProgressParams) -> None:
            self.progress.append((time.perf_counter(), params.value))

        @self.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def refresh(params: None) -> None:
            return None

        @self.feature(types.WINDOW_LOG_MESSAGE)
        def log(params: types.LogMessageParams) -> None:
            self.logs.append(params.message)

        @self.feature(types.WINDOW_SHOW_MESSAGE)
        def show(params: types.ShowMessageParams) -> None:
            self.logs.append(f"[shown] {params.message}")

        @self.feature("geak/status")
        def status(params: Any) -> None:
            self.statuses.append(params)

    async def begin(self, root: Path) -> None:
        await self.start_io(sys.executable, "-m", "geak.server")
        await self.initialize_async(
            types.InitializeParams(
                capabilities=CAPABILITIES,
                root_uri=root.as_uri(),
                initialization_options={"trusted": True, "settings": self.settings},
            )
        )
        self.initialized(types.InitializedParams())

    async def end(self) -> None:
        await self.shutdown_async(None)
        self.exit(None)
        await self.stop()

    def open(self, path: Path, version: int = 1) -> str:
        uri = path.as_uri()
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", version, path.read_text()))
        )
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                [types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def save(self, uri: str) -> None:
        self.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))

    async def idle(self, timeout: float = 600) -> None:
        """Until the server says it is not busy (after having been busy or not)."""
        await asyncio.sleep(0.3)
        await until(lambda: self.statuses and not self.statuses[-1].busy, timeout, "an idle server")

    async def evaluator_ready(self, timeout: float = 300) -> Any:
        """The first status that names the evaluator's backend; RuntimeError at once where the server says its
        evaluator could not start (a worker that fails to start would otherwise be waited for until `timeout`)."""

        def ready() -> Any:
            failed = [line for line in self.logs if "could not start its evaluator" in line]
            if failed:
                raise RuntimeError(failed[0])
            return [s for s in self.statuses if s.backend]

        return (await until(ready, timeout, "the evaluator"))[-1]

    async def hints(self, uri: str) -> list[types.InlayHint]:
        return (
            await self.text_document_inlay_hint_async(
                types.InlayHintParams(
                    types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(10_000, 0))
                )
            )
            or []
        )

    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        return await self.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))
        )


async def until(condition: Callable[[], Any], timeout: float = 600, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)
    return value


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """Apply LSP text edits (JSON) to `text` (positions in UTF-16 units; ASCII corpus files)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: dict[str, int]) -> int:
        line = position["line"]
        return starts[min(line, len(lines))] + (position["character"] if line < len(lines) else 0)

    for edit in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        text = text[: offset(edit["range"]["start"])] + edit["newText"] + text[offset(edit["range"]["end"]) :]
    return text
