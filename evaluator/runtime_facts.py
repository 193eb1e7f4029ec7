"""The facts a fork server reports about its runtime when it is ready (``job/worker.py``'s "ready" message, less its
event, process id and start-up times): the backend, the device, the software stack, how its jobs are isolated and
whether it can grant a timing job the device alone. The caller reads them as ``RuntimeFacts``; on the wire, and to the
evaluator's callers (``Evaluator.runtime``), they stay the plain dict the job writes. Plain standard-library data,
so that it can move to ``shared`` once the job side builds it too (every shared module is one the worker imports)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class RuntimeFacts:
    """A field the job did not report is None (before any fork server has started, all are)."""

    backend: str | None = None  # cuda | rocm | interpreter
    device: str | None = None
    arch: str | None = None
    units: int | None = None  # compute units (SMs, CUs) the device shows: an MI300X partition shows fewer
    memory_bytes: int | None = None  # the device's memory: an MI300X memory partition (NPS4) shows a quarter
    torch_version: str | None = None
    triton_version: str | None = None
    isolation: str | None = None  # the mechanism that isolates each job (``isolation_policy.PROCESS_ONLY``: none)
    isolation_reason: str | None = None  # why jobs are not isolated, where they are not
    grants: bool | None = None  # the fork server passes the device to a timing job alone (``pool.run``)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = True) -> RuntimeFacts:
        """The facts in `data` (the dict the job writes). A key that names no fact is a ValueError, or, not `strict`
        (what a running fork server reports: a fact added on its side alone must not stop every verdict), left out."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown and strict:
            raise ValueError(f"unknown runtime fact(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        """The facts as the job writes them (every field, None where not reported)."""
        return asdict(self)
