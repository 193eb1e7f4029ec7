"""How long each reference's own run took, kept between runs beside the compile store, so that work over many
references starts the slow ones first (``longest_first``).

A batch is as long as its slowest file started last: in a `geak eval` of TritonBench-revised on an H100, three golden
files that fail or hang in their own test (to the 300 s limit) started at lines 82, 89 and 164 and held the checks'
end from 256 s to 389 s, while every timing waited. Their cost is known after one run; a later eval of other
predictions of the same suite starts them first. Where it is not known (a first run), the larger file goes first: on a
fresh H200, the two checks that ended a `geak eval` last (`chunk_retention.py`, 79 s of its own work, and
`triton_linear_activation.py`, 57 s) were of the suite's 6th and 16th largest files of 184, started at 110 s and 120 s
in line order; started first, `chunk_retention.py`'s check ended by 92 s. (What size cannot foretell, a small file
whose candidate spins on the GPU in a probe until its stall limit, it places late.) Only the caller writes the file
(jobs never see the store's folder) and it only orders work: a wrong or missing figure changes no verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

FILE = "reference-seconds.json"
MAX_ENTRIES = 20_000  # the file stays small: past this, the entries recorded longest ago go


def load(root: str | None) -> dict[str, float]:
    """Reference key -> seconds of its last own run; empty where there is no store or nothing readable in it."""
    if root is None:
        return {}
    try:
        data = json.loads(Path(root, FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, (int, float))}


def record(root: str | None, key: str, seconds: float) -> None:
    """Keep `seconds` for `key` (the file replaced whole: a reader never sees half of it; two writers at once may
    lose one's figure, which only orders work)."""
    if root is None or not os.path.isdir(root):
        return
    costs = load(root)
    costs.pop(key, None)
    costs[key] = round(seconds, 2)  # the newest last, so the oldest go first past MAX_ENTRIES
    kept = dict(list(costs.items())[-MAX_ENTRIES:])
    try:
        fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{FILE}.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(kept, f)
        os.replace(tmp, Path(root, FILE))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def longest_first(references: list[Path], known: Mapping[Path, float]) -> list[Path]:
    """`references` in the order work over them should start: those whose own run took longest here before first
    (`known`, ``Evaluator.known_reference_seconds``), then those not known, the largest file first."""

    def size(path: Path) -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    return sorted(references, key=lambda path: (-known.get(path, 0.0), -size(path)))
