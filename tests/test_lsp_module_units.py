"""The language server's pieces for a module of a repository, without a server: finding its tests and forgetting them
when a file that concerns them changes, where a failing test is shown (its file, its `def` line, the kernels as
related information), the module's summary and problems, merging per test file, an evaluator per repository with
the budget setting, and a `[tool.geak.tests]` table that the agent's configuration must not see."""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from geak.evaluator import CheckResult, EvalOptions
from geak.evaluator.results import TestOutcome
from geak.server.lsp.analysis import analyze
from geak.server.lsp.checks import FileReport
from geak.server.lsp.engine import Engine
from geak.server.lsp.module_diagnostics import FailedTest, ModuleDiagnostics, definition_lines, failed_tests
from geak.server.lsp.modules import NOT_A_MODULE, ModuleLimits, ModuleTargets, RepositoryEvaluators, find_module
from geak.server.lsp.positions import Positions
from geak.server.lsp.publishing import module_diagnostics, module_problems
from geak.server.lsp.settings import SettingsError, parse_settings, read_workspace_file
from geak.server.lsp.state import module_limits

REPOS = Path(__file__).parent / "fixtures" / "repos"
MODULE = "src/tinyops/ops/scale.py"


@pytest.fixture
def repo(tmp_path) -> Path:
    return shutil.copytree(REPOS / "tinyops", tmp_path / "tinyops")


def failed(name: str, launches: dict[str, int] | None = None) -> TestOutcome:
    return TestOutcome(name, False, "AssertionError: not close\nmore", "assert", launches=launches or {})


def check_of(*tests: TestOutcome, file: str = "") -> CheckResult:
    ok = all(t.ok for t in tests)
    return CheckResult(ok, "pass" if ok else "exec", "interpreter", file, "done", tests=tests)


def test_a_modules_tests_are_found_and_a_file_without_a_repository_says_why(repo, tmp_path):
    found = find_module(str(repo / MODULE))
    assert found.target is not None and found.target.root == str(repo)
    assert found.target.test_files == {repo / "tests/test_scale.py"}
    (tmp_path / "alone.py").write_text((repo / MODULE).read_text())
    assert "alone.py: no repository around it (no pyproject.toml" in find_module(str(tmp_path / "alone.py")).problem
    (repo / "tests/test_own.py").write_text("def test_x():\n    pass\n")
    assert find_module(str(repo / "tests/test_own.py")).problem == NOT_A_MODULE  # no kernel: not a module


@pytest.mark.asyncio
async def test_a_change_of_a_test_or_configuration_file_forgets_and_rechecks_only_its_modules(repo):
    targets = ModuleTargets()
    module = str(repo / MODULE)
    add = str(repo / "src/tinyops/ops/add.py")
    assert (await targets.find(module)).target is not None and (await targets.find(add)).target is not None
    assert targets.changed(str(repo / "tests/test_scale.py")) == [module]  # scale's test file, not add's...
    assert targets.known(module) is None and targets.known(add) is None  # ...though it may now test add: look again
    assert targets.changed(str(repo / "tests/test_scale.py")) == []  # the same change again (the watcher's event)
    await targets.find(module)
    await targets.find(add)
    conftest = repo / "tests/conftest.py"
    conftest.write_text(conftest.read_text() + "\n")
    os.utime(conftest, ns=(1, 1))
    assert sorted(targets.changed(str(conftest))) == sorted([module, add])  # fixtures of every module's tests
    await targets.find(module)
    new = repo / "tests/test_new.py"
    new.write_text("def test_y():\n    pass\n")
    assert targets.changed(str(new)) == [] and targets.known(module) is None  # looked for again next time


def test_failing_cases_show_once_per_test_function_with_the_kernels_they_launched(repo):
    target = find_module(str(repo / MODULE)).target
    text = (repo / MODULE).read_text()
    model = analyze(text, str(repo / MODULE))
    uri = (repo / MODULE).as_uri()
    check = check_of(
        failed("tests/test_scale.py::test_scale[0.5-5]", {"_scale_kernel": 1}),
        failed("tests/test_scale.py::test_scale[3.0-64]", {"_scale_kernel": 1}),
        TestOutcome("tests/test_scale.py::test_scale[0.5-64]", True),
        failed("tests/test_scale.py::test_scaler_backward"),
        failed("tests/test_gone.py::test_z"),  # its file is not there: shown only in the summary
    )
    lines = definition_lines(repo, [t.name for t in check.tests if not t.ok])
    tests = (repo / "tests/test_scale.py").read_text().splitlines()
    assert lines["tests/test_scale.py::test_scale[3.0-64]"] == (repo / "tests/test_scale.py",
                                                                tests.index("def test_scale(rows, cols, factor, "
                                                                            "check_close):") + 1)  # fmt: skip
    assert "tests/test_gone.py::test_z" not in lines
    found = failed_tests(check, target, uri, model, Positions(text), lines)
    assert [f.message for f in found] == [
        "test_scale[0.5-5] (and 1 more case) fails with tinyops.ops.scale as saved: AssertionError: not close",
        "test_scaler_backward fails with tinyops.ops.scale as saved: AssertionError: not close",
    ]
    assert all(f.uri == (repo / "tests/test_scale.py").as_uri() for f in found)
    assert [r.message for r in found[0].related] == [
        "kernel _scale_kernel of tinyops.ops.scale (launched by this test)"
    ]
    assert [r.message for r in found[1].related] == ["kernel _scale_kernel of tinyops.ops.scale"]  # none known: all
    assert found[0].related[0].location.range.start.line == model.kernel("_scale_kernel").line - 1

    report = FileReport("k", 0.0, check=check, module=target)
    summary = [d for d in module_diagnostics(report, model, Positions(text), str(repo / MODULE), found)
               if d.code == "repository-tests"]  # fmt: skip
    assert len(summary) == 1 and summary[0].severity == types.DiagnosticSeverity.Error
    assert summary[0].message == ("4 of 5 repository test case(s) fail: tests/test_scale.py::test_scale[0.5-5]: "
                                  "AssertionError: not close")  # fmt: skip
    assert len(summary[0].related_information) == 2
    passing = FileReport("k", 0.0, check=check_of(TestOutcome("tests/test_scale.py::test_scale[0.5-64]", True)),
                         module=target)  # fmt: skip
    assert not module_diagnostics(passing, model, Positions(text), str(repo / MODULE), [])
    not_run = FileReport("k", 0.0, error="GEAK could not run the check: no worker", module=target)
    (said,) = module_diagnostics(not_run, model, Positions(text), str(repo / MODULE), [])
    assert said.code == "not-run" and said.severity == types.DiagnosticSeverity.Warning


def test_the_no_test_warning_goes_where_tests_judge_the_module_and_says_why_where_none_do(repo):
    model = analyze((repo / MODULE).read_text(), str(repo / MODULE))
    assert any(p.code == "no-test" for p in model.problems)
    targets = find_module(str(repo / MODULE))
    assert not any(p.code == "no-test" for p in module_problems(model, targets))
    lonely = repo / "src/tinyops/ops/lonely.py"
    lonely.write_text((repo / MODULE).read_text())
    (warning,) = [p for p in module_problems(model, find_module(str(lonely))) if p.code == "no-test"]
    assert "; as a module of its repository: no test of tinyops.ops.lonely found" in warning.message
    assert module_problems(model, None) == model.problems


def test_test_files_merge_the_findings_of_each_module():
    def finding(uri: str, line: int) -> FailedTest:
        return FailedTest(uri, line, f"fails at {line}", ())

    merged = ModuleDiagnostics()
    assert merged.set("m1", [finding("t1", 3), finding("t2", 5)]) == {"t1", "t2"}
    assert merged.set("m2", [finding("t1", 9)]) == {"t1"}
    assert [f.line for f in merged.at("t1")] == [3, 9]
    assert merged.set("m1", [finding("t1", 3), finding("t2", 5)]) == set()  # unchanged: nothing to publish
    assert merged.set("m1", []) == {"t1", "t2"} and [f.line for f in merged.at("t1")] == [9] and not merged.at("t2")


def test_the_module_limit_settings_and_a_tests_table_in_pyproject(tmp_path):
    assert module_limits(parse_settings({})[0]) == ModuleLimits(20.0, 4)
    unlimited = {"moduleBudgetS": None, "moduleCasesPerTest": None}
    assert module_limits(parse_settings(unlimited)[0]) == ModuleLimits(None, None)
    with pytest.raises(SettingsError, match=r"geak\.moduleBudgetS.*geak\.moduleCasesPerTest"):
        parse_settings({"moduleBudgetS": 0, "moduleCasesPerTest": 0})
    (tmp_path / "pyproject.toml").write_text('[tool.geak]\nmax_iteration = 7\n[tool.geak.tests]\n"a.b" = "t.py"\n')
    assert read_workspace_file(tmp_path)[0] == {"max_iteration": 7}  # the module tests are the evaluator's


def test_each_repository_has_its_evaluator_with_the_limits_until_they_change(repo, tmp_path):
    importlib.import_module("torch")  # now, not on the thread an evaluator starts (it would race later AST parses)
    engine = Engine()
    evaluators = RepositoryEvaluators(engine, ModuleLimits(7.0, 2))
    options = EvalOptions(backend="interpreter", spares=0, compile_cache=None)

    async def main():
        first = await evaluators.get(str(repo), options)
        assert await evaluators.get(str(repo), options) is first  # kept warm
        other = await evaluators.get(str(tmp_path), options)
        assert other is not first and (first.options.tests_budget_s, first.options.cases_per_test) == (7.0, 2)
        assert first.pool._launcher.shown == (str(repo),)  # its jobs may read the repository (never write it)
        await evaluators.close(ModuleLimits())
        assert not evaluators.open() and evaluators.limits == ModuleLimits()
        assert (await evaluators.get(str(repo), options)).options.tests_budget_s is None
        await evaluators.close(ModuleLimits())

    try:
        asyncio.run(main())
    finally:
        engine.close()
