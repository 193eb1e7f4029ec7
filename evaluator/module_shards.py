"""A module's tests in several jobs at once: the selected tests split by test file (a file's module fixtures and
imports stay in one job) into at most `jobs` shards, each checked as ``Evaluator.check_module`` checks the whole
(against a reference, each shard against the reference's run of the same tests), and one verdict made of theirs.

A repository's tests need no plugin of theirs for this (pytest-xdist may not be installed): each shard is a job of
its own, the pool runs as many at once as it may (``EvalOptions.max_concurrent``)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .progress import Progress
from .repo_tests import FoundTest, ModuleTests
from .results import CheckResult, Comparison
from .verdict import passed_words

if TYPE_CHECKING:
    from .api import Evaluator


def shards(target: ModuleTests, jobs: int) -> list[ModuleTests]:
    """`target`'s tests in at most `jobs` parts, whole test files each, the largest files first into the part with
    the fewest tests (the same parts every time); one part where there is one file or one job."""
    by_file: dict[str, list[FoundTest]] = {}
    for test in target.tests:
        by_file.setdefault(test.node.partition("::")[0], []).append(test)
    count = max(1, min(jobs, len(by_file)))
    parts: list[list[FoundTest]] = [[] for _ in range(count)]
    for _, tests in sorted(by_file.items(), key=lambda item: (-len(item[1]), item[0])):
        min(parts, key=len).extend(tests)
    order = {t.node: i for i, t in enumerate(target.tests)}
    return [replace(target, tests=tuple(sorted(p, key=lambda t: order[t.node]))) for p in parts if p]


async def check_module_in_jobs(
    evaluator: Evaluator,
    target: ModuleTests,
    jobs: int,
    *,
    source: str | None = None,
    against: str | Path | None = None,
    progress: Progress | None = None,
) -> CheckResult:
    """``Evaluator.check_module`` with the tests split over up to `jobs` jobs at once (``shards``), one verdict made of
    theirs (``merged``)."""
    parts = shards(target, jobs)
    if len(parts) == 1:
        return await evaluator.check_module(target, source=source, against=against, progress=progress)
    started = time.perf_counter()
    results = await asyncio.gather(
        *(evaluator.check_module(part, source=source, against=against, progress=progress) for part in parts)
    )
    return merged(list(results), time.perf_counter() - started)


def merged(results: list[CheckResult], duration_s: float) -> CheckResult:
    """One verdict of the shards' (in order): passed where each passed; else the first that did not, with every
    shard's tests, diagnostics and comparison."""
    tests = tuple(t for r in results for t in r.tests)
    diagnostics = tuple(d for r in results for d in r.diagnostics)
    comparisons = [r.comparison for r in results if r.comparison is not None]
    comparison = _merged_comparisons(comparisons) if comparisons else None
    caveats = tuple(dict.fromkeys(c for r in results for c in r.caveats))
    first = next((r for r in results if not r.ok), results[0])
    jobs = f" ({len(results)} jobs at once, by test file)"
    message = (passed_words(tests, comparison) if first.ok else first.message) + jobs
    return replace(first, message=message, tests=tests, diagnostics=diagnostics, comparison=comparison,
                   caveats=caveats, duration_s=duration_s)  # fmt: skip


def _merged_comparisons(comparisons: list[Comparison]) -> Comparison:
    return Comparison(
        ok=all(c.ok for c in comparisons),
        compared_outputs=sum(c.compared_outputs for c in comparisons),
        fresh_calls=sum(c.fresh_calls for c in comparisons),
        mismatches=tuple(m for c in comparisons for m in c.mismatches),
        notes=tuple(dict.fromkeys(n for c in comparisons for n in c.notes)),
        probes_skipped=sum(c.probes_skipped for c in comparisons),
        shape_calls=sum(c.shape_calls for c in comparisons),
        value_calls=sum(c.value_calls for c in comparisons),
    )
