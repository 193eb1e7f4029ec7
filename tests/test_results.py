"""Results are plain data: JSON-ready and round-trippable (for caches and the editor)."""

import json

from geak.evaluator.results import CheckResult, Comparison, Diagnostic, KernelInfo, Mismatch, TestOutcome
from geak.evaluator.speedup import speedup_interval


def test_check_result_round_trip():
    r = CheckResult(
        ok=False, stage="exec", backend="cuda", file="f.py", message="m",
        tests=(TestOutcome("test_a", False, "boom", "assert", 0.1, {"k": 2}),),
        diagnostics=(Diagnostic(3, 1, "error", "bad", file="f.py"),),
        kernels=(KernelInfo("k", 5, 9, False, ("x",), ()),),
        comparison=Comparison(False, 1, 2, (Mismatch("test_a", "differs"),)),
    )  # fmt: skip
    data = json.loads(json.dumps(r.to_dict()))
    assert CheckResult.from_dict(data) == r


def test_speedup_interval_claims_only_when_it_excludes_one():
    same = speedup_interval(
        [[1.0 + 0.01 * (i % 3)] for i in range(15)], [[1.0 + 0.01 * ((i + 1) % 3)] for i in range(15)]
    )
    assert same.low <= 1.0 <= same.high and not same.significant
    faster = speedup_interval([[2.0 + 0.01 * (i % 3)] for i in range(15)], [[1.0] for _ in range(15)])
    assert faster.significant and faster.verdict == "faster" and faster.low > 1.9
