"""How much of a repository's tests one check runs: at most so many cases of each parametrized test function, chosen
the same way in every job (spread over its cases in collection order, so over its parameter grid), and no case
started past a time budget once one has run. What is left out is reported as such (kind "left out"), never as a
pass or a failure: the caller says what ran and what did not.

The repository's job dict carries the limits (`cases_per_test`, `budget_s`; None: none), set by the caller from its
evaluation options (``check.check_job``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ..shared.test_ids import test_function

LEFT_OUT = "left out: "  # how a case a limit kept from running is named in its skip reason and its message


def spread(count: int, keep: int) -> list[int]:
    """Which of `count` cases to keep (`keep` of them, at least 1): the first, the last and evenly between, always
    the same ones."""
    if keep >= count:
        return list(range(count))
    if keep == 1:
        return [0]
    return sorted({round(i * (count - 1) / (keep - 1)) for i in range(keep)})


class CaseLimits:
    """The pytest plugin of the limits. `name_of(nodeid)`: a case's name; `report(entry, None)`: takes the entry of
    each case left out by sampling (those left out by the budget are reported by pytest's skip, ``is_left_out``)."""

    def __init__(
        self,
        cases_per_test: int | None,
        budget_s: float | None,
        name_of: Callable[[str], str],
        report: Callable[[dict[str, Any], BaseException | None], object],
    ):
        self.cases_per_test = cases_per_test
        self.budget_s = budget_s
        self.name_of = name_of
        self.report = report
        self.not_sampled: list[dict[str, Any]] = []
        self.started: float | None = None
        self.ran = 0

    @pytest.hookimpl(tryfirst=True)  # before the case plugin chooses what it runs: it never sees a case left out
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        if not self.cases_per_test:
            return
        by_function: dict[str, list] = {}
        for item in items:
            by_function.setdefault(test_function(self.name_of(item.nodeid)), []).append(item)
        kept_ids: set[int] = set()
        for function, cases in by_function.items():
            chosen = spread(len(cases), self.cases_per_test)
            kept_ids.update(id(cases[i]) for i in chosen)
            why = (
                f"{LEFT_OUT}not sampled ({len(chosen)} of the {len(cases)} cases of {function} run, spread over its "
                "parameters; all run where no case limit is set)"
            )
            self.not_sampled += [{"name": self.name_of(c.nodeid), "kind": "left out", "message": why}
                                 for i, c in enumerate(cases) if i not in chosen]  # fmt: skip
        dropped = [item for item in items if id(item) not in kept_ids]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if id(item) in kept_ids]

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.started = time.monotonic()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.budget_s is None or self.started is None or self.ran == 0:
            self.ran += 1
            return  # the first case always runs: a check that ran nothing would say nothing
        spent = time.monotonic() - self.started
        if spent > self.budget_s:
            pytest.skip(f"{LEFT_OUT}past the budget ({spent:.1f} s spent of {self.budget_s:g} s)")
        self.ran += 1

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        for entry in self.not_sampled:
            self.report(entry, None)


def is_left_out(reason: str) -> bool:
    """Is a skip reason a limit's (the case was left out, not skipped by the test)?"""
    return reason.startswith(LEFT_OUT)
