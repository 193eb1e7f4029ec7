"""Where a module's comparison with the base revision is shown, without a server: at the test a difference names,
a probe's at the first test that launched the module's kernels, a base's failing test at that test; nothing for a
comparison that found no difference; a warning at the test's `def` with related information at the module's kernels."""

from __future__ import annotations

import shutil
from pathlib import Path

from lsprotocol import types

from geak.evaluator import CheckResult
from geak.evaluator.results import Comparison, Mismatch, TestOutcome
from geak.server.lsp.analysis import analyze
from geak.server.lsp.base_compare import BaseReport
from geak.server.lsp.module_diagnostics import base_findings, base_nodes, definition_lines
from geak.server.lsp.modules import find_module
from geak.server.lsp.positions import Positions

REPOS = Path(__file__).parent / "fixtures" / "repos"
MODULE = "src/tinyops/ops/scale.py"
SCALE = "tests/test_scale.py::test_scale[0.5-5]"
BACKWARD = "tests/test_scale.py::test_scaler_backward"
PROBE = "other sizes #2 scale(f32[4,131], 0.5) (sizes one above (3→4, 130→131))['return']"


def compared(*mismatches: Mismatch, tests: tuple[TestOutcome, ...] | None = None, outcome="differs") -> BaseReport:
    tests = tests or (
        TestOutcome("tests/test_scale.py::test_plain", True),
        TestOutcome(SCALE, True, launches={"_scale_kernel": 1}),
        TestOutcome(BACKWARD, True, launches={"_scale_kernel": 2}),
    )
    comparison = Comparison(not mismatches, 3, 3, mismatches)
    result = CheckResult(False, "compare", "interpreter", MODULE, "differs", tests=tests, comparison=comparison)
    return BaseReport("HEAD", "k", outcome, "outputs differ", f"HEAD:{MODULE}", result)


def test_each_difference_is_said_at_the_test_it_names_and_a_probes_at_the_first_launching_test():
    said = base_nodes(compared(Mismatch(f"{BACKWARD} → return", "3 of 99 elements differ"),
                               Mismatch(PROBE, "NaN mismatch"), Mismatch(f"{BACKWARD} → out", "later")))  # fmt: skip
    assert said == {
        BACKWARD: f"outputs differ from HEAD's in {BACKWARD} → return: 3 of 99 elements differ",
        SCALE: f"outputs differ from HEAD's in {PROBE}: NaN mismatch",  # test_plain launched no kernel of the module
    }


def test_a_bases_failing_test_is_said_at_it_and_nothing_is_said_without_a_difference():
    failing = (TestOutcome(SCALE, True), TestOutcome(BACKWARD, False, "TypeError: scale() takes 1 argument\nmore"))
    assert base_nodes(compared(tests=failing)) == {
        BACKWARD: f"HEAD:{MODULE}'s {BACKWARD} fails with this module: TypeError: scale() takes 1 argument"
    }
    assert base_nodes(compared(Mismatch(PROBE, "NaN mismatch"), outcome="matches")) == {}


def test_a_difference_is_a_warning_at_the_tests_def_with_the_modules_kernels_related(tmp_path):
    repo = shutil.copytree(REPOS / "tinyops", tmp_path / "tinyops")
    target = find_module(str(repo / MODULE)).target
    text = (repo / MODULE).read_text()
    said = base_nodes(compared(Mismatch(PROBE, "NaN mismatch")))
    lines = definition_lines(repo, [*said, "tests/test_gone.py::test_z"])
    (found,) = base_findings(said, target, (repo / MODULE).as_uri(), analyze(text, str(repo / MODULE)),
                             Positions(text), lines)  # fmt: skip
    assert found.uri == (repo / "tests/test_scale.py").as_uri()
    assert found.line == (repo / "tests/test_scale.py").read_text().splitlines().index(
        "def test_scale(rows, cols, factor, check_close):") + 1  # fmt: skip
    diagnostic = found.diagnostic(Positions((repo / "tests/test_scale.py").read_text()))
    assert diagnostic.severity == types.DiagnosticSeverity.Warning and diagnostic.code == "base"
    (related,) = diagnostic.related_information
    assert related.location.uri == (repo / MODULE).as_uri() and related.location.range.start.line == 6
    assert related.message == "kernel _scale_kernel of tinyops.ops.scale"
