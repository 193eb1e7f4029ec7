"""The documents the server works on: open ones (pygls' workspace) and files read from disk, each content analysed
once (in a thread, cached by content) and handed out as a `Snapshot`; and the open documents whose file changed on
disk while the editor's buffer still holds the old content."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import unquote

from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .analysis import DocumentModel, analyze, content_key

log = logging.getLogger(__name__)
MODEL_CACHE = 64
MAX_DISK_CHARS = 2_000_000


@dataclass
class Snapshot:
    """One content of a document: its text, version (None: read from disk) and what analysis says of it."""

    uri: str
    path: str
    text: str
    version: int | None
    model: DocumentModel


class Documents:
    def __init__(self, server: LanguageServer):
        self.server = server
        self._models: OrderedDict[str, DocumentModel] = OrderedDict()
        self._awaiting: dict[str, str] = {}  # uri -> content key on disk the editor's buffer has not caught up with

    def open_document(self, uri: str) -> TextDocument | None:
        """An open document (never one read from disk on the server's loop)."""
        return self.server.workspace.text_documents.get(unquote(uri))

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

    async def disk_key(self, path: str) -> str | None:
        """The content key of a file on disk (None: unreadable)."""
        try:
            return content_key(await asyncio.to_thread(_read_text, path))
        except (OSError, UnicodeDecodeError):
            return None

    def is_current(self, uri: str, key: str) -> bool:
        doc = self.open_document(uri)
        return doc is not None and content_key(doc.source) == key

    def await_disk_content(self, uri: str, key: str) -> None:
        """The file of an open document now holds the content `key` on disk; its buffer does not yet."""
        self._awaiting[uri] = key

    def caught_up_with_disk(self, uri: str, text: str) -> bool:
        """The editor's buffer changed: True if it now holds the disk content a change on disk brought."""
        key = self._awaiting.get(uri)
        if key is None or key != content_key(text):
            return False
        del self._awaiting[uri]
        return True


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read(MAX_DISK_CHARS + 1)
