"""`geak check` over several files and folders: one warm evaluator, a summary, --against-self, exit codes."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from interrupts import slow_add_native, start_interruptible

FIXTURES = Path(__file__).parent / "fixtures"
SUITE = Path(__file__).resolve().parents[2] / "shared" / "suites" / "tritonbench_revised" / "TritonBench_G_v1"


def geak(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "geak.server.cli", "check", *args, "--backend", "interpreter"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_folder_against_self_summary_and_exit_code(tmp_path):
    for name in ("add_native.py", "unseeded_tritonbench.py", "wrong_output.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "notes.py").write_text("print('not a Triton file')\n")  # skipped: no kernel
    p = geak(str(tmp_path), "--against-self", "--json", "--jobs", "2")
    data = json.loads(p.stdout)
    verdicts = {Path(f["file"]).name: f for f in data["files"]}
    assert set(verdicts) == {"add_native.py", "unseeded_tritonbench.py", "wrong_output.py"}
    assert verdicts["add_native.py"]["verdict"] == "pass"
    assert verdicts["unseeded_tritonbench.py"]["verdict"] == "pass"
    assert verdicts["unseeded_tritonbench.py"]["alone"]["stage"] == "call"  # asserts nothing on its own
    assert verdicts["wrong_output.py"]["verdict"] == "fail"  # its own test fails: no comparison needed
    assert data["summary"] == {"files": 3, "pass": 2, "fail": 1, "not checkable": 0, "bad input": 0}
    assert p.returncode == 1


def test_not_checkable_files_are_counted_apart_and_exit_3_without_failures():
    p = geak(str(FIXTURES / "add_native.py"), str(FIXTURES / "interp" / "inline_asm.py"), "--json")
    data = json.loads(p.stdout)
    assert data["summary"] == {"files": 2, "pass": 1, "fail": 0, "not checkable": 1, "bad input": 0}
    assert "inline assembly" in data["files"][1]["result"]["not_checkable"]
    assert p.returncode == 3


def test_many_files_table_and_all_pass_exit_0():
    p = geak(str(FIXTURES / "add_native.py"), str(FIXTURES / "scatter_unique.py"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 files: 2 pass" in p.stdout


def test_no_triton_file_is_bad_input(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    p = geak(str(tmp_path))
    assert p.returncode == 2 and "no Triton file" in p.stderr


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/suites (the benchmark suites) is not beside this clone")
def test_unseeded_golden_tritonbench_files_match_themselves():
    """Golden files drawing unseeded torch.randn used to differ from themselves; seeded, they match."""
    names = ("cosine_compute.py", "relu_triton_kernel.py", "dropout_triton.py", "embedding_triton_kernel.py")
    p = geak(*(str(SUITE / n) for n in names), "--against-self", "--json", "--timeout", "120")
    data = json.loads(p.stdout)
    assert data["summary"]["pass"] == len(names), [(f["file"], f["message"][:300]) for f in data["files"]]


def test_against_self_runs_a_passing_file_twice_and_a_failing_one_once():
    """The file's run as its own reference is also its check alone: no third job."""
    import asyncio

    from geak.evaluator.api import EvalOptions, Evaluator

    async def jobs(name: str) -> tuple[int, bool, bool]:
        options = EvalOptions(backend="interpreter", timeout_s=60, spares=0)
        async with Evaluator(options) as ev:
            alone, against = await ev.check_against_self(FIXTURES / name)
            return ev.pool.jobs_run, alone.ok, against is not None and against.ok

    assert asyncio.run(jobs("add_native.py")) == (2, True, True)
    assert asyncio.run(jobs("wrong_output.py")) == (1, False, False)


def test_against_self_the_files_slowest_here_before_start_first_and_verdicts_keep_their_order(tmp_path):
    import asyncio

    from geak.evaluator import reference_costs
    from geak.evaluator.api import EvalOptions, Evaluator
    from geak.server.cli.check_many import check_many

    kept = tmp_path / "kept"
    options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, compile_cache=str(kept), max_concurrent=1)
    files = [FIXTURES / "add_native.py", FIXTURES / "wrong_output.py"]
    first: list[Path] = []

    def on_progress(file: Path, message: str) -> None:
        first.append(file)

    asyncio.run(check_many(files, options, against_self=True))  # each file's own run recorded
    costs = reference_costs.load(str(kept))
    assert len(costs) == 2, costs
    for key, seconds in zip(costs, (1000.0, 1.0), strict=True):  # one made slow, whichever it is
        reference_costs.record(str(kept), key, seconds)

    async def slowest() -> Path:
        async with Evaluator(options) as ev:
            known = ev.known_reference_seconds(files)
        return max(known, key=known.__getitem__)

    slow = asyncio.run(slowest())
    given = [f for f in files if f != slow] + [slow]  # the slow one given last
    verdicts = asyncio.run(check_many(given, options, against_self=True, on_progress=on_progress))
    assert first[0] == slow, first  # started first
    assert [Path(v.file) for v in verdicts] == given  # reported in the order given
    assert [v.verdict for v in verdicts] == ["pass" if f.name == "add_native.py" else "fail" for f in given]


def test_against_self_each_files_run_is_forgotten_once_it_is_checked(monkeypatch):
    """A suite against itself keeps no file's outputs once that file is checked (otherwise every reference's outputs
    would sit on disk until the end of the suite)."""
    import asyncio

    from geak.evaluator.api import EvalOptions, Evaluator
    from geak.server.cli.check_many import check_many

    forgotten: list[str] = []
    left: list[list[Path]] = []
    forget = Evaluator.forget_reference

    async def logged(self, file):
        await forget(self, file)
        forgotten.append(Path(file).name)
        left.append(list(self._scratch.iterdir()))

    monkeypatch.setattr(Evaluator, "forget_reference", logged)
    options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, max_concurrent=1)
    files = [FIXTURES / "add_native.py", FIXTURES / "wrong_output.py"]
    verdicts = asyncio.run(check_many(files, options, against_self=True))
    assert [v.verdict for v in verdicts] == ["pass", "fail"]
    assert sorted(forgotten) == ["add_native.py", "wrong_output.py"] and left == [[], []], (forgotten, left)


def test_ctrl_c_shows_the_files_checked_so_far(tmp_path):
    """A long batch stopped with Ctrl-C still reports what it finished (the JSON says it stopped), exit 130."""
    (tmp_path / "fast").mkdir()
    (tmp_path / "slow").mkdir()
    shutil.copy(FIXTURES / "add_native.py", tmp_path / "fast" / "add_native.py")
    slow_add_native(tmp_path / "slow", seconds=300.0)
    proc = start_interruptible("-v", "check", str(tmp_path), "--backend", "interpreter", "--json", "--jobs", "2")
    ended = threading.Event()
    err: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "add_native.py: pass" in line and "fast" in line:  # the fast file's verdict (the slow one sleeps 300 s)
                ended.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    assert ended.wait(240), "".join(err)
    proc.send_signal(signal.SIGINT)
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.wait(timeout=60) == 130
    reader.join(10)
    data = json.loads(out)
    assert data["stopped"] and [Path(f["file"]).parent.name for f in data["files"]] == ["fast"]
    assert data["summary"]["files"] == 1 and data["summary"]["pass"] == 1
    assert err[-1] == "geak check: stopped; 1 of 2 file(s) checked\n", "".join(err[-5:])
