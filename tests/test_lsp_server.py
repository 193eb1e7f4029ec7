"""The language server end to end with a real LSP client (pytest-lsp): diagnostics, stale results, inlay hints,
hover, code actions, geak/check, settings, file watching, and bad input that must not kill the server.

One server for the module (checks run for real in Triton's interpreter; GPU timing is scripted, see
`lsp_harness.py`).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_client import FIXTURES, configure, messages, open_file, replace_all, save, start, stop, until
from lsp_harness import TEARDOWN_MARK
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAST = FIXTURES / "add_native.py"
SLOW_MARK = "# latency: 2.0\ndef add("


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    for name in ("add_native.py", "compile_error.py", "raising_test.py", "no_test.py", "syntax_error.py"):
        shutil.copy(FIXTURES / name, root / name)
    shutil.copy(FIXTURES / "interp" / "inline_asm.py", root / "inline_asm.py")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(workspace):
    client = await start(workspace)
    yield client
    await stop(client)


def diags(client, uri):
    return client.diagnostics.get(uri)


async def test_status_reports_the_backend(client):
    status = await until(lambda: [s for s in client.statuses if s.backend], what="geak/status with a backend")
    assert status[-1].backend == "cuda" and status[-1].device == "scripted GPU"


async def test_static_problems_appear_before_any_check(client, workspace):
    uri = open_file(client, workspace / "no_test.py")
    found = await until(lambda: diags(client, uri), what="diagnostics of no_test.py")
    assert any("no embedded test" in m for m in messages(found))
    no_test = next(d for d in found if "no embedded test" in d.message)
    assert no_test.severity == types.DiagnosticSeverity.Warning
    assert no_test.range.start.line == 7  # the kernel's def line (8, 1-based)


async def test_compile_error_at_the_kernel_line_and_arange_at_once(client, workspace):
    uri = open_file(client, workspace / "compile_error.py")
    static = await until(lambda: diags(client, uri), what="static diagnostics")
    arange = next(d for d in static if d.code == "arange-power-of-two")
    assert arange.range.start.line == 9 and arange.severity == types.DiagnosticSeverity.Error
    found = await until(lambda: [d for d in diags(client, uri) or [] if d.code == "call"], what="the check")
    assert found[0].range.start.line == 9  # the tl.arange line inside the kernel
    assert "power of 2" in found[0].message
    caveats = [d for d in diags(client, uri) if d.severity == types.DiagnosticSeverity.Information]
    assert caveats and all("interpreter" in d.message.lower() for d in caveats)


async def test_failing_test_at_the_test_and_the_deepest_frame(client, workspace):
    uri = open_file(client, workspace / "raising_test.py")
    found = await until(
        lambda: [d for d in diags(client, uri) or [] if d.severity == types.DiagnosticSeverity.Error],
        what="the failing test",
    )
    lines = {d.range.start.line + 1 for d in found}
    assert 20 in lines  # raise ValueError(...) in add(): the deepest frame in the file
    assert 26 in lines  # def test_add
    assert any("unsupported size" in d.message for d in found)


async def test_not_checkable_on_cpu_is_information_not_an_error(client, workspace):
    uri = open_file(client, workspace / "inline_asm.py")
    found = await until(
        lambda: [d for d in diags(client, uri) or [] if "not checkable on CPU" in d.message], what="the verdict"
    )
    assert found[0].severity == types.DiagnosticSeverity.Information
    assert not [d for d in diags(client, uri) if d.severity == types.DiagnosticSeverity.Error]


async def test_passing_check_clears_errors_and_timing_gives_hints_and_hover(client, workspace):
    path = workspace / "add_native.py"
    uri = open_file(client, path)
    await until(lambda: diags(client, uri) is not None, what="diagnostics")
    hints = await until(lambda: _hints(client, uri), what="latency inlay hints")
    assert hints[0].position.line == 7
    label = hints[0].label
    assert "µs" in label and "GB/s" in label and "% of peak" in label, label
    assert not [d for d in diags(client, uri) if d.severity == types.DiagnosticSeverity.Error]

    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=7, character=6))
    )
    text = hover.contents.value
    assert "add_kernel" in text and "passes" in text and "add(x: float32[98432]" in text and "GB/s" in text
    assert "| latency |" in text and "Why: `add(x: float32[98432], y: float32[98432])` is latency-bound" in text
    assert "Compiled: 4 warps, 3 stages, 32 registers/thread, occupancy 100% (warps)" in text
    for _ in range(400):  # the profile follows the timing
        if "measured:" in text:
            break
        await asyncio.sleep(0.05)
        hover = await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=7, character=6))
        )
        text = hover.contents.value
    measured = "occupancy 100% (warps), measured: achieved occupancy 82%, DRAM 85% of peak, SM 6% (scripted profiler)"
    assert measured in text
    nothing = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=1, character=3))
    )
    assert nothing is None  # `import torch` is no kernel


async def _hints_async(client, uri):
    return await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=types.Range(types.Position(0, 0), types.Position(200, 0)),
        )
    )


_pending: dict = {}


def _hints(client, uri):
    """Polled from `until`: the result of the last inlay-hint request, issuing a new one each time."""
    task = _pending.get(uri)
    result = None
    if task is not None and task.done():
        result = task.result()
        _pending.pop(uri)
    if uri not in _pending:
        _pending[uri] = asyncio.ensure_future(_hints_async(client, uri))
    return result


async def test_an_edit_during_a_check_never_publishes_stale_diagnostics(client, workspace):
    path = workspace / "stale.py"
    slow_failing = FAST.read_text().replace(
        "    torch.manual_seed(0)", "    import time\n    time.sleep(4)\n    raise AssertionError('stale result')"
    )
    path.write_text(slow_failing)
    uri = open_file(client, path, version=1)  # the check of version 1 starts (debounced) and takes 4 s
    await asyncio.sleep(1.5)
    replace_all(client, uri, FAST.read_text(), version=2)  # the user edits while it runs
    await until(lambda: [p for p in client.published if p.uri == uri and p.version == 2], what="version 2")
    await asyncio.sleep(5.0)  # long enough for the old check to have finished, had it not been cancelled
    mine = [p for p in client.published if p.uri == uri]
    assert not any("stale result" in d.message for p in mine for d in p.diagnostics)
    save(client, uri)  # and the server is not stuck: version 2 is checked and passes
    await until(lambda: _hints(client, uri), what="hints of version 2")


async def raw_request(client, method: str, params):
    """A request whose result is read as plain JSON (lsprotocol's client-side hook turns every CodeAction that
    carries a command into a Command)."""
    client.protocol.get_result_type = lambda m: None
    try:
        return await client.protocol.send_request_async(method, params)
    finally:
        del client.protocol.get_result_type


async def test_code_actions_on_a_kernel_and_the_file(client, workspace):
    uri = (workspace / "add_native.py").as_uri()
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri),
        range=types.Range(types.Position(9, 4), types.Position(9, 4)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    actions = await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, params)
    titles = [a["title"] for a in actions]
    assert titles == ["GEAK: Optimize kernel `add_kernel`", "GEAK: Optimize all kernels in file"]
    assert actions[0]["kind"] == "refactor.rewrite"
    assert actions[0]["command"]["command"] == "geak.server.optimizeKernel"
    assert actions[0]["command"]["arguments"] == [uri, "add_kernel", 1]
    assert actions[1]["command"]["arguments"] == [uri, None, 1]
    params.range = types.Range(types.Position(30, 0), types.Position(30, 0))
    outside = await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, params)
    assert [a["title"] for a in outside] == ["GEAK: Optimize all kernels in file"]
    params.context = types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.QuickFix])
    assert await raw_request(client, types.TEXT_DOCUMENT_CODE_ACTION, params) is None


async def test_geak_check_request(client, workspace):
    uri = (workspace / "raising_test.py").as_uri()
    result = await client.protocol.send_request_async("geak/check", {"textDocument": {"uri": uri}})
    assert result.ok is False and result.stage == "call" and "unsupported size" in result.message
    assert result.backend == "interpreter"
    not_open = (workspace / "add_native.py").as_uri()
    ok = await client.protocol.send_request_async("geak/check", {"textDocument": {"uri": not_open}})
    assert ok.ok is True


async def test_bad_input_never_kills_the_server(client, workspace):
    binary = workspace / "blob.py"
    binary.write_bytes(b"\x00\x01triton jit\xff\xfe" * 10)
    uri = open_file(client, binary, text=binary.read_bytes().decode("latin-1"))
    huge = "import triton\n@triton.jit\ndef k():\n    pass\n" + "x = 1\n" * 500_000
    open_file(client, workspace / "huge.py", text=huge)
    open_file(client, workspace / "syntax_error.py")
    syntax_uri = (workspace / "syntax_error.py").as_uri()
    found = await until(lambda: diags(client, syntax_uri), what="the syntax error")
    assert any("syntax error" in m for m in messages(found))
    client.protocol.notify("geak/nonsense", {"x": 1})
    with pytest.raises(Exception, match="textDocument"):
        await client.protocol.send_request_async("geak/optimize", {"nope": 1})
    bad_hover = b'{"jsonrpc": "2.0", "id": "bad-1", "method": "textDocument/hover", "params": {"textDocument": 3}}'
    for body in (bad_hover, b"{not json!!}", b'{"jsonrpc": "2.0", "method": "textDocument/didSave", "params": []}'):
        client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=0, character=0))
    )
    assert hover is None
    result = await client.protocol.send_request_async("geak/check", {"textDocument": {"uri": uri}})
    assert result.ok is False  # still answering


async def test_settings_are_validated_and_reloaded(client, workspace):
    configure(client, checkOnSave="sometimes", iterations=0)
    shown = await until(
        lambda: [m for m in client.messages if "invalid GEAK settings" in m.message], what="the settings error"
    )
    assert "geak.checkOnSave" in shown[-1].message and "geak.iterations" in shown[-1].message
    configure(client, checkOnSave=False)
    await asyncio.sleep(0.5)
    path = workspace / "off.py"
    path.write_text((workspace / "compile_error.py").read_text() + "# not checked before\n")
    uri = open_file(client, path)
    await until(lambda: diags(client, uri), what="static diagnostics")
    await asyncio.sleep(3.0)
    assert not [d for d in diags(client, uri) if d.code == "call"]  # no check ran
    configure(client)


async def test_a_file_changed_on_disk_is_checked_again(client, workspace):
    path = workspace / "watched.py"
    shutil.copy(FAST, path)
    uri = open_file(client, path)
    await until(lambda: diags(client, uri) is not None, what="diagnostics")
    await asyncio.sleep(1.5)
    broken = (workspace / "compile_error.py").read_text()
    path.write_text(broken)  # e.g. git checkout: the editor then reloads the buffer
    replace_all(client, uri, broken, version=2)
    found = await until(
        lambda: [d for d in diags(client, uri) or [] if d.code == "call"], what="the re-check after the change on disk"
    )
    assert found


async def test_a_save_in_the_editor_is_checked_once(client, workspace):
    path = workspace / "saved.py"
    shutil.copy(FAST, path)
    uri = open_file(client, path)
    await until(lambda: diags(client, uri) is not None, what="diagnostics")
    broken = (workspace / "compile_error.py").read_text()
    replace_all(client, uri, broken, version=2)
    path.write_text(broken)  # the editor writes the file, then says it saved it
    save(client, uri)
    await until(lambda: [d for d in diags(client, uri) or [] if d.code == "call"], what="the check of the save")
    await asyncio.sleep(1.5)  # past the watcher's debounce: it saw the write, and must leave it to the save
    assert not [m for m in client.log_messages if "saved.py changed on disk" in m.message]


async def test_the_workspace_configuration_is_reloaded_when_it_changes(client, workspace):
    (workspace / "geak.yaml").write_text("max_iteration: 0\nbogus_key: 1\n")
    shown = await until(
        lambda: [m for m in client.messages if "GEAK configuration" in m.message], what="the configuration error"
    )
    assert "max_iteration" in shown[-1].message and "bogus_key" in shown[-1].message
    (workspace / "geak.yaml").unlink()


async def test_the_server_exits_at_once_when_told_to(tmp_path, monkeypatch):
    """VS Code's client kills a server still running 2 s after `exit`, and the interpreter's own teardown of torch and
    the other libraries loaded takes seconds: the server skips it (no `atexit` handler runs)."""
    teardown = tmp_path / "teardown ran"
    monkeypatch.setenv(TEARDOWN_MARK, str(teardown))
    own = await start(tmp_path)
    await until(lambda: [s for s in own.statuses if s.backend], what="a warm evaluator (torch loaded)")
    await own.shutdown_async(None)
    own.exit(None)
    await own._server.wait()
    await own.stop()
    assert own._server.returncode == 0
    assert not teardown.exists()


async def test_a_non_utf8_file_on_disk(client, workspace):
    path = workspace / "latin1.py"
    path.write_bytes("# caf\xe9\nimport triton\n@triton.jit\ndef k():\n    pass\n".encode("latin-1"))
    result = await client.protocol.send_request_async("geak/check", {"textDocument": {"uri": path.as_uri()}})
    assert result.ok is False and "cannot read" in result.message
