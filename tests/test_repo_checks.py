"""A repository's module checked by the repository's own tests, in the job sandbox, on Triton's CPU interpreter: the
module passes, a candidate in its place is judged by the tests and by the captured kernel calls against the
original, and the candidate cannot write the repository."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geak.evaluator import EvalOptions, Evaluator, module_tests

FIXTURES = Path(__file__).parent / "fixtures" / "repos"
CANDIDATES = FIXTURES / "candidates"
MODULE = Path("src/tinyops/ops/scale.py")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the fixture repository (under the temporary directory, which jobs see only where it is shown)."""
    return shutil.copytree(FIXTURES / "tinyops", tmp_path_factory.mktemp("repo") / "tinyops")


@pytest.fixture(scope="module")
def check(repo):
    """`check(candidate=None, against_original=False)`: the module (or a candidate's text in its place) checked by
    one evaluator kept for the module's tests, as `geak check MODULE` checks it."""
    loop = asyncio.new_event_loop()
    target = module_tests(repo / MODULE)
    options = EvalOptions(backend="interpreter", spares=0, compile_cache=None, timeout_s=240)
    evaluator = Evaluator(options, readable=(str(target.repository.root),))

    def run(candidate: str | None = None, against_original: bool = False):
        source = (CANDIDATES / candidate).read_text() if candidate else None
        against = repo / MODULE if against_original else None
        return loop.run_until_complete(evaluator.check_module(target, source=source, against=against))

    yield run
    loop.run_until_complete(evaluator.aclose())
    loop.close()


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_the_module_passes_its_repositorys_tests(check):
    result = check()
    assert result.ok, result.message
    names = [t.name for t in result.tests]
    assert len(names) == 7 and "tests/test_scale.py::test_scale[0.5-130]" in names  # parametrized, conftest fixtures
    assert "tests/test_scale.py::test_scaler_backward" in names
    assert all(t.launches.get("_scale_kernel") for t in result.tests)  # the kernel ran in every test


def test_a_right_candidate_matches_the_original(check):
    result = check("scale_right.py", against_original=True)
    assert result.ok, result.message
    assert result.comparison is not None and result.comparison.ok and result.comparison.fresh_calls > 0


def test_a_wrong_candidate_fails_the_repositorys_tests(check):
    result = check("scale_wrong.py", against_original=True)
    assert not result.ok
    failed = {t.name for t in result.tests if not t.ok}
    assert "tests/test_scale.py::test_scale[3.0-64]" in failed and "tests/test_scale.py::test_scaler_backward" in failed


def test_a_candidate_right_only_at_the_tests_sizes_is_caught_by_its_captured_calls(check):
    result = check("scale_wrong_past_tests.py", against_original=True)
    assert all(t.ok for t in result.tests), result.message  # the repository's tests pass...
    assert not result.ok and result.comparison is not None and not result.comparison.ok  # ...the probes do not
    assert result.comparison.mismatches


def test_the_candidate_cannot_write_the_repository(check, repo):
    before = tree_digest(repo)
    result = check("scale_writes_repo.py")
    if result.isolation == "process only":
        pytest.skip("no namespaces here: a job may write what the user may (a caveat every verdict carries)")
    assert not result.ok and "Read-only file system" in result.message, result.message
    assert tree_digest(repo) == before and not (repo / "PLANTED.txt").exists()


def test_geak_check_module_with_tests_named_on_the_command_line(repo):
    p = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "-v", "check", str(MODULE), "--tests",
         "tests/test_scale.py::test_scale", "--backend", "interpreter"],
        capture_output=True, text=True, timeout=300, cwd=repo,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "tinyops.ops.scale in " in p.stderr and "1 test(s) named with --tests" in p.stderr  # -v: what and why
    assert "tests/test_scale.py::test_scale: named with --tests" in p.stderr
    assert "PASS" in p.stdout and "6 test(s) passed" in p.stdout
    assert "test_scaler_backward" not in p.stdout


def test_a_conftest_that_cannot_be_imported_fails_the_check_saying_so(tmp_path):
    repo = shutil.copytree(FIXTURES / "tinyops", tmp_path / "tinyops")
    with (repo / "tests" / "conftest.py").open("a") as f:
        f.write("\nimport a_package_this_environment_lacks  # noqa\n")
    p = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "check", str(MODULE), "--backend", "interpreter", "--json"],
        capture_output=True, text=True, timeout=300, cwd=repo,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    result = json.loads(p.stdout)
    assert not result["ok"] and "could not load the repository's tests" in result["message"]
    assert "a_package_this_environment_lacks" in result["output_tail"]
    found = result["repository_tests"]  # what was found and why, beside the verdict
    assert found["source"] == "imports" and found["module"] == "tinyops.ops.scale"
    assert [t["node"] for t in found["tests"]] == [
        "tests/test_scale.py::test_scale",
        "tests/test_scale.py::test_scaler_backward",
    ]
    assert all(t["why"] for t in found["tests"])


def test_single_cases_of_a_parametrized_test_named_by_node_id(repo):
    """`--tests FILE::test_x[params]`: just those cases run, and each counts as the asserting test it is."""
    p = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "check", str(MODULE), "--backend", "interpreter", "--json",
         "--tests", "tests/test_scale.py::test_scale[3.0-64]", "--tests", "tests/test_scale.py::test_scale[0.5-5]"],
        capture_output=True, text=True, timeout=300, cwd=repo,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr + p.stdout
    result = json.loads(p.stdout)
    assert sorted(t["name"] for t in result["tests"]) == [
        "tests/test_scale.py::test_scale[0.5-5]",
        "tests/test_scale.py::test_scale[3.0-64]",
    ]
    assert result["stage"] == "exec" and "assert nothing" not in result["message"], result["message"]
