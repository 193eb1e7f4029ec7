"""Optimize through the language server with a real LSP client: the model path (scripted OpenAI-compatible server
over real HTTP), the launch-parameter search, progress, the versioned edit and its refusal, the server command with
workspace/applyEdit, geak/candidates, inlay hints after an optimize, and cancellation that kills the job in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_client import FIXTURES, configure, open_file, replace_all, save, start, stop, until
from lsprotocol import types

from geak.evaluator.job_package import WORKER_MODULE

pytestmark = pytest.mark.asyncio(loop_scope="module")

ORIGINAL = FIXTURES / "add_native.py"
KERNEL_CODE = ORIGINAL.read_text().split("def test_add")[0]


def reply(latency: float, *, hang: bool = False) -> str:
    code = KERNEL_CODE.replace("def add(", f"# latency: {latency}\ndef add(")
    if hang:
        code = code.replace("    out = torch.empty_like(x)", "    while True:\n        pass")
    return f"The kernel is memory bound; launching fewer, wider programs helps.\n\n```python\n{code}```\n"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("optimize")
    (root / "geak.yaml").write_text("search: false\ntimeout_per_check_s: 60\nsearch_time_s: 4\n")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(workspace):
    client = await start(workspace)
    yield client
    await stop(client)


def use_model(client, llm) -> None:
    configure(client, model="scripted-model", baseUrl=llm.base_url, iterations=1)


def new_file(workspace: Path, name: str) -> Path:
    path = workspace / name
    shutil.copy(ORIGINAL, path)
    return path


async def optimize(client, uri, *, kernel=None, version=None, token=None, msg_id=None):
    params = {"textDocument": {"uri": uri}, "kernel": kernel, "version": version}
    if token is not None:
        params["workDoneToken"] = token
    return await client.protocol.send_request_async("geak/optimize", params, msg_id=msg_id)


async def hints(client, uri):
    return await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=types.Range(types.Position(0, 0), types.Position(100, 0)),
        )
    )


async def test_model_optimize_returns_a_versioned_edit_with_progress(client, workspace, scripted_llm):
    use_model(client, scripted_llm)
    path = new_file(workspace, "model.py")
    uri = open_file(client, path, version=3)
    scripted_llm.reply(reply(0.5))
    token = f"tok-{uuid.uuid4()}"
    client.progress_reports[token] = []
    result = await optimize(client, uri, kernel="add_kernel", version=3, token=token)

    assert result.speedup == pytest.approx(2.0), result
    assert result.summary.startswith("2.00x faster [1.96, 2.04] on scripted GPU") and "add_kernel" in result.summary
    edit = result.edit._asdict()  # (pygls hands JSON objects over as namedtuples)
    (change,) = edit["documentChanges"]
    assert (change.textDocument.uri, change.textDocument.version) == (uri, 3)
    assert all(e.annotationId == "geak.optimize" for e in change.edits)
    (annotation,) = edit["changeAnnotations"]  # the one annotation, "geak.optimize"
    assert annotation.needsConfirmation is True and annotation.label == "GEAK: optimized add_kernel (2.00x)"
    assert any("# latency: 0.5" in e.newText for e in change.edits)
    assert not any("def test_add" in e.newText for e in change.edits)  # the test section is never touched
    (best,) = [c for c in result.candidates if c.passed]
    assert best.origin == "generate" and best.speedup == pytest.approx(2.0) and best.latencyMs
    prompt = scripted_llm.requests[0]["messages"][0]["content"]
    assert "Optimize the kernel `add_kernel`" in prompt

    kinds = [type(v).__name__ for v in client.progress_reports[token]]
    assert kinds[0] == "WorkDoneProgressBegin" and kinds[-1] == "WorkDoneProgressEnd"
    assert "WorkDoneProgressReport" in kinds
    assert "2.00x faster" in client.progress_reports[token][-1].message

    found = await hints(client, uri)
    assert any("2.00x faster candidate" in h.label for h in found)
    listed = await client.protocol.send_request_async("geak/candidates", {"textDocument": {"uri": uri}})
    assert [c["id"] for c in listed] == [c.id for c in result.candidates]

    # apply the edit as the editor would, save: the new code is checked and timed, the optimize hint goes away
    new_text = path.read_text().replace("def add(", "# latency: 0.5\ndef add(", 1)
    replace_all(client, uri, new_text, version=4)
    path.write_text(new_text)
    save(client, uri)

    async def fresh():
        labels = [h.label for h in await hints(client, uri) or []]
        return labels if any("450 µs" in label for label in labels) else None  # kernel time: 0.9 x 0.5 ms

    labels = None
    for _ in range(300):
        labels = await fresh()
        if labels:
            break
        await asyncio.sleep(0.1)
    assert labels and not any("faster candidate" in label for label in labels), labels


async def test_a_stale_version_is_refused(client, workspace, scripted_llm):
    uri = open_file(client, new_file(workspace, "stale.py"), version=1)
    result = await optimize(client, uri, version=7)
    assert result.edit is None and "changed since the request" in result.summary
    assert not scripted_llm.requests


async def test_an_edit_during_the_optimize_refuses_the_edit(client, workspace, scripted_llm):
    use_model(client, scripted_llm)
    path = new_file(workspace, "moving.py")
    uri = open_file(client, path, version=1)
    scripted_llm.reply(reply(0.5), delay_s=2.0)
    pending = asyncio.ensure_future(optimize(client, uri, version=1))
    await until(lambda: scripted_llm.requests, what="the model request")
    replace_all(client, uri, path.read_text() + "# edited\n", version=2)
    result = await pending
    assert result.edit is None and result.speedup == pytest.approx(2.0)
    assert "changed meanwhile" in result.summary


async def test_server_command_applies_the_edit_through_the_client(client, workspace, scripted_llm):
    use_model(client, scripted_llm)
    uri = open_file(client, new_file(workspace, "command.py"), version=1)
    scripted_llm.reply(reply(0.25))
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="geak.server.optimizeKernel", arguments=[uri, None, 1])
    )
    assert result["speedup"] == pytest.approx(4.0)
    applied = await until(lambda: client.applied_edits, what="workspace/applyEdit")
    assert applied[-1].label == "GEAK: optimized command.py (4.00x)"
    assert applied[-1].edit.document_changes[0].text_document.version == 1
    with pytest.raises(Exception, match="arguments"):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="geak.server.optimizeKernel", arguments=[42])
        )


async def test_search_without_a_model(client, workspace):
    configure(client)
    await asyncio.sleep(0.3)
    uri = open_file(client, new_file(workspace, "search.py"), version=1)
    result = await optimize(client, uri, version=1)
    assert result.edit is None and result.speedup is None
    assert "no candidate was significantly faster" in result.summary
    assert result.candidates == []  # no configuration beat the original in screening: no finalist to confirm
    assert result.search.screened >= 1 and "already suits this device" in result.search.summary


async def test_a_search_winner_that_splits_k_shows_its_review_note_in_hover_candidates_and_preview(client, workspace):
    """The search's winner takes the kernel onto its `tl.atomic_add` path and pins its autotune list to one config (the
    scripted GPU times SPLIT_K 2 at half the original's time): the answer, the hover, the candidates and the Refactor
    Preview's annotation all say so."""
    configure(client)
    await asyncio.sleep(0.3)
    path = workspace / "split_k.py"
    shutil.copy(FIXTURES / "split_k_atomic.py", path)
    uri = open_file(client, path, version=1)
    result = await optimize(client, uri, version=1)

    assert result.speedup == pytest.approx(2.0), result.summary
    atomic, pinned = result.review
    assert atomic.startswith("row_sum_kernel: SPLIT_K 1→2 takes its `tl.atomic_add` path")
    assert pinned.startswith("row_sum_kernel: its autotuner's 2 configs are replaced by the one timed here")
    assert result.summary.startswith("2.00x faster [1.96, 2.04] on scripted GPU, 1.600x [1.568, 1.632] vs your "
                                     "autotune list's best (row_sum_kernel: its own config 2 of 2 pinned")  # fmt: skip
    assert result.summary.endswith(f"; review: {atomic}; {pinned}")
    (annotation,) = result.edit._asdict()["changeAnnotations"]
    assert annotation.label == "GEAK: optimized split_k.py (2.00x) · review 2 notes first"
    assert annotation.description.endswith(f"; review: {atomic}; {pinned}")

    (winner,) = [c for c in result.candidates if c.passed]
    assert winner.review == [atomic, pinned]
    assert winner.note == f"row_sum_kernel: SPLIT_K 1→2 · review: {atomic}; {pinned}"
    shown = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="geak.server.showCandidates", arguments=[uri])
    )
    assert [c["note"] for c in shown] == [winner.note]  # the list the client shows

    line = next(i for i, text in enumerate(path.read_text().splitlines()) if text.startswith("def row_sum_kernel"))
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, len("def row_")))
    )
    text = hover.contents.value
    assert f"**Review before applying** (the test cannot show these):\n- {atomic}\n- {pinned}" in text
    assert text.count(atomic) == 1  # said once, as a list item, not again in the summary line


async def test_a_file_failing_its_test_is_refused_by_its_own_name(client, workspace):
    configure(client)
    path = workspace / "failing.py"
    path.write_text(ORIGINAL.read_text().replace("x + y, mask=mask", "x - y, mask=mask"))
    uri = open_file(client, path, version=1)
    result = await optimize(client, uri, version=1)
    assert result.edit is None and not result.candidates
    assert result.summary.startswith(f"{path} does not pass its own test"), result.summary
    assert "geak-optimize-" not in result.summary  # not the server's scratch copy


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _is_worker(pid: int) -> bool:
    """A Python process running `-m WORKER_MODULE` (not a sandbox launcher naming it in its arguments)."""
    with contextlib.suppress(OSError):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return "python" in Path(argv[0].decode()).name and WORKER_MODULE.encode() in argv[1:3]
    return False


def job_processes(server_pid: int) -> list[int]:
    """Processes running a job: the evaluator's workers forked from a worker (the zygote, whatever sandbox sits
    between it and the server, is the one worker whose parent is none)."""
    jobs, todo = [], [server_pid]
    while todo:
        pid = todo.pop()
        for child in _children(pid):
            todo.append(child)
            if _is_worker(child) and _is_worker(pid):
                jobs.append(child)
    return jobs


async def test_cancel_stops_the_job_in_flight(client, workspace, scripted_llm):
    use_model(client, scripted_llm)
    uri = open_file(client, new_file(workspace, "hang.py"), version=1)
    scripted_llm.reply(reply(0.5, hang=True))
    server_pid = client._server.pid
    msg_id = f"optimize-{uuid.uuid4()}"
    pending = asyncio.ensure_future(optimize(client, uri, version=1, msg_id=msg_id))
    await until(lambda: scripted_llm.requests, what="the model request")
    first_seen: dict[int, float] = {}

    def hanging() -> set[int]:  # a job alive for 4 s: the candidate's test (the others take about a second)
        now = time.monotonic()
        alive = set(job_processes(server_pid))
        for pid in alive:
            first_seen.setdefault(pid, now)
        return {pid for pid in alive if now - first_seen[pid] > 4.0}

    jobs = await until(hanging, timeout=60, what="the hanging job")
    client.protocol.notify("$/cancelRequest", types.CancelParams(id=msg_id))
    with pytest.raises(Exception, match="cancel"):
        await pending
    await until(lambda: not (set(job_processes(server_pid)) & jobs), timeout=10, what="the job to be killed")
    status = await until(lambda: [s for s in client.statuses if not s.busy], what="an idle status")
    assert status
