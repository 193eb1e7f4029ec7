"""Workspace trust: nothing from the workspace runs until the client says it is trusted
(`initializationOptions.trusted`); a client that says nothing is asked once through `window/showMessageRequest`."""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)
TRUST, DECLINE = "Trust and run", "Not now"
QUESTION = (
    "GEAK checks and times Triton files by running their code and embedded tests. Do you trust the code in this "
    "workspace enough to run it?"
)


class WorkspaceTrust:
    def __init__(self, server: LanguageServer, trusted: bool | None):
        self.server = server
        self.trusted = trusted
        self._asking: asyncio.Future[bool] | None = None

    async def ensure(self) -> bool:
        """True when workspace code may run; asks the user the first time if the client said nothing."""
        if self.trusted is not None:
            return self.trusted
        if self._asking is None:
            self._asking = asyncio.ensure_future(self._ask())
        return await asyncio.shield(self._asking)

    async def _ask(self) -> bool:
        try:
            answer = await self.server.window_show_message_request_async(
                types.ShowMessageRequestParams(
                    type=types.MessageType.Warning,
                    message=QUESTION,
                    actions=[types.MessageActionItem(TRUST), types.MessageActionItem(DECLINE)],
                )
            )
        except Exception as e:  # a client without the request, or a broken answer: not trusted
            log.warning("could not ask whether the workspace is trusted: %s", e)
            answer = None
        self.trusted = answer is not None and answer.title == TRUST
        if not self.trusted:
            self.server.window_log_message(
                types.LogMessageParams(
                    types.MessageType.Warning,
                    "GEAK will not run code from this workspace (not trusted): only problems visible in the "
                    "source are shown. Restart the server to be asked again.",
                )
            )
        return self.trusted
