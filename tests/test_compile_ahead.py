"""A check's kernels compiled ahead by a dry pass: who gets one (cores to spare, a GPU), when it starts (a second
into the job, never once the job ended), what it runs (every test case, then the benchmark cases, each seeded, the
compiles started after each), an autotuned launch compiling each of its configs, what the job says of it. The dry pass
itself needs a GPU (its own context beside the job's): measured on the device machine, not here."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from geak.evaluator import check
from geak.evaluator.job import autotuning, process_ties, sandbox, user_code
from geak.evaluator.job.compile import dry_pass
from geak.evaluator.options import EvalOptions
from geak.evaluator.pool import usable_cores
from geak.evaluator.shared.protocol import CheckJob

CASES = """
import pytest, random
import torch
RAN = []

@pytest.mark.parametrize("n", [1, 2, 3])
def test_rows(n):
    RAN.append(("test", n, random.random(), float(torch.rand(1))))
    assert n != 2  # a failing case does not stop the dry pass

def test_performance(tmp_path):
    RAN.append(("benchmark", 0, random.random(), float(torch.rand(1))))
    (tmp_path / "written").write_text("by the benchmark case")

def test_save_results():
    RAN.append(("hook", 0, 0.0, 0.0))
"""


def job_for(path: Path, scratch: Path, **fields: Any) -> CheckJob:
    base = CheckJob(
        kind="check", scratch=str(scratch), path=str(path), module_name="cases_under_dry_pass", tests=["test_rows"],
        test_style="pytest", output_source="return", benchmarks=["test_performance"], wrappers=[],
        outputs_dir=str(scratch / "outputs"), max_calls=8, seed=42, probes=None, repeat_tests=False, poison=False,
        cache=None, cwd=None, probe_stall_s=60.0, stop_kinds=[], compile_workers=8, repository=None,
    )  # fmt: skip
    return replace(base, **fields)


def test_the_caller_gives_a_check_the_cores_its_concurrent_jobs_leave():
    assert check.compile_workers(EvalOptions(backend="interpreter")) == 0
    assert check.compile_workers(EvalOptions(backend="gpu")) == usable_cores()  # one job at a time: the editor
    assert check.compile_workers(EvalOptions(backend="gpu", max_concurrent=4)) == usable_cores() // 4
    busy = EvalOptions(backend="gpu", max_concurrent=8, host_jobs=10 * usable_cores())  # `geak eval`'s slots
    assert check.compile_workers(busy) == 0


def test_no_dry_pass_on_the_interpreter_or_without_cores_to_spare(tmp_path, monkeypatch):
    forks: list[int] = []
    monkeypatch.setattr(process_ties, "fork_process", lambda: forks.append(1) or 1)
    job = job_for(tmp_path / "f.py", tmp_path)
    interpreter = sandbox.RuntimeInfo("interpreter", "cpu", None, "", "")
    gpu = sandbox.RuntimeInfo("cuda", "NVIDIA H200", "90", "", "")
    assert dry_pass.start(job, interpreter) is None
    assert dry_pass.start(replace(job, compile_workers=1), gpu) is None
    monkeypatch.setattr(dry_pass, "idle_cores", lambda: 1)  # the host busy with other work
    assert dry_pass.start(job, gpu) is None
    assert forks == []
    monkeypatch.setattr(dry_pass, "idle_cores", lambda: 16)
    dry = dry_pass.start(job, gpu)
    assert dry is not None and dry.pid == 1 and forks == [1]
    os.close(dry.go_write)

    def no_descriptors():
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_descriptors)  # nothing the dry pass needs may fail the job
    assert dry_pass.start(job, gpu) is None and forks == [1]


def test_the_dry_pass_runs_every_case_then_the_benchmarks_each_seeded_and_starts_compiles_after_each(tmp_path):
    path = tmp_path / "cases.py"
    path.write_text(CASES)
    folder = tmp_path / dry_pass.FOLDER
    folder.mkdir()
    module = user_code.load_module(str(path), "cases_under_dry_pass")
    pumps: list[int] = []
    dry_pass._run_tests(job_for(path, tmp_path), module, folder, lambda: pumps.append(len(module.RAN)), gpu=False)
    kinds = [(kind, n) for kind, n, _, _ in module.RAN]
    assert kinds == [("test", 1), ("test", 2), ("test", 3), ("benchmark", 0)]  # no result-saving hook
    assert len({(r, t) for _, _, r, t in module.RAN}) == 1  # each seeded alike, as in the job
    assert pumps == [1, 2, 3, 4]
    assert (folder / "pytest-tmp").is_dir() and not (tmp_path / "pytest-tmp").exists()  # the job's stays its own


def test_direct_call_tests_run_one_by_one_and_an_error_ends_only_its_own(tmp_path):
    path = tmp_path / "direct.py"
    path.write_text(
        "RAN = []\ndef test_a():\n    RAN.append('a')\n    raise ValueError\ndef test_b():\n    RAN.append('b')\n"
    )
    module = user_code.load_module(str(path), "direct_under_dry_pass")
    pumps: list[int] = []
    job = job_for(path, tmp_path, test_style="call", tests=["test_a", "test_b"], benchmarks=[])
    dry_pass._run_tests(job, module, tmp_path, lambda: pumps.append(1), gpu=False)
    assert module.RAN == ["a", "b"] and pumps == [1, 1]


def test_an_autotuned_launch_within_the_dry_pass_compiles_each_config_alone():
    class Tuner:
        def __init__(self) -> None:
            self.configs = ["c1", "c2", "c3"]

    ran: list[list[str]] = []

    def original(tuner, *args, **kwargs):
        ran.append(list(tuner.configs))
        if tuner.configs == ["c2"]:
            raise RuntimeError("out of resources")  # left to the job's tuning, which says why

    tuner = Tuner()
    assert autotuning._every_config_run(tuner, original, (), {}) is None
    assert ran == [["c1"], ["c2"], ["c3"]] and tuner.configs == ["c1", "c2", "c3"]


def test_the_dry_pass_waits_for_the_jobs_context_and_never_starts_when_the_job_ends_first(tmp_path, monkeypatch):
    monkeypatch.setattr(dry_pass, "idle_cores", lambda: 16)
    ran = lambda job, info, workers: Path(job.scratch, "ran").write_text(str(workers))
    monkeypatch.setattr(dry_pass, "_dry_pass", ran)
    gpu = sandbox.RuntimeInfo("cuda", "NVIDIA H200", "90", "", "")
    dry = dry_pass.start(job_for(tmp_path / "f.py", tmp_path), gpu)
    time.sleep(0.3)
    assert dry is not None and not (tmp_path / "ran").exists()  # the job opens its GPU context first
    dry.go(after_s=0.2)
    assert os.waitstatus_to_exitcode(os.waitpid(dry.pid, 0)[1]) == 0
    assert (tmp_path / "ran").read_text() == "8"
    (tmp_path / "late").mkdir()
    late = dry_pass.start(job_for(tmp_path / "f.py", tmp_path / "late"), gpu)
    assert late is not None
    late.go(after_s=5.0)
    late.stop()  # the job ended first (a warm check): the dry pass never runs
    with contextlib.suppress(ChildProcessError):
        os.waitpid(late.pid, 0)
    assert not (tmp_path / "late" / "ran").exists()


def test_the_job_says_what_its_dry_pass_did_and_nothing_without_a_tally(tmp_path):
    folder = tmp_path / dry_pass.FOLDER
    folder.mkdir()
    assert dry_pass.said(str(tmp_path)) == ""
    dry_pass._write_tally(folder, {"workers": 12, "cases": 40, "compiles": 90})
    assert dry_pass.said(str(tmp_path)) == "compiling ahead: 40 case(s) run dry, 90 compile(s) asked for, not all done"
    dry_pass._write_tally(folder, {"workers": 12, "cases": 56, "compiles": 168, "compiled": 160, "seconds": 31.04})
    assert (
        dry_pass.said(str(tmp_path))
        == "compiled ahead: 56 case(s) run dry, 160 of 168 compile(s) in 31.0 s (12 processes)"
    )
    dry_pass._write_tally(folder, {"error": "RuntimeError: CUDA error: initialization error"})
    assert dry_pass.said(str(tmp_path)) == (
        "nothing compiled ahead: the dry pass failed (RuntimeError: CUDA error: initialization error)"
    )
    (folder / dry_pass.TALLY).write_text('{"cases": "many"}')  # the job's own folder: read with care
    assert dry_pass.said(str(tmp_path)) == ""


def test_a_dry_pass_that_fails_says_why_in_the_jobs_progress(tmp_path, monkeypatch):
    def broken(job, info, workers):
        raise RuntimeError("CUDA error: initialization error")

    monkeypatch.setattr(dry_pass, "idle_cores", lambda: 16)
    monkeypatch.setattr(dry_pass, "_dry_pass", broken)
    dry = dry_pass.start(job_for(tmp_path / "f.py", tmp_path), sandbox.RuntimeInfo("cuda", "H200", "90", "", ""))
    assert dry is not None
    dry.go(after_s=0.0)
    assert os.waitstatus_to_exitcode(os.waitpid(dry.pid, 0)[1]) == 1
    assert "the dry pass failed (RuntimeError: CUDA error: initialization error)" in dry_pass.said(str(tmp_path))
