"""The language server compares a passing save with the file's version at a git revision (`geak.base`, HEAD by
default): a real LSP client (pytest-lsp), a real git repository as the workspace, checks in Triton's interpreter and
GPU timing scripted (`lsp_harness.py`: a `# latency: X` marker sets a file's time).

The kernels' tests check only their output's shape, so only the comparison with the committed version can tell what
they compute."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_asyncio
from git_repos import new_repo, scale_file
from lsp_client import configure, open_file, replace_all, save, start, stop, until
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEST_LINE = 22  # `def test_scale():` in `scale_file`'s text (1-based)
KERNEL_LINE = 8  # `def scale_kernel(...)`
COMMITTED = ("differs.py", "comment.py", "off.py", "slower.py", "broken_base.py", "slow_base.py", "probed.py")
SLOW_TEST = '    import time\n    time.sleep(3)\n    x = torch.randn(100, device="cuda")\n'
BROKEN_TEST = "    assert out.shape == x.shape\n    raise AssertionError('the base is broken')\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = new_repo(tmp_path_factory.mktemp("repo"))
    for name in COMMITTED:
        repo.write(name, scale_file())
    repo.write("broken_base.py", scale_file().replace("    assert out.shape == x.shape\n", BROKEN_TEST))
    repo.write("slow_base.py", scale_file().replace('    x = torch.randn(100, device="cuda")\n', SLOW_TEST))
    repo.write(".gitignore", ".cache/\n")
    repo.commit("the kernels as committed")
    return repo


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(repo):
    client = await start(repo.root)
    yield client
    await stop(client)


def warnings(client, uri: str, code: str = "base") -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri) or [] if d.code == code]


def errors(client, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri) or [] if d.severity == types.DiagnosticSeverity.Error]


def edit(repo, name: str, text: str) -> Path:
    """The file changed in the working tree (as the editor saves it)."""
    return repo.write(name, text)


async def hover(client, uri: str, line: int = KERNEL_LINE, character: int = 6) -> str:
    found = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line=line - 1, character=character))
    )
    return found.contents.value if found is not None else ""


async def hover_until(client, uri: str, needle: str, timeout: float = 120.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        text = await hover(client, uri)
        if needle in text:
            return text
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"the hover never said {needle!r}; last:\n{text}")
        await asyncio.sleep(0.1)


async def hints(client, uri: str) -> list[types.InlayHint]:
    return (
        await client.text_document_inlay_hint_async(
            types.InlayHintParams(
                types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(99, 0))
            )
        )
        or []
    )


def new_code(i: int) -> str:
    """`scale_file()` with a new line of code above its kernel: checked anew, the same outputs."""
    return scale_file().replace("@triton.jit", f"_SAVED = {i}  # new code\n\n\n@triton.jit", 1)


def base_statuses(client) -> list[str]:
    return [s.base for s in client.statuses if getattr(s, "base", None)]


def verdicts(client) -> list[tuple[str, str, str]]:
    """The status bar's words (`geak/status`'s `baseVerdict`): (file, rev, verdict)."""
    found = [getattr(s, "baseVerdict", None) for s in client.statuses]
    return [(v.file, v.rev, v.verdict) for v in found if v]


async def test_an_edit_that_changes_outputs_warns_at_the_test_that_shows_it(client, repo):
    path = edit(repo, "differs.py", scale_file("x * 3.0"))  # its own test (shapes only) still passes
    uri = open_file(client, path)
    found = await until(lambda: warnings(client, uri), timeout=120, what="the base's warning")
    assert len(found) == 1
    warning = found[0]
    assert warning.severity == types.DiagnosticSeverity.Warning
    assert warning.range.start.line == TEST_LINE - 1
    assert warning.message.startswith("outputs differ from HEAD's in test_scale → return: "), warning.message
    assert "elements differ" in warning.message
    assert not errors(client, uri)  # the file's own check passed
    text = await hover(client, uri)
    assert "passes" in text and "**vs HEAD**: outputs differ from HEAD's" in text
    assert any(s.startswith("differs.py: outputs differ from HEAD's") for s in base_statuses(client))
    assert ("differs.py", "HEAD", "outputs differ") in verdicts(client)


async def test_a_comment_only_edit_is_the_same_as_head_without_running(client, repo):
    path = edit(repo, "comment.py", scale_file().replace("    mask = offs < n\n", "    mask = offs < n  # bounds\n"))
    uri = open_file(client, path)
    text = await hover_until(client, uri, "**vs HEAD**")
    assert "**vs HEAD**: same as HEAD" in text
    assert not warnings(client, uri)
    assert "comment.py: same as HEAD" in base_statuses(client)
    assert ("comment.py", "HEAD", "same") in verdicts(client)
    activities = [s.activity or "" for s in client.statuses]
    assert not any("comparing comment.py" in a for a in activities)  # nothing ran against the base


async def test_once_the_base_has_run_a_save_is_compared_in_its_check_s_job_and_probed_after(client, repo):
    """The first comparison runs the base (and keeps its run); a later save's check job also weighs its test outputs
    against the base's: "same test outputs" comes with the check, before the probes' job ("comparing") starts. Outputs
    that differ are left to the full comparison, which warns."""
    path = edit(repo, "probed.py", new_code(1))
    uri = open_file(client, path)
    final = "probed.py: same outputs as HEAD:probed.py"
    await until(lambda: final in base_statuses(client), timeout=120, what="the first comparison")
    first = len(client.statuses)
    path.write_text(new_code(2))
    replace_all(client, uri, new_code(2), version=2)
    save(client, uri)
    await until(lambda: final in [getattr(s, "base", None) for s in client.statuses[first:]], timeout=120,
                what="the second save's comparison")  # fmt: skip
    later = client.statuses[first:]
    said = [(s.activity or "", getattr(s, "base", "") or "") for s in later]
    probing = [i for i, (_, base) in enumerate(said) if "outputs on the test are HEAD:probed.py's" in base]
    assert probing, said
    comparing = [i for i, (activity, _) in enumerate(said) if activity.startswith("comparing probed.py")]
    assert comparing and probing[0] < comparing[0], said  # with the check, before the probes' job
    assert ("probed.py", "HEAD", "same test outputs, probing") in verdicts(client)
    differs = scale_file("x * 3.0")
    path.write_text(differs)
    replace_all(client, uri, differs, version=3)
    save(client, uri)
    found = await until(lambda: warnings(client, uri), timeout=120, what="the third save's warning")
    assert found[0].message.startswith("outputs differ from HEAD's in test_scale"), found[0].message


async def test_a_new_file_says_so_once_and_is_not_compared(client, repo):
    path = edit(repo, "brand_new.py", scale_file("x * 5.0"))
    uri = open_file(client, path)
    text = await hover_until(client, uri, "**vs HEAD**")
    assert "**vs HEAD**: new since HEAD (" in text and "nothing to compare with" in text
    assert not warnings(client, uri) and not errors(client, uri)
    assert len([s for s in set(base_statuses(client)) if s.startswith("brand_new.py: new since HEAD")]) == 1


async def test_a_base_that_fails_its_own_test_is_said_once_and_not_run_again(client, repo):
    path = edit(repo, "broken_base.py", scale_file("x * 4.0"))  # fixes the test, changes the kernel
    uri = open_file(client, path)
    text = await hover_until(client, uri, "**vs HEAD**")
    assert "HEAD:broken_base.py does not pass its own test or import" in text and "checked alone" in text
    assert not warnings(client, uri) and not errors(client, uri)
    compared = len([s for s in client.statuses if "comparing broken_base.py" in (s.activity or "")])
    assert compared == 1
    again = scale_file("x * 4.5")
    path.write_text(again)
    replace_all(client, uri, again, version=2)
    save(client, uri)
    await until(lambda: [s for s in client.statuses if "checking broken_base.py" in (s.activity or "")][1:],
                what="the check of the second save")  # fmt: skip
    await hover_until(client, uri, "does not pass its own test")
    assert len([s for s in client.statuses if "comparing broken_base.py" in (s.activity or "")]) == compared


async def test_a_scripted_gpu_slowdown_shows_in_the_hint_and_as_a_warning(client, repo):
    slower = scale_file().replace("BLOCK=64", "BLOCK=32").replace("cdiv(n, 64)", "cdiv(n, 32)")
    path = edit(repo, "slower.py", slower.replace("def scale(x):", "# latency: 2.0\ndef scale(x):"))
    uri = open_file(client, path)
    found = await until(lambda: warnings(client, uri, "base-slower"), timeout=120, what="the slowdown's warning")
    assert [d.range.start.line for d in found] == [KERNEL_LINE - 1]
    assert found[0].severity == types.DiagnosticSeverity.Warning
    assert found[0].message == "2.00× slower than HEAD [1.96, 2.04]: significantly slower"
    assert not warnings(client, uri)  # the outputs are the base's
    labels = [h.label for h in await hints(client, uri)]
    assert len(labels) == 1 and labels[0].endswith(" · 2.00× slower than HEAD [1.96, 2.04]"), labels
    assert "ms" in labels[0] and "GB/s" in labels[0]
    text = await hover(client, uri)
    assert "**vs HEAD**: same outputs as HEAD:slower.py" in text
    assert "Speed: 2.00x slower than HEAD [0.49, 0.51]: slower (15 paired rounds)" in text
    assert "| `scale(x: float32[98432], y: float32[98432])` | 1 ms ±0.5% | 2 ms ±0.5% | 0.50× |" in text
    await until(lambda: ("slower.py", "HEAD", "2.00× slower") in verdicts(client), what="the speed in the status")
    assert "slower.py: same outputs as HEAD:slower.py; 2.00× slower than HEAD [1.96, 2.04]" in base_statuses(client)


async def test_an_empty_base_setting_turns_the_comparison_off(client, repo):
    uri = (repo.root / "differs.py").as_uri()
    await until(lambda: warnings(client, uri), timeout=120, what="the base's warning")
    configure(client, base="")
    await until(lambda: not warnings(client, uri), what="the warning gone once comparing is off")
    assert "**vs HEAD**" not in await hover(client, uri)
    path = edit(repo, "off.py", scale_file("x * 7.0"))
    off = open_file(client, path)
    await until(lambda: [s for s in client.statuses if "checking off.py" in (s.activity or "")], what="its check")
    await until(lambda: not (client.statuses[-1].busy), what="the server idle")
    assert not warnings(client, off) and "**vs" not in await hover(client, off)
    assert not [s for s in client.statuses if "comparing off.py" in (s.activity or "")]
    configure(client)  # HEAD again: the open documents are compared at once, their checks kept
    await until(lambda: warnings(client, off), timeout=120, what="off.py compared once comparing is on")


async def test_a_later_save_cancels_the_comparison_under_way(client, repo):
    """The base's test takes 3 s; while the first save's comparison (outputs that differ) runs, a second save whose
    kernels compute what the base's do replaces it: the first comparison is cancelled (its job killed), never ends,
    and its warning is never shown. Were it left to run, it would end and say that its outputs differ (a stale
    result that the publisher drops but the log and the status would still tell)."""
    committed = (repo.root / "slow_base.py").read_text()
    path = edit(repo, "slow_base.py", committed.replace("x * 2.0", "x * 3.0"))
    uri = open_file(client, path)
    await until(lambda: [s for s in client.statuses if "comparing slow_base.py" in (s.activity or "")], timeout=120,
                what="the first comparison")  # fmt: skip
    fixed = committed.replace("    mask = offs < n\n", "    mask = n > offs\n")  # the base's outputs again
    path.write_text(fixed)
    replace_all(client, uri, fixed, version=2)
    save(client, uri)
    cancelled = "the comparison of slow_base.py with HEAD:slow_base.py was cancelled after "
    await until(lambda: [m for m in client.log_messages if m.message.startswith(cancelled)], timeout=60,
                what="the first comparison cancelled")  # fmt: skip
    text = await hover_until(client, uri, "**vs HEAD**: same outputs as HEAD:slow_base.py", timeout=180)
    assert "passes" in text
    await asyncio.sleep(8.0)  # long enough for the first comparison (two runs of the 3 s test) to end, had it gone on
    said = [m.message for m in client.log_messages] + base_statuses(client)  # every comparison that ended says so
    assert "slow_base.py: same outputs as HEAD:slow_base.py" in said
    assert not [m for m in said if m.startswith("slow_base.py: outputs differ")], said
    published = [d.message for p in client.published if p.uri == uri for d in p.diagnostics]
    assert not [m for m in published if "outputs differ" in m]
    assert len([m for m in client.log_messages if m.message.startswith(cancelled)]) == 1
