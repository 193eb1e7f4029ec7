"""Checking many Triton files with one warm evaluator: a suite, a folder, or files named on the command line."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from geak.evaluator import BadInput, CheckResult, EvalOptions, Evaluator, longest_first, looks_like_triton

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileVerdict:
    """One file's outcome: `verdict` is pass, fail, not checkable (this backend cannot check it: `cpu_support`) or
    bad input (the file, or its reference, cannot be checked).
    With --against-self, `alone` is the file's own check, which runs first (`result` compares it with itself)."""

    file: str
    verdict: str
    message: str
    result: CheckResult | None = None
    alone: CheckResult | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["result"] = self.result.to_dict() if self.result else None
        data["alone"] = self.alone.to_dict() if self.alone else None
        return data


def triton_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named directly, and the Triton files (with a `@triton.jit` kernel) under named folders, in order."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [p for p in sorted(path.rglob("*.py")) if p.is_file() and looks_like_triton(p)]
        else:
            found.append(path)
    return list(dict.fromkeys(found))


async def check_many(
    files: list[Path],
    options: EvalOptions,
    *,
    against: Path | None = None,
    against_self: bool = False,
    on_done: Callable[[FileVerdict], None] | None = None,
    on_progress: Callable[[Path, str], None] | None = None,
) -> list[FileVerdict]:
    """Check every file with one evaluator (`options.max_concurrent` files at once); verdicts in the order given.
    Against themselves, the files whose own run took longest here before start first (``reference_costs``): a slow
    file started last holds up the whole run alone."""
    limit = asyncio.Semaphore(max(1, options.max_concurrent))

    async with Evaluator(options) as evaluator:

        async def one(file: Path) -> FileVerdict:
            async with limit:
                report = (lambda message: on_progress(file, message)) if on_progress else None
                try:
                    if against_self:  # its own reference: its run is not needed once it is checked
                        alone, result = await evaluator.check_against_self(file, progress=report)
                        await evaluator.forget_reference(file)
                    else:
                        alone, result = None, await evaluator.check(file, against=against, progress=report)
                    shown = result or alone
                    assert shown is not None
                    verdict = FileVerdict(str(file), _verdict_of(shown), shown.message, shown, alone)
                except BadInput as e:
                    verdict = FileVerdict(str(file), "bad input", str(e))
            log.info("%s: %s", file, verdict.verdict)  # `geak -v check DIR`: each file as it ends
            if on_done is not None:
                on_done(verdict)
            return verdict

        order = list(range(len(files)))
        if against_self:  # its own run is the check: the longest first (``reference_costs.longest_first``)
            first = longest_first(files, evaluator.known_reference_seconds(files))
            rank = {path: i for i, path in enumerate(first)}
            order.sort(key=lambda i: rank[files[i]])
        found = await asyncio.gather(*(one(files[i]) for i in order))  # started in this order (the semaphore's)
        by_index = dict(zip(order, found, strict=True))
        return [by_index[i] for i in range(len(files))]


def _verdict_of(result: CheckResult) -> str:
    if result.ok:
        return "pass"
    return "fail" if result.not_checkable is None else "not checkable"


def summary(verdicts: list[FileVerdict]) -> dict[str, int]:
    counts = Counter(v.verdict for v in verdicts)
    kinds = ("pass", "fail", "not checkable", "bad input")
    return {"files": len(verdicts), **{k: counts.get(k, 0) for k in kinds}}
