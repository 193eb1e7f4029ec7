"""Finding a kernel module's tests in its repository (`geak.evaluator.repo_tests`): the repository's pytest
configuration, the import graph name by name, the user's choice, and what is said when nothing is found."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geak.evaluator import RepositoryError, module_tests, needs_repository_tests
from geak.evaluator.repo_tests import as_module, find_repository

FIXTURES = Path(__file__).parent / "fixtures"
REPO = FIXTURES / "repos" / "tinyops"
SCALE = REPO / "src" / "tinyops" / "ops" / "scale.py"
ADD = REPO / "src" / "tinyops" / "ops" / "add.py"
LIGER = Path(__file__).resolve().parents[1].parent / "shared" / "repos" / "liger-kernel"
needs_liger = pytest.mark.skipif(not LIGER.is_dir(), reason="needs ../shared/repos/liger-kernel beside the clone")


def nodes(target) -> list[str]:
    return [t.node for t in target.tests]


def test_the_repository_and_its_pytest_configuration():
    repo = find_repository(SCALE)
    assert repo.root == REPO.resolve()
    assert repo.config == REPO.resolve() / "pyproject.toml"
    assert repo.testpaths == (REPO.resolve() / "tests",)
    assert repo.pythonpath == (REPO.resolve() / "src",)
    target = module_tests(SCALE)
    assert (target.module, target.import_root) == ("tinyops.ops.scale", REPO.resolve() / "src")
    assert target.sys_path == [str(REPO.resolve() / "src")]


def test_tests_reaching_the_module_are_found_with_why():
    target = module_tests(SCALE)
    assert target.source == "imports" and target.searched == (REPO.resolve() / "tests",)
    assert nodes(target) == ["tests/test_scale.py::test_scale", "tests/test_scale.py::test_scaler_backward"]
    why = {t.node: t.why for t in target.tests}
    assert why["tests/test_scale.py::test_scale"] == "uses scale, which is imported from tinyops.ops.scale"
    # through the package's public API: tinyops.Scaler -> tinyops.layers -> tinyops.ops.ScaleFunction -> scale.py
    backward = why["tests/test_scale.py::test_scaler_backward"]
    assert backward.startswith("uses Scaler, which comes from tinyops.layers")
    assert "tinyops.ops.scale" in backward
    assert all(t.asserts for t in target.tests)
    assert target.to_dict()["tests"][0] == {"node": "tests/test_scale.py::test_scale", "why": why[nodes(target)[0]]}


def test_a_test_of_another_kernel_of_the_same_package_is_not_taken():
    """`from tinyops import add` imports the package whose __init__ imports scale.py too: names, not modules, count."""
    assert nodes(module_tests(ADD)) == ["tests/test_add.py::test_add"]


def test_tests_named_on_the_command_line(monkeypatch):
    monkeypatch.chdir(REPO)
    one = module_tests(SCALE, ["tests/test_scale.py::test_scaler_backward"])
    assert (one.source, nodes(one)) == ("--tests", ["tests/test_scale.py::test_scaler_backward"])
    whole = module_tests(SCALE, ["tests/test_scale.py"])  # a file: each of its test functions
    assert nodes(whole) == [
        f"tests/test_scale.py::{f}" for f in ("test_scale", "test_scaler_backward", "test_plain_torch")
    ]
    assert [t.asserts for t in whole.tests] == [True, True, True]
    with pytest.raises(RepositoryError, match="no such file"):
        module_tests(SCALE, ["tests/test_missing.py"])
    with pytest.raises(RepositoryError, match="outside the repository"):
        module_tests(SCALE, [str(FIXTURES / "add_native.py")])


def test_tests_named_in_tool_geak(tmp_path):
    repo = shutil.copytree(REPO, tmp_path / "tinyops")
    with (repo / "pyproject.toml").open("a") as f:
        f.write('\n[tool.geak.tests]\n"tinyops.ops.scale" = ["tests/test_scale.py::test_scaler_backward"]\n')
    target = module_tests(repo / "src" / "tinyops" / "ops" / "scale.py")
    assert (target.source, nodes(target)) == ("[tool.geak]", ["tests/test_scale.py::test_scaler_backward"])
    assert "[tool.geak.tests] 'tinyops.ops.scale'" in target.tests[0].why
    (repo / "pyproject.toml").write_text('[tool.geak]\ntests = "not a table"\n')
    with pytest.raises(RepositoryError, match="must be a table"):
        module_tests(repo / "src" / "tinyops" / "ops" / "scale.py")


def test_no_test_found_says_where_it_looked(tmp_path):
    repo = shutil.copytree(REPO, tmp_path / "tinyops")
    shutil.rmtree(repo / "tests")
    (repo / "tests").mkdir()
    with pytest.raises(RepositoryError) as e:
        module_tests(repo / "src" / "tinyops" / "ops" / "scale.py")
    assert "no test of tinyops.ops.scale found" in str(e.value) and str(repo / "tests") in str(e.value)
    assert "--tests" in str(e.value)


def test_a_home_kept_as_a_repository_is_not_shown_to_jobs(tmp_path, monkeypatch):
    """Jobs read a module's whole repository: the nearest marker in the home folder (dotfiles kept in git) would
    show them the home folder, which the sandbox hides from every job."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    module = shutil.copytree(REPO / "src", home / "work" / "src") / "tinyops" / "ops" / "scale.py"
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(RepositoryError, match=r"holds .*home.*pyproject\.toml or pytest\.ini of its own"):
        find_repository(module)


def test_a_module_with_kernels_and_no_test_is_routed_to_its_repository():
    assert needs_repository_tests(SCALE)
    assert not needs_repository_tests(FIXTURES / "add_native.py")  # a file with its own tests


def test_the_module_as_the_evaluator_checks_it():
    target = module_tests(SCALE)
    module = as_module(target, SCALE.read_text(), str(SCALE))
    assert module.test_style == "pytest" and module.tests == tuple(nodes(target))
    assert "ScaleFunction.apply" in module.entry_points and "scale" in module.entry_points
    assert module.repository == target.to_job() and module.repository["module"] == "tinyops.ops.scale"


def test_no_test_found_is_one_line_and_exit_2_on_the_command_line(tmp_path):
    repo = shutil.copytree(REPO, tmp_path / "tinyops")
    shutil.rmtree(repo / "tests")
    p = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "check", str(repo / "src" / "tinyops" / "ops" / "scale.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no test of tinyops.ops.scale found" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


@needs_liger
@pytest.mark.parametrize(
    "module, found, not_found",
    [
        ("rms_norm", "test/transformers/test_rms_norm.py::test_correctness", "test/transformers/test_swiglu.py"),
        ("swiglu", "test/transformers/test_swiglu.py::test_correctness_llamamlp", "test/transformers/test_rms_norm.py"),
        ("softmax", "test/transformers/test_softmax.py::test_liger_softmax", "test/transformers/test_rms_norm.py"),
    ],
)
def test_liger_kernel_modules_find_their_tests(module, found, not_found):
    target = module_tests(LIGER / "src" / "liger_kernel" / "ops" / f"{module}.py")
    assert target.module == f"liger_kernel.ops.{module}"
    assert target.sys_path[0] == str((LIGER / "src").resolve())  # pythonpath = ["src", "."]
    assert found in nodes(target)
    assert not any(n.startswith(not_found) for n in nodes(target))


@pytest.mark.parametrize(
    "paths, against, tests, module",
    [
        ([SCALE], None, None, True),  # kernels, no test: the repository's tests judge it
        ([SCALE], FIXTURES / "repos" / "candidates" / "scale_right.py", None, True),  # ...against its original
        ([FIXTURES / "add_native.py"], None, None, False),  # a file with its own tests
        ([FIXTURES / "repos" / "candidates" / "scale_right.py"], FIXTURES / "add_native.py", None, False),  # a
        # candidate's kernels run the reference's own test
        ([FIXTURES / "add_native.py"], None, ["tests/test_scale.py"], True),  # tests named: a module
        ([SCALE, ADD], None, None, False),  # several files: each as a file
    ],
)
def test_geak_check_routes_a_module_without_tests_to_its_repository(paths, against, tests, module):
    from geak.server.cli import module_check

    args = argparse.Namespace(paths=[str(p) for p in paths], against=str(against) if against else None, tests=tests)
    assert module_check.is_module_check(args) is module
