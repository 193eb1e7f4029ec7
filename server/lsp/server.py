"""The GEAK language server's composition root: it makes the pygls server and the `ServerState` (state.py) that the
features work on, registers each feature's handlers (``features``: diagnostics, inlay_hints, hover, code_actions,
optimize), starts the file watcher (``features.watching``), and handles the lifecycle: initialize, initialized
(settings, watching, the warm evaluator), configuration changes, shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .features import code_actions, diagnostics, hover, inlay_hints, optimize
from .features.watching import Watcher
from .state import ServerState

VERSION = "0.1.0"
FEATURES = (diagnostics, inlay_hints, hover, code_actions, optimize)


class GeakServer(LanguageServer):
    """pygls' server with GEAK's state and file watcher, which end with its connection."""

    def __init__(self, *, debounce_s: float | None = None):
        super().__init__("geak", VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.state = ServerState(self, debounce_s=debounce_s)
        self.watcher = Watcher(self.state)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.loop_thread: int | None = None

    def shutdown(self) -> None:
        """The connection ended: stop the watcher and the engine (its workers end with it)."""
        super().shutdown()
        self.watcher.stop()
        self.state.end()


class LogForwarder(logging.Handler):
    """GEAK's log records (INFO and up) as `window/logMessage`, sent from the server's loop whatever the thread."""

    LEVELS = (
        (logging.ERROR, types.MessageType.Error),
        (logging.WARNING, types.MessageType.Warning),
        (logging.INFO, types.MessageType.Info),
    )

    def __init__(self, server: GeakServer):
        super().__init__(logging.INFO)
        self.server = server

    def emit(self, record: logging.LogRecord) -> None:
        loop = self.server.loop
        if loop is None or loop.is_closed():
            return
        kind = next((v for k, v in self.LEVELS if record.levelno >= k), types.MessageType.Log)
        try:
            params = types.LogMessageParams(kind, self.format(record))
            if threading.get_ident() == self.server.loop_thread:
                self.server.window_log_message(params)
            else:
                loop.call_soon_threadsafe(self.server.window_log_message, params)
        except Exception:  # logging must never raise
            self.handleError(record)


def build_server(*, debounce_s: float | None = None) -> GeakServer:
    server = GeakServer(debounce_s=debounce_s)
    state = server.state

    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        server.loop_thread = threading.get_ident()
        server.loop = asyncio.get_running_loop()
        state.initial_options(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        if state.pending_problem:
            state.show(f"{state.pending_problem} (using the defaults)")
        caps = server.client_capabilities.workspace
        if caps and caps.did_change_configuration and caps.did_change_configuration.dynamic_registration:
            with contextlib.suppress(Exception):
                await server.client_register_capability_async(
                    types.RegistrationParams(
                        registrations=[
                            types.Registration(id="geak-configuration", method=types.WORKSPACE_DID_CHANGE_CONFIGURATION)
                        ]
                    )
                )
        try:
            await state.pull_settings()
        finally:
            state.ready.set()
        server.watcher.start()
        state.spawn(state.warm_up())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get("geak"), dict):
            await state.apply_settings(settings["geak"])
        else:
            await state.pull_settings()
        state.refresh_hints()

    @server.feature(types.SHUTDOWN)
    async def shutdown(params: None) -> None:
        server.watcher.stop()
        await state.close()

    for feature in FEATURES:
        feature.register(state)
    return server
