"""When a value probe can judge a candidate, as both sides decide it: the reference job climbs down
`VALUE_MAGNITUDES` until the reference's outputs stay finite, and the trusted side keeps only such a probe.

"Finite" is relative to the fresh probe of the same call (the tested values, at the tested shapes): a value probe
whose outputs hold more NaN or infinite elements than that one's has left the range where the reference computes.
"""

from __future__ import annotations

from typing import Any

VALUE_MAGNITUDES = (100.0, 10.0)  # times the scale of the tested inputs, largest first
OVER_BUDGET = "over budget"  # a probe the reference's job stopped because the probes' time was spent: no finding
KIND_WORDS = {"fresh": "fresh inputs", "shape": "other sizes", "value": "other values"}
GHOST_RUN = " (without kernels)"  # a fresh probe's run without kernels, as a job's progress names it


def probe_where(probe: dict[str, Any]) -> str:
    """How a probe is named (in a verdict, and in a job's progress while it runs): `other sizes #3
    softmax(f32[3,1025])`."""
    index = probe.get("index")
    number = f"#{index + 1} " if isinstance(index, int) else ""
    return f"{KIND_WORDS.get(probe.get('kind', 'fresh'), 'probe')} {number}{probe.get('signature', '')}".strip()


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
