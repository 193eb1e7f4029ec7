"""The GEAK language server: wiring of the feature modules around two long-lived managers.

`CheckManager` (checks.py) owns the warm evaluator and schedules checks and timings; `OptimizeManager`
(optimize_feature.py) runs optimize sessions. Both run their work on the engine thread (engine.py), so the
server's loop only answers requests. Feature modules (diagnostics, inlay_hints, hover, code_actions,
optimize_feature, watching) register thin handlers over them.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from geak.agent.config import AgentConfig, ConfigError
from geak.agent.session import eval_options

from . import code_actions, diagnostics, hover, inlay_hints, optimize_feature, watching
from .analysis import DocumentModel, analyze, content_key
from .checks import CheckHooks, CheckManager, FileReport
from .engine import Engine
from .settings import Settings, SettingsError, agent_config, parse_settings, read_workspace_file
from .trust import WorkspaceTrust

log = logging.getLogger(__name__)
VERSION = "0.1.0"
STATUS = "geak/status"
MODEL_CACHE = 64
PRELOAD = ("torch", "scipy.stats")  # output comparison and bootstrap intervals (run on the engine thread)


@dataclass
class Snapshot:
    """One content of a document: its text, version (None: read from disk) and what analysis says of it."""

    uri: str
    path: str
    text: str
    version: int | None
    model: DocumentModel


class GeakServer(LanguageServer):
    def __init__(self, *, debounce_s: float | None = None):
        super().__init__("geak", VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.engine = Engine()
        self.settings = Settings()
        self.config: AgentConfig | None = None
        self.client_commands = False
        self.trust = WorkspaceTrust(self, None)
        hooks = CheckHooks(self.trust.ensure, self._on_checked, self._on_timed, self.send_status)
        options = eval_options(AgentConfig(), "auto")
        options.spares = 1
        self.checks = CheckManager(self.engine, hooks, options, **({"debounce_s": debounce_s} if debounce_s else {}))
        self.optimizer = optimize_feature.OptimizeManager(self)
        self.watcher = watching.Watcher(self)
        self.ready = asyncio.Event()  # set once the client's settings have been read (after `initialized`)
        self.published: dict[str, bool] = {}  # uris with GEAK diagnostics on the client
        self._pending_problem: str | None = None  # an invalid initializationOptions.settings, said once initialized
        self._models: OrderedDict[str, DocumentModel] = OrderedDict()
        self._loop_thread: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._background: set[asyncio.Task] = set()

    def spawn(self, coro) -> asyncio.Task:
        """Run `coro` in the background, keeping a reference until it ends; its failure is logged."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work failed", exc_info=task.exception())

    # ------------------------------------------------------------------------------------------ documents

    def open_document(self, uri: str) -> TextDocument | None:
        """An open document (never one read from disk on the server's loop)."""
        return self.workspace.text_documents.get(unquote(uri))

    @staticmethod
    def path_of(uri: str) -> str:
        return to_fs_path(uri) or uri

    def cached_model(self, text: str) -> DocumentModel | None:
        model = self._models.get(content_key(text))
        if model is not None:
            self._models.move_to_end(model.key)
        return model

    async def model_of(self, text: str, path: str) -> DocumentModel:
        """The analysis of a text (in a thread; cached by content)."""
        cached = self.cached_model(text)
        if cached is not None:
            return cached
        model = await asyncio.to_thread(analyze, text, path)
        self._models[model.key] = model
        while len(self._models) > MODEL_CACHE:
            self._models.popitem(last=False)
        return model

    async def snapshot(self, uri: str, *, disk: bool = False) -> Snapshot | None:
        """The current content of an open document, or (with `disk`) of a file that is not open. None: neither."""
        path = self.path_of(uri)
        doc = self.open_document(uri)
        if doc is not None:
            text, version = doc.source, doc.version
        elif disk:
            try:
                text = await asyncio.to_thread(_read_text, path)
            except (OSError, UnicodeDecodeError) as e:
                log.info("cannot read %s: %s", path, e)
                return None
            version = None
        else:
            return None
        return Snapshot(uri, path, text, version, await self.model_of(text, path))

    async def snapshot_disk_key(self, path: str) -> str | None:
        """The content key of a file on disk (None: unreadable)."""
        try:
            return content_key(await asyncio.to_thread(_read_text, path))
        except (OSError, UnicodeDecodeError):
            return None

    def is_current(self, uri: str, key: str) -> bool:
        doc = self.open_document(uri)
        return doc is not None and content_key(doc.source) == key

    def report_for(self, model: DocumentModel) -> FileReport | None:
        return self.checks.cache.get(model.key)

    # ------------------------------------------------------------------------------------------ checks

    def request_check(self, snap: Snapshot, *, debounce: bool = True, force: bool = False) -> asyncio.Task | None:
        """Check (and time, if enabled) this content, unless checks on save are off (`force`: check anyway)."""
        if not snap.model.triton or not snap.model.has_tests:
            return None
        if not (self.settings.check_on_save or force):
            return None
        return self.checks.request(snap.uri, snap.path, snap.text, timing=self.settings.time_on_save, debounce=debounce)

    def _on_checked(self, uri: str, report: FileReport) -> None:
        doc = self.open_document(uri)
        if doc is None:
            if uri in self.published:
                self.spawn(diagnostics.publish(self, uri, disk=True))
            return
        if content_key(doc.source) != report.key:
            log.info("dropped a check result for an older version of %s", uri)
            return
        self.spawn(diagnostics.publish(self, uri))

    def _on_timed(self, uri: str, report: FileReport) -> None:
        self.refresh_hints()

    # ------------------------------------------------------------------------------------------ client

    def send_status(self) -> None:
        runtime = self.checks.known_runtime
        busy = self.checks.busy() or self.optimizer.busy()
        activity = self.checks.activity or (self.optimizer.activity if self.optimizer.busy() else None)
        self.protocol.notify(
            STATUS,
            {"backend": runtime.get("backend"), "device": runtime.get("device"), "busy": busy, "activity": activity},
        )

    def refresh_hints(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.inlay_hint and caps.inlay_hint.refresh_support:
            self.spawn(self._refresh_hints())

    async def _refresh_hints(self) -> None:
        try:
            await self.workspace_inlay_hint_refresh_async(None)
        except Exception as e:
            log.info("inlay hint refresh failed: %s", e)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        self.window_show_message(types.ShowMessageParams(kind, message))
        self.window_log_message(types.LogMessageParams(kind, message))

    # ------------------------------------------------------------------------------------------ settings

    def initial_options(self, options: Any) -> None:
        if not isinstance(options, dict):
            return
        trusted = options.get("trusted")
        self.trust.trusted = trusted if isinstance(trusted, bool) else None
        self.client_commands = options.get("clientCommands") is True
        if "settings" in options:
            try:
                self.settings, notes = parse_settings(options["settings"])
                for note in notes:
                    log.warning(note)
            except SettingsError as e:
                self._pending_problem = str(e)

    async def apply_settings(self, raw: Any | None) -> None:
        """Validate and apply editor settings (None: keep the editor settings, re-read the workspace file)."""
        if raw is not None:
            try:
                settings, notes = parse_settings(raw)
            except SettingsError as e:
                self.show(f"{e} (keeping the previous settings)")
                return
            for note in notes:
                log.warning(note)
            self.settings = settings
        root = Path(self.workspace.root_path) if self.workspace.root_path else None
        try:
            data, source = await asyncio.to_thread(read_workspace_file, root)
            config = agent_config(self.settings, data, source, root)
        except ConfigError as e:
            self.show(f"GEAK configuration: {e}")
            return
        self.config = config
        options = eval_options(config, self.settings.device)
        options.spares = 1
        if options != self.checks.options:
            await self.checks.reconfigure(options)
            if self.ready.is_set():  # a later change of device: start the new evaluator now
                self.spawn(self.warm_up())
        shown = self.settings.model_dump(by_alias=True, exclude={"base_url"})  # a URL may carry credentials
        log.info("settings: %s%s", shown, " (baseUrl set)" if self.settings.base_url else "")

    async def pull_settings(self) -> None:
        caps = self.client_capabilities.workspace
        if not (caps and caps.configuration):
            await self.apply_settings(None)
            return
        try:
            values = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="geak")])
            )
        except Exception as e:
            log.warning("workspace/configuration failed: %s", e)
            values = [None]
        await self.apply_settings(values[0] if values else None)

    async def warm_up(self) -> None:
        """Start a warm worker and tell the client the backend (no workspace code runs). The libraries that
        comparisons and intervals need are imported now, so their import never stalls a request later."""
        try:
            await asyncio.to_thread(_preload)
            runtime = await self.checks.runtime()
            log.info("evaluator ready: %s on %s", runtime.get("backend"), runtime.get("device"))
        except Exception as e:
            self.show(f"GEAK could not start its evaluator: {e}")
        self.send_status()

    # ------------------------------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.watcher.stop()
        await self.optimizer.cancel_all()
        with contextlib.suppress(Exception):
            await self.checks.aclose()

    def shutdown(self) -> None:
        """The connection ended: stop the watcher and the engine (its workers end with it)."""
        super().shutdown()
        self.watcher.stop()
        evaluator = self.checks._evaluator
        self.engine.close(evaluator.aclose() if evaluator is not None and not self._closed else None)


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
            if threading.get_ident() == self.server._loop_thread:
                self.server.window_log_message(params)
            else:
                loop.call_soon_threadsafe(self.server.window_log_message, params)
        except Exception:  # logging must never raise
            self.handleError(record)


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as e:
            log.info("cannot preload %s: %s", name, e)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read(diagnostics.MAX_DISK_CHARS + 1)


def build_server(*, debounce_s: float | None = None) -> GeakServer:
    server = GeakServer(debounce_s=debounce_s)

    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        server._loop_thread = threading.get_ident()
        server.loop = asyncio.get_running_loop()
        server.initial_options(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        if server._pending_problem:
            server.show(f"{server._pending_problem} (using the defaults)")
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
            await server.pull_settings()
        finally:
            server.ready.set()
        server.watcher.start()
        server.spawn(server.warm_up())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and isinstance(settings.get("geak"), dict):
            await server.apply_settings(settings["geak"])
        else:
            await server.pull_settings()
        server.refresh_hints()

    @server.feature(types.SHUTDOWN)
    async def shutdown(params: None) -> None:
        await server.close()

    for module in (diagnostics, inlay_hints, hover, code_actions, optimize_feature):
        module.register(server)
    return server
