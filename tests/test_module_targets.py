"""A repository's module as a target beside a file, on Triton's CPU interpreter: limits on its cases (sampled the same
way every run, a budget, what was left out said), its test files in jobs at once, `--base REV` and `--changed` with
its version at the base as the reference, the calls its tests make captured for a timing or screening (backward passes
included), and `geak optimize MODULE` without a model: the launch search on the module with the repository's tests as
the judge, every case of them for a proposal."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import torch
from git_repos import new_repo

from geak.agent.config import AgentConfig
from geak.agent.evaluation import CandidateEvaluator
from geak.agent.session import OptimizeSession
from geak.evaluator import EvalOptions, Evaluator, cases_run, check_module_in_jobs, module_tests
from geak.evaluator.job.case_limits import spread
from geak.evaluator.module_shards import shards
from geak.server.cli.entry import main

FIXTURES = Path(__file__).parent / "fixtures" / "repos"
CANDIDATES = FIXTURES / "candidates"
MODULE = Path("src/tinyops/ops/scale.py")
CPU = ("--backend", "interpreter")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
# a second test file reaching the module (through the layer), for the tests split over jobs
MORE_TESTS = """import torch

from tinyops import Scaler


def test_scaler_forward(rows):
    x = torch.randn(rows, 10)
    torch.testing.assert_close(Scaler(0.5)(x), x * 0.5)
"""


@pytest.fixture
def repo(tmp_path) -> Path:
    return shutil.copytree(FIXTURES / "tinyops", tmp_path / "tinyops")


def options(**limits) -> EvalOptions:
    return EvalOptions(backend="interpreter", spares=0, compile_cache=None, timeout_s=240, **limits)


def check(repo: Path, candidate: str | None = None, against_original: bool = False, jobs: int = 1, **limits):
    target = module_tests(repo / MODULE)
    source = (CANDIDATES / candidate).read_text() if candidate else None

    async def run():
        async with Evaluator(options(max_concurrent=jobs, **limits), readable=(str(repo),)) as evaluator:
            against = repo / MODULE if against_original else None
            return await check_module_in_jobs(evaluator, target, jobs, source=source, against=against)

    return asyncio.run(run())


def geak(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    said = capsys.readouterr()
    return code, said.out, said.err


# ------------------------------------------------------------------------------------------- limits on the cases


def test_the_sampled_cases_are_the_first_the_last_and_evenly_between():
    assert spread(6, 2) == [0, 5] and spread(6, 4) == [0, 2, 3, 5] and spread(9, 3) == [0, 4, 8]
    assert spread(3, 5) == [0, 1, 2] and spread(5, 1) == [0]


def test_cases_are_sampled_the_same_way_every_run_spread_over_the_parameters_and_said(repo):
    first = check(repo, cases_per_test=2)
    again = check(repo, cases_per_test=2)
    assert first.ok, first.message
    ran = [t.name for t in first.tests if t.kind == "pass"]
    assert ran == [t.name for t in again.tests if t.kind == "pass"]  # deterministic
    # test_scale's 6 cases (factor × cols): its first and last; test_scaler_backward's one case
    assert sorted(ran) == ["tests/test_scale.py::test_scale[0.5-5]", "tests/test_scale.py::test_scale[3.0-130]",
                           "tests/test_scale.py::test_scaler_backward"]  # fmt: skip
    left = [t for t in first.tests if t.kind == "left out"]
    assert len(left) == 4 and all("not sampled (2 of the 6 cases" in t.message for t in left)
    assert "(4 left out)" in first.message
    said = cases_run(first.tests)
    assert said.startswith("ran 3 of 7 selected case(s); left out: 4 not sampled (")


def test_a_budget_runs_the_first_case_and_leaves_out_the_rest_saying_so(repo):
    result = check(repo, tests_budget_s=1e-6)
    assert result.ok, result.message  # what ran passed; nothing failed for the budget
    kinds = [t.kind for t in result.tests]
    assert kinds.count("pass") == 1 and kinds.count("left out") == 6
    assert all("past the budget" in t.message for t in result.tests if t.kind == "left out")
    assert cases_run(result.tests, 1e-6).startswith("ran 1 of 7 selected case(s) within 1e-06 s; left out: 6 past")


def test_a_wrong_candidate_is_still_caught_on_the_sampled_cases(repo):
    result = check(repo, "scale_wrong.py", against_original=True, cases_per_test=2)
    assert not result.ok
    assert "tests/test_scale.py::test_scaler_backward" in {t.name for t in result.tests if not t.ok}


def test_every_case_runs_for_a_target_that_asks_whatever_the_limits(repo):
    target = module_tests(repo / MODULE).with_every_case()

    async def run():
        async with Evaluator(options(cases_per_test=1, tests_budget_s=1e-6), readable=(str(repo),)) as evaluator:
            return await evaluator.check_module(target)

    result = asyncio.run(run())
    assert result.ok and len(result.tests) == 7 and all(t.kind == "pass" for t in result.tests)


def test_geak_check_module_with_a_budget_says_what_ran_and_what_was_left_out(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    code, out, err = geak(capsys, "-v", "check", str(MODULE), "--cases-per-test", "1", *CPU)
    assert code == 0, out + err
    assert "tinyops.ops.scale in " in err and "test(s) found through imports" in err  # what was found, and why
    assert "ran 2 of 7 selected case(s); left out: 5 not sampled (" in err
    code, out, err = geak(capsys, "check", str(MODULE), "--budget-s", "1000", "--json", *CPU)
    found = json.loads(out)["repository_tests"]
    assert found["cases_per_test"] == 4 and found["budget_s"] == 1000  # a budget samples 4 cases a test by default
    assert found["ran"].startswith("ran 5 of 7 selected case(s) within 1000 s; left out: 2 not sampled")
    assert [t["node"] for t in found["left_out"]] == ["tests/test_scale.py::test_scale[0.5-64]",
                                                      "tests/test_scale.py::test_scale[3.0-64]"]  # fmt: skip
    with pytest.raises(SystemExit) as refused:
        main(["check", str(MODULE), "--cases-per-test", "0", *CPU])
    assert refused.value.code == 2 and "not a whole number of at least 1" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- jobs at once


def test_test_files_are_split_over_jobs_and_one_verdict_made_of_theirs(repo):
    (repo / "tests" / "test_layers.py").write_text(MORE_TESTS)
    target = module_tests(repo / MODULE)
    parts = shards(target, 4)
    files = [sorted({t.node.partition("::")[0] for t in p.tests}) for p in parts]
    assert files == [["tests/test_scale.py"], ["tests/test_layers.py"]]  # the larger file first
    assert shards(target, 1) == [target]
    result = check(repo, jobs=2)
    assert result.ok, result.message
    assert "(2 jobs at once, by test file)" in result.message and len(result.tests) == 8
    wrong = check(repo, "scale_wrong.py", against_original=True, jobs=2)
    assert not wrong.ok and "(2 jobs at once, by test file)" in wrong.message
    assert {"tests/test_layers.py::test_scaler_forward", "tests/test_scale.py::test_scaler_backward"} <= {
        t.name for t in wrong.tests if not t.ok
    }


# ------------------------------------------------------------------------------------------- --base and --changed


@pytest.fixture
def git_repo(repo, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(repo.parent))
    made = new_repo(repo)
    made.commit("the fixture repository")
    monkeypatch.chdir(repo)
    return made


def test_check_module_base_catches_a_candidate_right_only_at_the_tests_sizes(git_repo, capsys):
    git_repo.write(str(MODULE), (CANDIDATES / "scale_wrong_past_tests.py").read_text())
    code, out, err = geak(capsys, "check", str(MODULE), *CPU)
    assert code == 0, out + err  # the repository's tests alone pass it
    code, out, err = geak(capsys, "check", str(MODULE), "--base", "HEAD", "--json", *CPU)
    assert code == 1, err
    (file,) = json.loads(out)["files"]
    assert file["verdict"] == "fail" and file["message"].startswith(f"against HEAD:{MODULE}: output differs")
    result = file["result"]
    assert result["reference"] == f"HEAD:{MODULE}" and not result["comparison"]["ok"]
    assert all(t["kind"] == "pass" for t in result["tests"])  # the repository's tests ran with the candidate


def test_check_module_base_passes_a_right_candidate(git_repo, capsys):
    git_repo.write(str(MODULE), (CANDIDATES / "scale_right.py").read_text())
    code, out, err = geak(capsys, "check", str(MODULE), "--base", "HEAD", "--json", *CPU)
    assert code == 0, err
    (file,) = json.loads(out)["files"]
    assert file["verdict"] == "pass" and file["message"] == f"same outputs as HEAD:{MODULE}"
    assert file["result"]["comparison"]["fresh_calls"] > 0
    assert {t["name"] for t in file["result"]["tests"]} >= {"tests/test_scale.py::test_scaler_backward"}


def test_changed_includes_a_changed_module_judged_by_its_repositorys_tests(git_repo, capsys):
    git_repo.write(str(MODULE), (CANDIDATES / "scale_wrong.py").read_text())
    git_repo.write("src/tinyops/ops/add.py", (git_repo.root / "src/tinyops/ops/add.py").read_text() + "# a note\n")
    git_repo.write("src/tinyops/ops/orphan.py", "import triton\n\n\n@triton.jit\ndef _k(x):\n    pass\n")
    code, out, err = geak(capsys, "check", "--changed", "--json", *CPU)
    assert code == 1, err
    by_name = {Path(f["file"]).name: f for f in json.loads(out)["files"]}
    assert sorted(by_name) == ["add.py", "orphan.py", "scale.py"]
    assert by_name["scale.py"]["verdict"] == "fail" and "tests/test_scale.py::" in by_name["scale.py"]["message"]
    assert by_name["add.py"]["verdict"] == "same"
    orphan = by_name["orphan.py"]  # kernels and no test that reaches them: said, never passed
    assert orphan["verdict"] == "bad input" and "no test of tinyops.ops.orphan found" in orphan["message"]


# ------------------------------------------------------------------------------------------- bench and optimize


def test_a_screening_of_the_module_runs_the_calls_its_tests_make_backward_passes_included(repo):
    """The capture a timing shares (``bench_capture``): the repository's tests with the reference in the module's
    place, and each variant beside it in its package replaying those calls."""
    target = module_tests(repo / MODULE)
    right, wrong = (CANDIDATES / "scale_right.py").read_text(), (CANDIDATES / "scale_wrong.py").read_text()

    async def run():
        async with Evaluator(options(), readable=(str(repo),)) as evaluator:
            return await evaluator.screen(repo / MODULE, [right, wrong], deadline_s=120, module=target)

    result = asyncio.run(run())
    calls = [c.signature for c in result.calls]
    assert "scale(f32[3,64], 3.0)" in calls  # a case of the parametrized test
    # test_scaler_backward: its forward through the autograd.Function, its backward's call of the wrapper
    assert {"ScaleFunction.apply(f32[3,33], 2.0)", "scale(f32[3,33], 2.0)"} <= set(calls), calls
    assert {v.label: v.status for v in result.variants} == {"v1": "ok", "v2": "wrong"}


def test_geak_bench_module_checks_it_by_its_tests_and_needs_a_gpu_to_time(repo, capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a machine without a GPU")
    monkeypatch.chdir(repo)
    code, out, err = geak(capsys, "bench", str(MODULE), "--json", *CPU)
    assert code == 2, err
    data = json.loads(out)
    assert data["check"]["ok"] and "needs a GPU" in data["message"]
    assert data["repository_tests"]["module"] == "tinyops.ops.scale"


@needs_gpu
def test_geak_bench_module_times_the_calls_its_tests_make(repo, capsys, monkeypatch):
    tests = repo / "tests" / "test_scale.py"  # the fixture's inputs on the GPU
    tests.write_text(tests.read_text().replace("torch.randn(rows, cols)", "torch.randn(rows, cols, device='cuda')"))
    monkeypatch.chdir(repo)
    code, out, err = geak(capsys, "bench", str(MODULE), "--against", str(CANDIDATES / "scale_right.py"), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ok"] and data["speedup"] is not None
    # the parametrized cases' calls, and test_scaler_backward's forward (the autograd.Function) and backward
    assert {"scale", "ScaleFunction.apply"} == {c["wrapper"] for c in data["calls"]}


def test_optimize_module_without_a_model_screens_its_launch_configurations_by_its_tests(repo, tmp_path):
    target = module_tests(repo / MODULE)
    cfg = AgentConfig(search_time_s=60, output_path=tmp_path / "runs")
    session = OptimizeSession(repo / MODULE, cfg, backend="interpreter", module=target)
    result = asyncio.run(session.run())
    assert result.search and result.search["screened"] > 0 and result.search["correct"] == result.search["screened"]
    assert "timing needs a GPU" in result.message or not result.improved


def test_a_proposal_is_confirmed_by_every_case_whatever_the_evaluators_limits(repo):
    target = module_tests(repo / MODULE)

    async def run():
        limited = options(cases_per_test=1, tests_budget_s=1e-6)
        async with Evaluator(limited, readable=(str(repo),)) as evaluator:
            candidates = CandidateEvaluator(evaluator, repo / MODULE, module=target)
            await candidates.start()
            return await candidates.evaluate((CANDIDATES / "scale_right.py").read_text())

    evaluation = asyncio.run(run())
    assert evaluation.ok, evaluation.message
    assert "7 test(s) passed; outputs match the reference" in evaluation.message


def test_optimize_module_with_a_model_judges_each_candidate_by_the_repositorys_tests(repo, scripted_llm, tmp_path):
    wrong, right = (CANDIDATES / "scale_wrong.py").read_text(), (CANDIDATES / "scale_right.py").read_text()
    scripted_llm.reply(f"Analysis: memory bound.\n\n```python\n{wrong}```\n")  # round 1: generate
    scripted_llm.reply(f"## Reflection\nThe store adds a stray term.\n\n```python\n{right}```\n")  # round 2: reflect
    cfg = AgentConfig(model_id="scripted-model", base_url=scripted_llm.base_url, max_iteration=2, search=False,
                      output_path=tmp_path / "runs", max_retries=1, timeout_s=5.0, one_shot=False)  # fmt: skip
    session = OptimizeSession(repo / MODULE, cfg, backend="interpreter", module=module_tests(repo / MODULE))
    result = asyncio.run(session.run())
    first, fixed = result.candidates
    assert not first.passed and "tests/test_scale.py::" in first.evaluation.message
    assert fixed.passed and "7 test(s) passed; outputs match the reference" in fixed.evaluation.message
    prompt = scripted_llm.requests[0]["messages"][-1]["content"]  # the model is shown the tests that judge it
    assert "# tests/test_scale.py\n" in prompt and "def test_scaler_backward(rows):" in prompt
    assert "def _inputs(rows, cols):" in prompt and "def test_plain_torch" not in prompt
