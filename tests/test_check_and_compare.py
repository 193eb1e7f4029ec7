"""`Evaluator.check_and_compare_tests` on CPU (Triton's interpreter): a file's own check and, from that very job, its
test outputs weighed against a reference's kept run — what the editor does on save against the last commit, where a
check and then a check against the base took two jobs. The kernel's test checks only its output's shape
(``git_repos.scale_file``), so only the comparison can tell what it computes."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from git_repos import scale_file

from geak.evaluator import EvalOptions, Evaluator
from geak.evaluator.repo_tests import module_tests

REPOS = Path(__file__).parent / "fixtures" / "repos"
ADD = Path("src/tinyops/ops/add.py")

NEW_CODE = scale_file().replace("@triton.jit", "_SAVED = 1  # new code, the same outputs\n\n\n@triton.jit", 1)


def both(tmp_path: Path, saved: str, *, kept: bool = True, full: bool = False):
    """(own check, compared, jobs the call ran[, the full check against the base]) for `saved` against the committed
    `scale_file()`; `kept`: the base's run is made first, as the editor's first comparison makes it."""
    base = tmp_path / "base" / "scale.py"
    base.parent.mkdir()
    base.write_text(scale_file())
    file = tmp_path / "scale.py"
    file.write_text(saved)

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", spares=0)) as ev:
            if kept:
                await ev.prepare_reference(base)
            before = ev.pool.jobs_run
            own, compared = await ev.check_and_compare_tests(file, against=base)
            found = (own, compared, ev.pool.jobs_run - before)
            return (*found, await ev.check(file, against=base)) if full else found

    return asyncio.run(go())


def test_the_same_outputs_are_told_from_the_check_s_own_job(tmp_path):
    own, compared, jobs = both(tmp_path, NEW_CODE)
    assert jobs == 1
    assert own.ok and own.reference is None and own.tests[0].name == "test_scale"
    assert compared.ok and compared.comparison.compared_outputs == 1
    assert compared.comparison.fresh_calls == 0  # the probes are not replayed: the full check does that


def test_outputs_that_differ_are_told_although_the_file_s_own_test_passes(tmp_path):
    own, compared, jobs, full = both(tmp_path, scale_file("x * 3.0"), full=True)
    assert jobs == 1 and own.ok
    assert not compared.ok and compared.comparison.mismatches[0].where.startswith("test_scale")
    assert not full.ok and full.comparison.mismatches[0].where.startswith("test_scale")  # the full check agrees


def test_without_a_kept_run_of_the_reference_nothing_runs_it(tmp_path):
    own, compared, jobs = both(tmp_path, scale_file("x * 3.0"), kept=False)
    assert own.ok and compared is None and jobs == 1


def test_a_test_section_other_than_the_reference_s_is_not_compared(tmp_path):
    own, compared, jobs = both(tmp_path, scale_file("x * 3.0", check=" and out.dtype == x.dtype"))
    assert own.ok and compared is None and jobs == 1


def test_a_failing_file_is_not_compared(tmp_path):
    own, compared, _ = both(tmp_path, scale_file("x * undefined_name"))
    assert not own.ok and compared is None


def test_a_repository_s_module_is_compared_by_its_repository_s_tests_in_one_job(tmp_path):
    repo = shutil.copytree(REPOS / "tinyops", tmp_path / "tinyops")
    module = module_tests(repo / ADD)
    base = tmp_path / "base" / "add.py"
    base.parent.mkdir()
    base.write_text((repo / ADD).read_text())
    saved = base.read_text().replace("@triton.jit", "_SAVED = 1  # new code, the same outputs\n\n\n@triton.jit", 1)

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", spares=0), readable=(str(repo),)) as ev:
            await ev.prepare_reference(base, module=module)
            before = ev.pool.jobs_run
            own, compared = await ev.check_and_compare_tests(source=saved, against=base, module=module)
            return own, compared, ev.pool.jobs_run - before

    own, compared, jobs = asyncio.run(go())
    assert jobs == 1 and own.ok and own.reference is None
    assert compared.ok and compared.comparison.compared_outputs >= 1
