"""The language server's pure parts: positions, source analysis, settings, the engine thread's cancellation, the
scheduling of checks."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from lsprotocol import types

from geak.evaluator.api import EvalOptions
from geak.server.lsp.analysis import analyze, content_key
from geak.server.lsp.checks import CheckHooks, CheckManager, FileReport
from geak.server.lsp.engine import Engine
from geak.server.lsp.positions import Positions
from geak.server.lsp.settings import Settings, SettingsError, agent_config, parse_settings, read_workspace_file

KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x * 2


@triton.jit
def kern(X, n, BLOCK: tl.constexpr):
    offs = tl.arange(start=0, end=48)
    tl.store(X + offs, helper(tl.load(X + offs)))


@triton.jit
def orphan(X):
    pass


def run(x):
    kern[(1,)](x, x.numel(), BLOCK=64)
"""


def test_positions_are_utf16_and_clamped():
    text = 'x = "😋"; y = 1\nsecond line\n'
    p = Positions(text)
    r = p.line_range(1, 10)  # `y`: 1-based column 10 in characters
    assert r.start == types.Position(0, 10)  # character 9, after an emoji of two UTF-16 units
    assert p.line_range(99).start.line == 1  # past the end: the last line
    assert p.line_range(2).end == types.Position(1, len("second line"))
    assert p.line_block(0, 2) == types.Range(types.Position(0, 0), types.Position(2, 0))
    no_newline = Positions("a\nb")
    assert no_newline.line_block(1, 2).end == types.Position(1, 1)  # the end of the last line


def test_static_problems():
    model = analyze(KERNEL, "k.py")
    codes = {p.code: p for p in model.problems}
    assert codes["arange-power-of-two"].line == 12 and "48 elements" in codes["arange-power-of-two"].message
    assert codes["kernel-unused"].message.startswith("kernel orphan")  # helper is called from kern: fine
    assert codes["no-test"].severity == "warning"
    assert [p.code for p in model.problems].count("kernel-unused") == 1
    assert model.kernel_at(12).name == "kern" and model.kernel_at(10).name == "kern"  # decorator line included
    assert model.kernel_at(22) is None
    assert not analyze("print('hello')\n", "p.py").triton
    broken = analyze("import triton\n@triton.jit\ndef k(:\n", "b.py")
    assert broken.triton and broken.problems[0].code == "syntax"
    assert not analyze("triton jit \x00", "nul.py").kernels  # never raises


def test_settings_validation_and_precedence(tmp_path: Path):
    settings, notes = parse_settings({"model": "m", "iterations": 5, "pythonPath": "/x", "colour": 1})
    assert settings.model == "m" and notes == ["unknown setting geak.colour ignored"]
    with pytest.raises(SettingsError, match=r"geak\.device"):
        parse_settings({"device": "tpu"})
    with pytest.raises(SettingsError, match="must be an object"):
        parse_settings([1])
    (tmp_path / "pyproject.toml").write_text('[tool.geak]\nmax_iteration = 7\noutput_path = "runs"\nparallel = 2\n')
    data, source = read_workspace_file(tmp_path)
    assert source.endswith("[tool.geak]")
    config = agent_config(Settings(), data, source, tmp_path)
    assert config.max_iteration == 7 and config.parallel == 2 and config.output_path == tmp_path / "runs"
    config = agent_config(Settings(iterations=4), data, source, tmp_path)  # changed in the editor: it wins
    assert config.max_iteration == 4
    (tmp_path / "geak.yaml").write_text("max_iteration: 9\n")  # geak.yaml comes before pyproject.toml
    assert read_workspace_file(tmp_path)[0] == {"max_iteration": 9}


def test_engine_cancellation_waits_for_the_unwinding():
    engine = Engine()
    unwound: list[float] = []

    async def job():
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.3)  # like killing a job process
            unwound.append(time.monotonic())

    async def main():
        task = asyncio.ensure_future(engine.run(job()))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    try:
        returned = asyncio.run(main())
        assert unwound and unwound[0] <= returned
        assert asyncio.run(_result(engine)) == 42
    finally:
        engine.close()


async def _result(engine: Engine) -> int:
    async def answer():
        return 42

    return await engine.run(answer())


class _Checks:
    """A CheckManager whose checks only count (no evaluator)."""

    def __init__(self) -> None:
        self.engine = Engine()
        self.runs: list[str] = []

        async def trusted() -> bool:
            return True

        def ignore(*_args) -> None:
            pass

        self.manager = CheckManager(self.engine, CheckHooks(trusted, ignore, ignore, ignore), EvalOptions())
        self.manager._check = self._check  # type: ignore[method-assign]

    async def _check(self, path: str, text: str, key: str, module=None, base=None) -> FileReport:
        self.runs.append(key)
        await asyncio.sleep(0.05)
        return FileReport(key, time.time(), error="not run")


URI, PATH = "file:///w/add.py", "/w/add.py"


def test_a_save_right_after_a_check_request_joins_it():
    checks = _Checks()

    async def main():
        loop = asyncio.get_running_loop()
        checked: asyncio.Future = loop.create_future()
        checks.manager.request(URI, PATH, "text", timing=False, debounce=False, checked=checked)
        checks.manager.request(URI, PATH, "text", timing=False)  # the editor's save, before the check has started
        return await asyncio.wait_for(checked, 5)

    try:
        assert asyncio.run(main()).key == content_key("text")
        assert checks.runs == [content_key("text")]
    finally:
        checks.engine.close()


def test_a_check_request_cancelled_before_it_starts_is_answered():
    checks = _Checks()

    async def main():
        checked: asyncio.Future = asyncio.get_running_loop().create_future()
        checks.manager.request(URI, PATH, "text", timing=False, debounce=False, checked=checked)
        checks.manager.cancel(URI)  # an edit, before the check has started
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(checked, 5)

    try:
        asyncio.run(main())
        assert checks.runs == []
    finally:
        checks.engine.close()


def test_serve_refuses_a_bad_tcp_address(capsys):
    from geak.server.cli.entry import main

    assert main(["serve", "--tcp", "localhost"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err
