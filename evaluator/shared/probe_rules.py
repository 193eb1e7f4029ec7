"""When a value probe can judge a candidate, as both sides decide it: the reference job climbs down
`VALUE_MAGNITUDES` until the reference's outputs stay finite, and the trusted side keeps only such a probe.

"Finite" is relative to the fresh probe of the same call (the tested values, at the tested shapes): a value probe
whose outputs hold more NaN or infinite elements than that one's has left the range where the reference computes.
"""

from __future__ import annotations

import re
from typing import Any

VALUE_MAGNITUDES = (100.0, 10.0)  # times the scale of the tested inputs, largest first
OVER_BUDGET = "over budget"  # a probe the reference's job stopped because the probes' time was spent: no finding
KIND_WORDS = {"fresh": "fresh inputs", "shape": "other sizes", "value": "other values"}
GHOST_RUN = " (without kernels)"  # a fresh probe's run without kernels, as a job's progress names it
SECOND_RUN = " (again)"  # a probe's second run where the reference makes it, as a job's progress names it
TENSOR_SPEC = re.compile(r"\w+\[[^\]]*\]")  # a tensor argument in a call's signature: `f32[16,1040]`
KERNEL_STUCK_FLOOR_S = 10.0  # a probe's launched kernels none of which finished in this long (or longer:
KERNEL_STUCK_FACTOR = 2.0  # this times the tests' own first run) spin: the job is ended as hung
TESTS_KERNEL_STUCK_S = 30.0  # ...and a test's, in this long
PROBE_STALL_FACTOR = 5.0  # a probe silent longer than this times the tests' own first run (or the options' floor)
# ends its job as hung: a GPU kernel that spins for ever cannot be stopped in its process


def probe_where(probe: dict[str, Any]) -> str:
    """How a probe is named (in a verdict, and in a job's progress while it runs): `other sizes #3
    softmax(f32[3,1025])`."""
    index = probe.get("index")
    number = f"#{index + 1} " if isinstance(index, int) else ""
    return f"{KIND_WORDS.get(probe.get('kind', 'fresh'), 'probe')} {number}{probe.get('signature', '')}".strip()


def probe_of_run(where: str) -> str:
    """The probe a job's progress names while one of its runs goes (its run without kernels, or its second run):
    `other sizes #3 softmax(f32[3,1025])`."""
    return where.removesuffix(GHOST_RUN).removesuffix(SECOND_RUN)


def probe_place(where: str) -> str:
    """What a probe named `where` (in a job's progress, any of its runs) draws, whatever its number and its scalar
    arguments: `other sizes softmax(f32[3,1025])` for `other sizes #3 softmax(f32[3,1025], 1025, 2)`. A later run of
    the reference may draw the same shapes from another of its test's calls, whose scalars differ (a kernel that hangs
    at these shapes with one program count and step count may hang at them again with another)."""
    numbered = re.sub(r" #\d+ ", " ", probe_of_run(where), count=1)
    call = re.fullmatch(r"(.*?\w)\((.*)\)", numbered)
    if call is None:
        return numbered
    return f"{call[1]}({', '.join(TENSOR_SPEC.findall(call[2]))})"


def kernel_stuck_s(tests_s: float | None) -> float:
    """How long a check's GPU kernels may go without one finishing before its job is ended as hung
    (``kernel_watch``). In its probes (`tests_s`: what the import and first pass of the tests took): a probe runs
    what its file's tests ran (fresh inputs: a tested call again; other sizes and values: within a share of the
    tests' time, ``probes.ProbeBudget``), beside the same other jobs, so its kernels take no longer than the tests
    took, all of them. In the tests themselves (None), nothing is known yet: a floor that no unit test's kernel
    comes near, far below a check's time limit."""
    if tests_s is None:
        return TESTS_KERNEL_STUCK_S
    return max(KERNEL_STUCK_FLOOR_S, KERNEL_STUCK_FACTOR * tests_s)


def probe_stall_s(floor_s: float, tests_s: float) -> float:
    """How long a probe's run may go without a word from its job before the job is ended as hung."""
    return max(floor_s, PROBE_STALL_FACTOR * tests_s)


def nonfinite_elements(output: Any) -> int:
    """NaN and infinite elements of an output's floating tensors (in dicts, lists and tuples too)."""
    import torch

    if isinstance(output, torch.Tensor):
        if output.is_floating_point() or output.is_complex():
            return int((~torch.isfinite(output)).sum())
        return 0
    if isinstance(output, dict):
        return sum(nonfinite_elements(v) for v in output.values())
    if isinstance(output, (list, tuple)):
        return sum(nonfinite_elements(v) for v in output)
    return 0


def stays_finite(fresh: int, probe: int) -> bool:
    """Whether a value probe with `probe` non-finite output elements can judge, where its fresh probe had
    `fresh`."""
    return probe <= fresh
