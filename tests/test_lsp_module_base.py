"""The language server compares a passing save of a repository's module with its version at a git revision
(`geak.base`, HEAD by default), judged by the repository's tests: a real LSP client (pytest-lsp), the fixture
repository `tinyops` committed into a real git repository as the workspace, checks for real in Triton's interpreter.

An edit wrong only past the sizes the repository's tests use passes those tests; only the comparison with the
committed module (the same tests, then the probes) tells, and it warns at the test in its own file."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from git_repos import Repo, new_repo
from lsp_client import FIXTURES, open_file, replace_all, save, start, stop, until
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

REPOS = FIXTURES / "repos"
SCALE = Path("src/tinyops/ops/scale.py")
SCALE_TESTS = Path("tests/test_scale.py")
ADD = Path("src/tinyops/ops/add.py")
KERNEL_LINE = 7  # `def _scale_kernel(...)` and `def _add_kernel(...)` (1-based)
SLOW_TEST = "def test_add():\n    import time\n\n    time.sleep(3)\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    root = shutil.copytree(REPOS / "tinyops", tmp_path_factory.mktemp("repo") / "tinyops")
    tests = root / "tests/test_add.py"
    tests.write_text(tests.read_text().replace("def test_add():\n", SLOW_TEST))  # add.py's comparison takes a while
    made = new_repo(root)
    made.commit("the fixture repository")
    return made


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(repo):
    client = await start(repo.root)
    yield client
    await stop(client)


def of_code(client, uri: str, code: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri) or [] if d.code == code]


def errors(client, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri) or [] if d.severity == types.DiagnosticSeverity.Error]


def line_of(path: Path, text: str) -> int:
    """The 0-based line of the first line of `path` that starts with `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines()) if line.startswith(text))


def activities(client, what: str) -> list[str]:
    return [s.activity for s in client.statuses if what in (s.activity or "")]


def verdicts(client) -> list[tuple[str, str, str]]:
    found = [getattr(s, "baseVerdict", None) for s in client.statuses]
    return [(v.file, v.rev, v.verdict) for v in found if v]


async def hover_until(client, uri: str, needle: str, timeout: float = 240.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=KERNEL_LINE - 1, character=6))
        )
        text = found.contents.value if found is not None else ""
        if needle in text:
            return text
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the hover never said {needle!r}; last:\n{text}")
        await asyncio.sleep(0.1)


def saved(client, repo: Repo, path: Path, uri: str, text: str, version: int) -> None:
    """The module edited and saved, as an editor does (the buffer changes, the file is written, didSave)."""
    replace_all(client, uri, text, version)
    repo.write(str(path), text)
    save(client, uri)


async def test_outputs_that_differ_from_heads_warn_at_the_test_in_its_own_file(client, repo):
    wrong = (REPOS / "candidates" / "scale_wrong_past_tests.py").read_text()  # the repository's tests pass it
    path = repo.write(str(SCALE), wrong)
    uri, tests_uri = path.as_uri(), (repo.root / SCALE_TESTS).as_uri()
    open_file(client, path)
    (warning,) = await until(lambda: of_code(client, tests_uri, "base"), timeout=240, what="the base's warning")
    assert warning.severity == types.DiagnosticSeverity.Warning
    assert warning.range.start.line == line_of(repo.root / SCALE_TESTS, "def test_scale(")
    assert warning.message.startswith("outputs differ from HEAD's in other sizes #"), warning.message
    assert "NaN mismatch" in warning.message
    (related,) = warning.related_information
    assert related.location.uri == uri and related.location.range.start.line == KERNEL_LINE - 1
    assert related.message == "kernel _scale_kernel of tinyops.ops.scale"
    assert not errors(client, uri) and not errors(client, tests_uri)  # the repository's tests pass
    assert not of_code(client, uri, "base")  # said at the test, not again on the module
    text = await hover_until(client, uri, "**vs HEAD**")
    assert "✅ passes" in text and "**vs HEAD**: outputs differ from HEAD's in other sizes #" in text
    assert ("scale.py", "HEAD", "outputs differ") in verdicts(client)


async def test_a_comment_only_edit_is_the_same_as_head_without_running(client, repo):
    uri, tests_uri = (repo.root / SCALE).as_uri(), (repo.root / SCALE_TESTS).as_uri()
    committed = repo.git("show", f"HEAD:{SCALE}") + "\n"
    compared = len(activities(client, "comparing scale.py"))
    saved(client, repo, repo.root / SCALE, uri, committed.replace("mask = offsets < n\n", "mask = offsets < n  # in\n"),
          2)  # fmt: skip
    text = await hover_until(client, uri, "**vs HEAD**: same as HEAD")
    assert "✅ passes" in text
    await until(lambda: not of_code(client, tests_uri, "base"), what="the base's warning to go")
    assert len(activities(client, "comparing scale.py")) == compared  # nothing ran against the base
    assert ("scale.py", "HEAD", "same") in verdicts(client)


async def test_a_later_save_cancels_the_modules_comparison_under_way(client, repo):
    """The repository's test of add.py takes 3 s: while the first save's comparison (outputs that differ past the
    tests' sizes) runs, a second save whose kernels compute what the base's do replaces it: the first comparison is
    cancelled (its job killed) and its warning never shows."""
    committed = repo.git("show", f"HEAD:{ADD}") + "\n"
    wrong = committed.replace("out, n, BLOCK=64)", "out, min(n, 100), BLOCK=64)")  # the test adds 100 elements
    assert wrong != committed
    path = repo.write(str(ADD), wrong)
    uri, tests_uri = path.as_uri(), (repo.root / "tests/test_add.py").as_uri()
    open_file(client, path)
    await until(lambda: activities(client, "comparing add.py"), timeout=240, what="the first comparison")
    saved(client, repo, path, uri, committed.replace("mask = offsets < n\n", "mask = n > offsets\n"), 2)
    cancelled = f"the comparison of add.py with HEAD:{ADD} was cancelled after "
    await until(lambda: [m for m in client.log_messages if m.message.startswith(cancelled)], timeout=60,
                what="the first comparison cancelled")  # fmt: skip
    await hover_until(client, uri, f"**vs HEAD**: same outputs as HEAD:{ADD}")
    published = [d.message for p in client.published if p.uri in (uri, tests_uri) for d in p.diagnostics]
    assert not [m for m in published if "outputs differ" in m]
    assert len([m for m in client.log_messages if m.message.startswith(cancelled)]) == 1
