"""File watching with watchdog: Triton files changed on disk outside the editor (git checkout, a generated file)
are re-checked and their hints refreshed; the configuration (`geak.yaml`, `pyproject.toml`) is reloaded.

Watched: the workspace root, and recursively each of its folders except virtual environments, caches and
hidden folders (so a `.venv` with torch in it costs no watches). Events arrive on watchdog's thread and are
handed to the server's loop, debounced per file. A changed file that is open is re-checked once the editor's
buffer holds the new disk content (right away if it already does, else when the editor's change arrives), unless
that content is checked or being checked already (the editor saved it); a file that is not open is re-checked if
GEAK has published diagnostics for it.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from pygls.uris import from_fs_path
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..settings import CONFIG_FILES
from ..state import ServerState

log = logging.getLogger(__name__)
DEBOUNCE_S = 0.3
IGNORED = {"node_modules", "__pycache__", "geak_runs", "venv", "env", "build", "dist", "site-packages"}
CONFIGS = {*CONFIG_FILES, "pyproject.toml"}


def ignored_dir(name: str) -> bool:
    return name.startswith(".") or name in IGNORED or name.endswith(".egg-info")


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in ("modified", "created", "moved", "closed", "deleted"):
            return
        path = event.dest_path if event.event_type == "moved" else event.src_path
        self.watcher.notify(path if isinstance(path, str) else path.decode(errors="replace"))


class Watcher:
    def __init__(self, state: ServerState):
        self.state = state
        self.root: Path | None = None
        self._observer: Observer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def start(self) -> None:
        root = self.state.server.workspace.root_path
        if not root or not Path(root).is_dir():
            return
        self.root = Path(root).resolve()
        self._loop = asyncio.get_running_loop()
        observer = Observer()
        handler = _Handler(self)
        try:
            observer.schedule(handler, str(self.root), recursive=False)
            for child in sorted(self.root.iterdir()):
                if child.is_dir() and not ignored_dir(child.name):
                    observer.schedule(handler, str(child), recursive=True)
            observer.daemon = True
            observer.start()
        except OSError as e:  # e.g. out of inotify watches: the editor's own events still work
            log.warning("file watching is off: %s", e)
            return
        self._observer = observer
        log.info("watching %s", self.root)

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)

    def notify(self, path: str) -> None:
        """Called on watchdog's thread."""
        name = Path(path).name
        if not (name.endswith(".py") or name in CONFIGS) or any(ignored_dir(p) for p in Path(path).parts[:-1]):
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._debounce, path)

    def _debounce(self, path: str) -> None:
        timer = self._timers.pop(path, None)
        if timer is not None:
            timer.cancel()
        assert self._loop is not None
        self._timers[path] = self._loop.call_later(DEBOUNCE_S, lambda: self.state.spawn(self._changed(path)))

    async def _changed(self, path: str) -> None:
        self._timers.pop(path, None)
        state, documents = self.state, self.state.documents
        p = Path(path)
        await state.file_saved(path)  # a test or configuration file of an open module: the module is checked again
        if p.name in CONFIGS and self.root is not None and p.parent.resolve() == self.root:
            log.info("%s changed: reloading the configuration", p.name)
            await state.apply_settings(None)
            return
        if not p.name.endswith(".py"):
            return
        uri = from_fs_path(str(p))
        if uri is None:
            return
        doc = documents.open_document(uri)
        if doc is None and uri not in state.publisher.published:
            return
        snap = await documents.snapshot(uri, disk=doc is None)
        if snap is None:
            return
        if doc is not None:
            disk = await documents.disk_key(str(p))
            if disk is None:
                return
            if disk != snap.model.key:
                documents.await_disk_content(uri, disk)  # the editor reloads it soon (or the buffer has unsaved edits)
                return
            if state.checks.covers(uri, snap.text):  # the editor saved it: its save asked for the check
                return
        log.info("%s changed on disk: checking it again", p.name)
        state.request_check(snap, debounce=False)
