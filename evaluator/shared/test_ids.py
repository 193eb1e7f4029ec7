"""How a test case's id names its function and its `result_gold` key: one rule for the caller (which expects the
outputs) and the job process (which runs the cases under pytest and reads `result_gold`)."""

from __future__ import annotations

from collections.abc import Collection


def test_function(test_id: str) -> str:
    """The function a test id names: `test_x[4-fp16]` → `test_x`, `TestK::test_y[1]` → `TestK::test_y`."""
    return test_id.split("[", 1)[0]


def chosen(test_id: str, tests: Collection[str]) -> bool:
    """Is the case `test_id` among `tests`, which name test functions (`test_x`: each of its cases) or single cases
    of a parametrized one (`test_x[4-fp16]`, as a repository's node ids may)?"""
    return test_id in tests or test_function(test_id) in tests


def sanitized_test_id(test_id: str) -> str:
    """The ROCm benchmark's `result_gold` key for a test id (`request.node.name`)."""
    return test_id.replace("::", "_").replace("[", "_").replace("]", "").replace("-", "_")
