"""A file of `tests/fixtures` checked, alone or against another, by a fresh evaluator on Triton's CPU interpreter."""

from __future__ import annotations

import asyncio
from pathlib import Path

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.results import CheckResult

FIXTURES = Path(__file__).parent / "fixtures"


def check_fixture(name: str, against: str | None, *, timeout_s: float, **options) -> CheckResult:
    """`name` checked against `against` (both under `tests/fixtures`; None: alone) with these evaluation options."""

    async def go():
        opts = EvalOptions(backend="interpreter", timeout_s=timeout_s, spares=0, **options)
        async with Evaluator(opts) as ev:
            return await ev.check(FIXTURES / name, against=FIXTURES / against if against else None)

    return asyncio.run(go())
