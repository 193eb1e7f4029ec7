"""Code actions: "GEAK: Optimize kernel `<name>`" with the cursor in a kernel, "GEAK: Optimize all kernels in file"
anywhere in a Triton file (kind refactor.rewrite). Their command is the client's `geak.optimizeKernel` when the
client handles it (initializationOptions.clientCommands), else the server's `geak.server.optimizeKernel`."""

from __future__ import annotations

from lsprotocol import types

from ..positions import Positions
from ..state import ServerState

CLIENT_COMMAND = "geak.optimizeKernel"
SERVER_COMMAND = "geak.server.optimizeKernel"
KIND = types.CodeActionKind.RefactorRewrite


def actions_for(state: ServerState, uri: str, text: str, version: int | None, line: int) -> list[types.CodeAction]:
    model = state.documents.cached_model(text)
    if model is None or not model.triton or not model.kernels:
        return []
    command = CLIENT_COMMAND if state.client_commands else SERVER_COMMAND
    actions = []
    kernel = model.kernel_at(line)
    if kernel is not None:
        actions.append(
            types.CodeAction(
                title=f"GEAK: Optimize kernel `{kernel.name}`",
                kind=KIND,
                command=types.Command(
                    title=f"Optimize {kernel.name}", command=command, arguments=[uri, kernel.name, version]
                ),
            )
        )
    actions.append(
        types.CodeAction(
            title="GEAK: Optimize all kernels in file",
            kind=KIND,
            command=types.Command(title="Optimize all kernels", command=command, arguments=[uri, None, version]),
        )
    )
    return actions


def register(state: ServerState) -> None:
    documents = state.documents

    @state.server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[KIND], resolve_provider=False),
    )
    async def code_actions(params: types.CodeActionParams) -> list[types.CodeAction] | None:
        only = params.context.only
        if only and not any(k == KIND or KIND.startswith(f"{k}.") for k in only):
            return None
        uri = params.text_document.uri
        doc = documents.open_document(uri)
        if doc is None:
            return None
        text, version = doc.source, doc.version
        if documents.cached_model(text) is None:
            await documents.model_of(text, documents.path_of(uri))
        line = Positions(text).to_line(params.range.start)
        return actions_for(state, uri, text, version, line) or None
