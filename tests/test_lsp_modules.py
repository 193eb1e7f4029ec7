"""The language server on a module of a repository (kernels, no test of its own), judged by the repository's own
pytest tests: a real LSP client (pytest-lsp), the fixture repository `tinyops` as the workspace, checks for real in
Triton's interpreter and GPU timing scripted (`lsp_harness.py`).

A wrong kernel saved in the module shows at the failing test, in the test file, with related information at the
kernel; a right one clears it; the hover says which tests were found and why."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_client import FIXTURES, open_file, replace_all, save, start, stop, until
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

REPOS = FIXTURES / "repos"
MODULE = Path("src/tinyops/ops/scale.py")
TESTS = Path("tests/test_scale.py")
KERNEL_LINE = 7  # `def _scale_kernel(...)` (1-based)
LONELY = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _k(x_ptr):\n    tl.load(x_ptr)\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = shutil.copytree(REPOS / "tinyops", tmp_path_factory.mktemp("repo") / "tinyops")
    (root / "src/tinyops/ops/lonely.py").write_text(LONELY)  # kernels no test reaches
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(repo):
    client = await start(repo)
    yield client
    await stop(client)


def line_of(path: Path, text: str) -> int:
    """The 0-based line of the first line of `path` that starts with `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines()) if line.startswith(text))


def of_code(client, uri: str, code: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri) or [] if d.code == code]


async def hover(client, uri: str) -> str:
    found = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=KERNEL_LINE - 1, character=6))
    )
    return found.contents.value if found is not None else ""


async def hover_until(client, uri: str, needle: str, timeout: float = 240.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while needle not in (text := await hover(client, uri)):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the hover never said {needle!r}; last:\n{text}")
        await asyncio.sleep(0.1)
    return text


async def hints_until(client, uri: str, timeout: float = 240.0) -> list[types.InlayHint]:
    deadline = asyncio.get_running_loop().time() + timeout
    params = types.InlayHintParams(
        types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(99, 0))
    )
    while not (hints := await client.text_document_inlay_hint_async(params)):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("no inlay hint on the module")
        await asyncio.sleep(0.1)
    return hints


async def saved(client, repo: Path, uri: str, text: str, version: int) -> None:
    """The module edited and saved, as an editor does (the buffer changes, the file is written, didSave)."""
    replace_all(client, uri, text, version)
    (repo / MODULE).write_text(text)
    save(client, uri)


async def test_a_module_is_checked_by_its_repositorys_tests_and_the_hover_says_which(client, repo):
    uri = open_file(client, repo / MODULE)
    text = await hover_until(client, uri, "Last check: ")
    assert "✅ passes" in text and "**Repository tests** of `tinyops.ops.scale` (found through imports under tests/)"
    assert "- tests: `tests/test_scale.py::test_scale` (uses scale, which is imported from tinyops.ops.scale)" in text
    assert "`tests/test_scale.py::test_scaler_backward` (uses Scaler, which comes from tinyops" in text
    assert "test_plain_torch" not in text  # it does not reach the module
    left = "2 not sampled (tests/test_scale.py::test_scale[0.5-64], tests/test_scale.py::test_scale[3.0-64])"
    assert f"Last check: ran 5 of 7 selected case(s) within 20 s; left out: {left}" in text  # moduleCasesPerTest: 4
    shown = client.diagnostics.get(uri) or []
    assert not [d for d in shown if d.severity == types.DiagnosticSeverity.Error]
    assert not of_code(client, uri, "no-test")  # the repository's tests judge it


async def test_a_wrong_kernel_fails_at_the_test_in_its_own_file_and_a_right_one_clears_it(client, repo):
    uri = (repo / MODULE).as_uri()
    tests_uri = (repo / TESTS).as_uri()
    original = (repo / MODULE).read_text()
    wrong = (REPOS / "candidates" / "scale_wrong.py").read_text()
    await saved(client, repo, uri, wrong, 2)
    found = await until(lambda: of_code(client, tests_uri, "repository-test"), timeout=240, what="the failing tests")
    lines = {d.range.start.line: d for d in found}
    assert set(lines) == {line_of(repo / TESTS, "def test_scale("), line_of(repo / TESTS, "def test_scaler_backward")}
    at_scale = lines[line_of(repo / TESTS, "def test_scale(")]
    assert at_scale.severity == types.DiagnosticSeverity.Error
    assert at_scale.message.startswith("test_scale[0.5-5] (and 3 more cases) fails with tinyops.ops.scale as saved: ")
    assert "AssertionError: Tensor-likes are not close!" in at_scale.message
    (related,) = at_scale.related_information
    assert related.location.uri == uri and related.location.range.start.line == KERNEL_LINE - 1
    assert related.message == "kernel _scale_kernel of tinyops.ops.scale (launched by this test)"
    (summary,) = await until(lambda: of_code(client, uri, "repository-tests"), what="the module's summary")
    assert summary.message.startswith("5 of 5 repository test case(s) fail: tests/test_scale.py::test_scale[0.5-5]: ")
    assert summary.range.start.line == KERNEL_LINE - 1
    assert {r.location.uri for r in summary.related_information} == {tests_uri}
    assert "❌ fails" in await hover(client, uri)

    seen = len(client.published)
    await saved(client, repo, uri, original, 3)

    def cleared():
        return [p for p in client.published[seen:] if p.uri == tests_uri and not p.diagnostics]

    await until(cleared, timeout=240, what="the test file's diagnostics to go")
    await until(lambda: not of_code(client, uri, "repository-tests"), what="the module's summary to go")


async def test_a_changed_test_file_checks_the_module_again_and_geak_check_serves_a_module(client, repo):
    uri = (repo / MODULE).as_uri()
    tests_uri = (repo / TESTS).as_uri()
    original = (repo / TESTS).read_text()
    broken = original.replace("torch.full_like(x, 2.0))", "torch.full_like(x, 3.0))")
    (repo / TESTS).write_text(broken)  # changed on disk (a git checkout, another editor): the watcher sees it
    (found,) = await until(lambda: of_code(client, tests_uri, "repository-test"), timeout=240, what="the new failure")
    assert found.range.start.line == line_of(repo / TESTS, "def test_scaler_backward")
    assert found.message.startswith("test_scaler_backward fails with tinyops.ops.scale as saved: ")
    (repo / TESTS).write_text(original)
    await until(lambda: not of_code(client, tests_uri, "repository-test"), timeout=240, what="the failure to go")
    answer = await client.protocol.send_request_async("geak/check", {"textDocument": {"uri": uri}})
    assert answer.ok and answer.message == "5 test(s) (2 left out) passed", answer


async def test_latency_hints_on_the_modules_kernels(client, repo):
    uri = (repo / MODULE).as_uri()
    hints = await hints_until(client, uri)
    assert hints[0].position.line == KERNEL_LINE - 1 and "µs" in hints[0].label


async def test_optimize_is_offered_on_a_module(client, repo):
    uri = (repo / MODULE).as_uri()
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(KERNEL_LINE, 4), types.Position(KERNEL_LINE, 4)),
            types.CodeActionContext(diagnostics=[]),
        )
    )
    titles = [a.title for a in actions]
    assert titles == ["GEAK: Optimize kernel `_scale_kernel`", "GEAK: Optimize all kernels in file"]


async def test_optimize_refuses_an_unsaved_module(client, repo):
    uri = (repo / MODULE).as_uri()
    replace_all(client, uri, (repo / MODULE).read_text() + "# unsaved\n", 4)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="geak.server.optimizeKernel", arguments=[uri, None, None])
    )
    assert answer["summary"] == "save scale.py first: a module is optimized as saved, in its repository"
    replace_all(client, uri, (repo / MODULE).read_text(), 5)


async def test_optimize_runs_a_module_with_its_repositorys_tests_as_the_judge(client, repo):
    uri = (repo / MODULE).as_uri()
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="geak.server.optimizeKernel", arguments=[uri, "_scale_kernel", None])
    )
    assert answer["edit"] is None and answer["speedup"] is None  # no model, and timing is scripted as equal
    assert "no embedded test" not in answer["summary"], answer["summary"]


async def test_a_module_no_test_reaches_says_why(client, repo):
    uri = open_file(client, repo / "src/tinyops/ops/lonely.py")
    (warning,) = await until(lambda: of_code(client, uri, "no-test"), what="the no-test warning")
    assert "as a module of its repository: no test of tinyops.ops.lonely found" in warning.message
    assert "under " + str(repo / "tests") in warning.message
