"""What the editor says of a comparison with the base revision, from recorded results (pure functions): the speed
label of the inlay hint, the status bar's verdict, which kernels a slowdown is put at, the warnings, and the
`geak.base` setting."""

from __future__ import annotations

from dataclasses import replace

import pytest
from git_repos import scale_file
from lsprotocol import types

from geak.evaluator.results import BenchResult, CallTiming, CheckResult, Comparison, Mismatch, Speedup, TestOutcome
from geak.server.lsp.analysis import analyze
from geak.server.lsp.base_compare import BaseReport
from geak.server.lsp.positions import Positions
from geak.server.lsp.publishing import base_diagnostics
from geak.server.lsp.settings import parse_settings
from geak.server.lsp.timing_text import against_base, slower_kernels


def bench(ratio: float, low: float, high: float, *, significant: bool, decided: bool = True) -> BenchResult:
    verdict = ("faster" if ratio > 1 else "slower") if significant else "within noise (±2%)"
    speedup = Speedup(ratio, low, high, 15, significant, verdict, 0.02, decided)
    return BenchResult(True, "perf", "cuda", "add.py", "timed", speedup=speedup)


def call(kernel_ms: dict[str, float]) -> CallTiming:
    return CallTiming("f", "f(x)", sum(kernel_ms.values()), 1.0, "graph", 0, None, None, None, None, "cold", kernel_ms)


@pytest.mark.parametrize(
    ("measured", "label"),
    [
        (bench(1.21, 1.18, 1.24, significant=True), "1.21× faster than HEAD [1.18, 1.24]"),
        (bench(0.8, 0.78, 0.82, significant=True), "1.25× slower than HEAD [1.22, 1.28]"),
        (bench(1.0, 0.99, 1.01, significant=False), "within noise of HEAD [0.99, 1.01]"),
        (bench(0.97, 0.93, 1.05, significant=False, decided=False), "undecided against HEAD [0.93, 1.05]"),
        (replace(bench(1.0, 1.0, 1.0, significant=False), speedup=None), None),
    ],
)
def test_the_speed_label_against_the_base(measured, label):
    assert against_base(measured, "HEAD") == label


def test_a_slowdown_is_put_at_the_kernels_whose_time_grew():
    grew = replace(bench(0.8, 0.78, 0.82, significant=True), calls=(call({"a": 1.0, "b": 3.0}),),
                   reference_calls=(call({"a": 1.0, "b": 2.0}),))  # fmt: skip
    assert slower_kernels(grew, ["a", "b"]) == ["b"]
    unknown = bench(0.8, 0.78, 0.82, significant=True)  # no time per kernel: the first kernel
    assert slower_kernels(unknown, ["a", "b"]) == ["a"]


@pytest.mark.parametrize(
    ("outcome", "measured", "verdict"),
    [
        ("matches", bench(1.21, 1.18, 1.24, significant=True), "1.21× faster"),
        ("matches", bench(0.8, 0.78, 0.82, significant=True), "1.25× slower"),
        ("matches", bench(1.0, 0.99, 1.01, significant=False), "within noise"),
        ("matches", bench(0.97, 0.93, 1.05, significant=False, decided=False), "speed undecided"),
        ("matches", None, "same outputs"),
        ("same", None, "same"),
        ("new", None, "new file"),
        ("unusable", None, "not compared"),
        ("differs", None, "base's test fails"),  # no mismatch: the base's test failed with these kernels
    ],
)
def test_the_status_bar_verdict(outcome, measured, verdict):
    compared = BaseReport("HEAD", "k", outcome, "said", "HEAD:scale.py", bench=measured)
    assert compared.verdict == verdict
    speed = against_base(measured, "HEAD") if measured is not None else None
    assert compared.said == (f"said; {speed}" if speed else "said")


def test_outputs_that_differ_are_said_so_in_the_status_bar():
    differing = failed([Mismatch("test_scale → return", "3 of 100 elements differ")])
    assert report(differing).verdict == "outputs differ"


def report(result: CheckResult | None, outcome: str = "differs", measured: BenchResult | None = None) -> BaseReport:
    return BaseReport("HEAD", "k", outcome, "outputs differ", "HEAD:scale.py", result, measured)


def diagnostics(compared: BaseReport) -> list[types.Diagnostic]:
    text = scale_file()
    return base_diagnostics(compared, analyze(text, "scale.py"), Positions(text))


def failed(mismatches=(), tests=()) -> CheckResult:
    comparison = Comparison(False, 1, 1, tuple(mismatches)) if mismatches else None
    return CheckResult(False, "exec", "interpreter", "scale.py", "differs", tests=tuple(tests), comparison=comparison)


def test_outputs_that_differ_warn_once_at_the_test_that_shows_them():
    mismatches = [Mismatch("test_scale → return", "3 of 100 elements differ"),
                  Mismatch("fresh inputs #1 scale(f32[100])['return']", "all differ")]  # fmt: skip
    found = diagnostics(report(failed(mismatches)))
    assert [(d.range.start.line + 1, d.severity, d.message) for d in found] == [
        (
            22,
            types.DiagnosticSeverity.Warning,
            "outputs differ from HEAD's in test_scale → return: 3 of 100 elements differ",
        )
    ]


def test_a_difference_no_test_of_the_file_shows_is_one_warning_at_the_kernel():
    probes = [Mismatch(f"other sizes #{i} scale(f32[{i}])['return']", "differs") for i in range(3)]
    found = diagnostics(report(failed(probes)))
    assert [(d.range.start.line + 1, d.message) for d in found] == [
        (8, "outputs differ from HEAD's in other sizes #0 scale(f32[0])['return']: differs (+2 more)")
    ]


def test_the_bases_test_failing_with_these_kernels_warns_at_that_test():
    crashed = failed(tests=[TestOutcome("test_scale", False, "TypeError: scale() takes 1 argument\n  more", "error")])
    found = diagnostics(report(crashed))
    assert [(d.range.start.line + 1, d.message) for d in found] == [
        (22, "HEAD:scale.py's test_scale fails with these kernels: TypeError: scale() takes 1 argument")
    ]


@pytest.mark.parametrize("outcome", ["same", "new", "unusable", "none", "matches"])
def test_what_is_said_once_is_never_a_diagnostic(outcome):
    assert diagnostics(report(None, outcome)) == []


def test_only_a_significant_slowdown_is_a_warning():
    slower = report(None, "matches", bench(0.8, 0.78, 0.82, significant=True))
    found = diagnostics(slower)
    assert [(d.range.start.line + 1, d.code, d.message) for d in found] == [
        (8, "base-slower", "1.25× slower than HEAD [1.22, 1.28]: significantly slower")
    ]
    assert diagnostics(report(None, "matches", bench(0.99, 0.96, 1.02, significant=False))) == []
    assert diagnostics(report(None, "matches", bench(1.3, 1.2, 1.4, significant=True))) == []


def test_the_base_setting():
    assert parse_settings({})[0].base == "HEAD"
    assert parse_settings({"base": " main "})[0].base == "main"
    assert parse_settings({"base": ""})[0].base == ""  # off
