"""A file of `tests/fixtures` checked, alone or against another, by a fresh evaluator on Triton's CPU interpreter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.results import CheckResult

FIXTURES = Path(__file__).parent / "fixtures"


def check_fixture(
    name: str, against: str | None, *, timeout_s: float, progress: Callable[[str], None] | None = None, **options
) -> CheckResult:
    """`name` checked against `against` (both under `tests/fixtures`; None: alone) with these evaluation options
    (`progress` is told what runs)."""

    async def go():
        opts = EvalOptions(backend="interpreter", timeout_s=timeout_s, spares=0, **options)
        async with Evaluator(opts) as ev:
            return await ev.check(FIXTURES / name, against=FIXTURES / against if against else None, progress=progress)

    return asyncio.run(go())
