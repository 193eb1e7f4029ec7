"""Workspace trust: nothing from the workspace runs until trusted; a client that says nothing is asked once."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from lsp_client import FIXTURES, open_file, start, stop, until
from lsprotocol import types

pytestmark = pytest.mark.asyncio


async def check(client, uri):
    return await client.protocol.send_request_async("geak/check", {"textDocument": {"uri": uri}})


async def test_untrusted_runs_nothing_and_asking_once(tmp_path):
    shutil.copy(FIXTURES / "raising_test.py", tmp_path / "k.py")
    client = await start(tmp_path, trusted=None, scripted_gpu=False)
    try:
        client.trust_answer = "Not now"
        uri = open_file(client, tmp_path / "k.py")
        await until(lambda: uri in client.diagnostics, what="static diagnostics")
        first, second = await asyncio.gather(check(client, uri), check(client, uri))
        assert first.stage == second.stage == "untrusted" and not first.ok
        assert len(client.trust_questions) == 1  # asked once, not per request
        optimize = await client.protocol.send_request_async("geak/optimize", {"textDocument": {"uri": uri}})
        assert optimize.edit is None and "not trusted" in optimize.summary
        assert not [d for d in client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error]
    finally:
        await stop(client)


async def test_trust_granted_when_asked(tmp_path):
    shutil.copy(FIXTURES / "raising_test.py", tmp_path / "k.py")
    client = await start(tmp_path, trusted=None, scripted_gpu=False)
    try:
        client.trust_answer = "Trust and run"
        uri = open_file(client, tmp_path / "k.py")
        result = await check(client, uri)
        assert result.stage == "call" and "unsupported size" in result.message
        assert len(client.trust_questions) == 1
    finally:
        await stop(client)


async def test_explicitly_untrusted_is_never_asked(tmp_path):
    shutil.copy(FIXTURES / "raising_test.py", tmp_path / "k.py")
    client = await start(tmp_path, trusted=False, scripted_gpu=False)
    try:
        uri = open_file(client, tmp_path / "k.py")
        assert (await check(client, uri)).stage == "untrusted"
        assert client.trust_questions == []
    finally:
        await stop(client)
