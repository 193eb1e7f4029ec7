"""Optimize: the `geak/optimize` request (cancellable), the `geak.server.optimizeKernel` command (for editors other
than VS Code: the edit goes out as `workspace/applyEdit`), and `geak/candidates` — thin handlers over the state's
`OptimizeManager` (``optimizing``)."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from lsprotocol import types

from ..optimizing import ANNOTATION
from ..requests import command_args, document_uri, invalid, optimize_params
from ..state import ServerState

log = logging.getLogger(__name__)
OPTIMIZE, CANDIDATES = "geak/optimize", "geak/candidates"
SERVER_OPTIMIZE, SERVER_CANDIDATES = "geak.server.optimizeKernel", "geak.server.showCandidates"


def register(state: ServerState) -> None:
    server, manager = state.server, state.optimizer

    @server.feature(OPTIMIZE)
    async def optimize(params: Any) -> dict[str, Any]:
        uri, kernel, version, token = optimize_params(params)
        answer, _ = await manager.optimize(uri, kernel, version, token)
        return answer

    @server.feature(CANDIDATES)
    def candidates(params: Any) -> list[dict[str, Any]]:
        record = manager.last_record(document_uri(params, CANDIDATES))
        return record.candidates if record is not None else []

    @server.command(SERVER_OPTIMIZE)
    async def optimize_command(*args) -> dict[str, Any]:
        uri, kernel, version = command_args(args, SERVER_OPTIMIZE, 3)
        bad_kernel = kernel is not None and not isinstance(kernel, str)
        if bad_kernel or (version is not None and not isinstance(version, int)):
            raise invalid(f"{SERVER_OPTIMIZE}: arguments must be [uri, kernel|null, version|null]")
        answer, edit = await manager.optimize(uri, kernel, version)
        if edit is not None:
            with contextlib.suppress(Exception):
                label = edit.change_annotations[ANNOTATION].label if edit.change_annotations else "GEAK: optimized"
                applied = await server.workspace_apply_edit_async(
                    types.ApplyWorkspaceEditParams(edit=edit, label=label)
                )
                log.info("the client %s the edit", "applied" if applied.applied else "did not apply")
        return answer

    @server.command(SERVER_CANDIDATES)
    def show_candidates(*args) -> list[dict[str, Any]]:
        (uri,) = command_args(args, SERVER_CANDIDATES, 1)
        record = manager.last_record(uri)
        return record.candidates if record is not None else []
