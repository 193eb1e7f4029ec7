"""The language server's state, which every feature works on: the documents and their analyses (``documents``), the
editor settings and the agent configuration, workspace trust, the engine thread, and the managers that own the
work — `CheckManager` (checks and timings on the warm evaluator), `ModuleTargets` (the repository tests of modules
without a test of their own), `OptimizeManager` (optimize sessions) and `DiagnosticsPublisher` (what the client
shows). Feature modules take a `ServerState`; it knows none of them
(``server`` wires them together).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from geak.agent.config import AgentConfig, ConfigError, eval_options
from geak.evaluator import Evaluator

from .analysis import content_key
from .base_compare import BaseReport
from .checks import CheckHooks, CheckManager, FileReport
from .documents import Documents, Snapshot
from .engine import Engine
from .modules import ModuleLimits, ModuleTargets
from .optimizing import OptimizeHooks, OptimizeManager
from .publishing import DiagnosticsPublisher
from .settings import Settings, SettingsError, agent_config, parse_settings, read_workspace_file
from .trust import WorkspaceTrust

log = logging.getLogger(__name__)
STATUS = "geak/status"
PRELOAD = ("torch", "scipy.stats")  # output comparison and bootstrap intervals (run on the engine thread)


class ServerState:
    def __init__(self, server: LanguageServer, *, debounce_s: float | None = None):
        self.server = server
        self.documents = Documents(server)
        self.engine = Engine()
        self.settings = Settings()
        self.config: AgentConfig | None = None
        self.client_commands = False
        self.trust = WorkspaceTrust(server, None)
        self.ready = asyncio.Event()  # set once the client's settings have been read (after `initialized`)
        hooks = CheckHooks(self.trust.ensure, self._on_checked, self._on_timed, self.send_status)
        options = eval_options(AgentConfig(), "auto")
        options.spares = 1
        self.checks = CheckManager(self.engine, hooks, options, **({"debounce_s": debounce_s} if debounce_s else {}))
        self.checks.repositories.limits = module_limits(self.settings)
        self.modules = ModuleTargets()
        optimize_hooks = OptimizeHooks(
            self.ready.wait, self.trust.ensure, lambda: self.config, self.send_status, self.refresh_hints
        )
        self.optimizer = OptimizeManager(server, self.documents, self.checks, self.engine, optimize_hooks, self.modules)
        self.publisher = DiagnosticsPublisher(server, self.documents, self.checks, self.compared, self.modules)
        self.pending_problem: str | None = None  # an invalid initializationOptions.settings, said once initialized
        self._closed = False
        self._background: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run `coro` in the background, keeping a reference until it ends; its failure is logged."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work failed", exc_info=task.exception())

    # ------------------------------------------------------------------------------------------ checks

    def request_check(self, snap: Snapshot, *, debounce: bool = True, force: bool = False) -> asyncio.Task | None:
        """Check (and time, if enabled) this content, unless checks on save are off (`force`: check anyway). A module
        of a repository is checked by the tests found for it (looked for again first where forgotten)."""
        if not snap.model.triton or not (self.settings.check_on_save or force):
            return None
        module = None
        if not snap.model.has_tests:
            found = self.modules.known(snap.path)
            if found is None:
                self.spawn(self._find_and_check(snap, debounce, force))
                return None
            if found.target is None:
                return None
            module = found.target
        settings = self.settings
        return self.checks.request(
            snap.uri, snap.path, snap.text, timing=settings.time_on_save, base=settings.base, debounce=debounce,
            module=module,
        )  # fmt: skip

    async def _find_and_check(self, snap: Snapshot, debounce: bool, force: bool) -> None:
        await self.modules.find(snap.path)
        await self.publisher.publish(snap.uri, disk=snap.version is None)  # what was found changes what is shown
        if snap.version is None or self.documents.is_current(snap.uri, snap.model.key):
            self.request_check(snap, debounce=debounce, force=force)

    async def file_saved(self, path: str) -> None:
        """A file was saved or changed on disk: the open modules whose tests or configuration it is are checked
        again (their results are forgotten: the same module text may now pass or fail)."""
        for module in self.modules.changed(path):
            uri = from_fs_path(module)
            snap = await self.documents.snapshot(uri) if uri else None
            if snap is None:
                continue
            log.info("%s changed: checking %s again", Path(path).name, Path(module).name)
            await self.modules.find(module)
            self.checks.cancel(uri)  # a check in flight ran the old tests
            self.checks.cache.drop(lambda report, key=snap.model.key: report.key == key)
            self.request_check(snap, debounce=False)

    def compared(self, report: FileReport | None) -> BaseReport | None:
        """The report's comparison with the base the settings name now (none where comparing is off)."""
        base = report.base if report is not None else None
        return base if base is not None and self.settings.base and base.rev == self.settings.base else None

    def _on_checked(self, uri: str, report: FileReport) -> None:
        doc = self.documents.open_document(uri)
        if doc is None:
            if uri in self.publisher.published:
                self.spawn(self.publisher.publish(uri, disk=True))
            return
        if content_key(doc.source) != report.key:
            log.info("dropped a check result for an older version of %s", uri)
            return
        self.spawn(self.publisher.publish(uri))

    def _on_timed(self, uri: str, report: FileReport) -> None:
        self.refresh_hints()

    # ------------------------------------------------------------------------------------------ client

    def send_status(self) -> None:
        runtime = self.checks.known_runtime
        busy = self.checks.busy() or self.optimizer.busy()
        activity = self.checks.activity or (self.optimizer.activity if self.optimizer.busy() else None)
        compared = self.checks.bases.last if self.settings.base else None
        self.server.protocol.notify(
            STATUS,
            {
                "backend": runtime.get("backend"),
                "device": runtime.get("device"),
                "busy": busy,
                "activity": activity,
                "base": f"{compared[0]}: {compared[1].said}" if compared else None,
                "baseVerdict": _verdict(*compared) if compared else None,
            },
        )

    def refresh_hints(self) -> None:
        caps = self.server.client_capabilities.workspace
        if caps and caps.inlay_hint and caps.inlay_hint.refresh_support:
            self.spawn(self._refresh_hints())

    async def _refresh_hints(self) -> None:
        try:
            await self.server.workspace_inlay_hint_refresh_async(None)
        except Exception as e:
            log.info("inlay hint refresh failed: %s", e)

    def show(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        self.server.window_show_message(types.ShowMessageParams(kind, message))
        self.server.window_log_message(types.LogMessageParams(kind, message))

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
                self.pending_problem = str(e)

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
            base_changed = settings.base != self.settings.base
            self.settings = settings
            if base_changed and self.ready.is_set():
                self.spawn(self._compare_open_documents())
        await self.checks.set_module_limits(module_limits(self.settings))
        root_path = self.server.workspace.root_path
        root = Path(root_path) if root_path else None
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

    async def _compare_open_documents(self) -> None:
        """Another base (or none): what is shown of the open documents changes at once, and their cached checks are
        compared with the new base (no check runs again)."""
        self.checks.bases.last = None
        self.send_status()
        for uri in list(self.server.workspace.text_documents):
            await self.publisher.publish(uri)
            snap = await self.documents.snapshot(uri)
            if snap is not None and self.checks.cache.get(snap.model.key) is not None:
                self.request_check(snap, debounce=False)
        self.refresh_hints()

    async def pull_settings(self) -> None:
        caps = self.server.client_capabilities.workspace
        if not (caps and caps.configuration):
            await self.apply_settings(None)
            return
        try:
            values = await self.server.workspace_configuration_async(
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
        """The client asked to shut down: stop optimizing and close the evaluator."""
        if self._closed:
            return
        self._closed = True
        await self.optimizer.cancel_all()
        with contextlib.suppress(Exception):
            await self.checks.aclose()

    def end(self) -> None:
        """The connection ended: stop the engine (closing the evaluator, unless `close` did; its workers end)."""
        main = [self.checks._evaluator] if self.checks._evaluator is not None else []
        evaluators = [*main, *self.checks.repositories.open()] if not self._closed else []
        self.engine.close(_closed_all(evaluators) if evaluators else None)


def module_limits(settings: Settings) -> ModuleLimits:
    return ModuleLimits(settings.module_budget_s, settings.module_cases_per_test)


async def _closed_all(evaluators: list[Evaluator]) -> None:
    for evaluator in evaluators:
        await evaluator.aclose()


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as e:
            log.info("cannot preload %s: %s", name, e)


def _verdict(name: str, compared: BaseReport) -> dict[str, str]:
    """`geak/status`'s `baseVerdict`: the status bar's `add.py vs HEAD: outputs differ`, in parts."""
    return {"file": name, "rev": compared.rev, "verdict": compared.verdict}
