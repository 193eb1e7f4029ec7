"""Modules of a repository in the editor: a document with `@triton.jit` kernels and no embedded test is a module of
its repository, judged by the repository's own pytest tests, found as `geak check MODULE` finds them
(``geak.evaluator``'s `module_tests`: the pytest configuration and the import graph, or `[tool.geak.tests]`).

`ModuleTargets` finds a module's tests (in a thread) and keeps what it found until a file that can change it is
saved or changes on disk (a test file, a `conftest.py`, the repository's configuration), and says which open
modules such a file concerns. A `ModuleTarget` is what the checks, timings and Optimize run a module with.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

from geak.evaluator import (
    BenchResult,
    CheckResult,
    EvalOptions,
    Evaluator,
    ModuleTests,
    RepositoryError,
    module_tests,
    needs_repository_tests,
)

from .engine import Engine

CONFIGURATION = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", "conftest.py")
NOT_A_MODULE = "no embedded test, and it is not a module of a repository with tests of its own"


@dataclass(frozen=True)
class ModuleTarget:
    """A module and the repository tests that judge it."""

    tests: ModuleTests

    @property
    def root(self) -> str:
        """The repository's folder: jobs must be able to read it (never write it)."""
        return str(self.tests.repository.root)

    @property
    def test_files(self) -> frozenset[Path]:
        """The test files the module's tests are in (absolute)."""
        root = self.tests.repository.root
        return frozenset(root / t.node.partition("::")[0] for t in self.tests.tests)

    async def check(self, evaluator: Evaluator, text: str) -> CheckResult:
        """`text` in the module's place, judged by the repository's tests (as `geak check MODULE` judges it)."""
        return await evaluator.check_module(self.tests, source=text)

    async def bench(self, evaluator: Evaluator, text: str) -> BenchResult:
        """The captured calls of the module's wrappers during its tests, timed with `text` in its place."""
        return await evaluator.bench(self.tests.path, source=text, check_first=False, module=self.tests)

    def concerns(self, path: Path) -> bool:
        """Can a change of the file at `path` change this module's tests, or how they run? One of its test files, a
        `conftest.py` or configuration file of its repository."""
        root = self.tests.repository.root
        return path in self.test_files or (path.name in CONFIGURATION and root in path.parents)

    def searched(self, path: Path) -> bool:
        """Is `path` a Python file of the folders its tests were looked for in (a new test of it may lie there)?"""
        return path.suffix == ".py" and any(folder in path.parents for folder in self.tests.searched)


@dataclass(frozen=True)
class ModuleFinding:
    """What looking for a module's tests found: the target, or why there is none."""

    target: ModuleTarget | None
    problem: str = ""


def find_module(path: str) -> ModuleFinding:
    """The repository tests of the file at `path` (a module with kernels and no test of its own), or why none."""
    file = Path(path)
    if not needs_repository_tests(file):
        return ModuleFinding(None, NOT_A_MODULE)
    try:
        return ModuleFinding(ModuleTarget(module_tests(file)))
    except RepositoryError as e:
        return ModuleFinding(None, str(e))
    except OSError as e:  # the file went away meanwhile
        return ModuleFinding(None, f"cannot read {path}: {e}")


class ModuleTargets:
    """The modules' findings, by path: found once, kept until a file that concerns them changes."""

    def __init__(self) -> None:
        self._found: dict[str, ModuleFinding] = {}
        self._seen: dict[Path, int] = {}  # file -> its modification time when its change was last handled

    def known(self, path: str) -> ModuleFinding | None:
        return self._found.get(path)

    async def find(self, path: str, *, again: bool = False) -> ModuleFinding:
        """The finding of the module at `path` (looked for in a thread the first time, or `again`)."""
        found = self._found.get(path)
        if found is None or again:
            found = await asyncio.to_thread(find_module, path)
            self._found[path] = found
        return found

    def changed(self, path: str) -> list[str]:
        """A file was saved or changed on disk: forget the findings it can change (those that found no test, where it
        is a Python or configuration file; those whose tests were looked for where it lies), and return the modules
        whose tests or configuration it is (their checks must run again)."""
        file = Path(path).resolve()
        try:
            stamp = file.stat().st_mtime_ns
        except OSError:
            stamp = -1  # removed
        if self._seen.get(file) == stamp:
            return []  # this change was handled already (the editor's save, then the watcher's event)
        self._seen[file] = stamp
        again = []
        for module, found in list(self._found.items()):
            target = found.target
            if module == path:
                continue
            if target is None:
                stale = file.suffix == ".py" or file.name in CONFIGURATION
            else:
                stale = target.concerns(file) or target.searched(file)
                if target.concerns(file):
                    again.append(module)
            if stale:
                del self._found[module]
        return again

    def forget(self, path: str) -> None:
        self._found.pop(path, None)


@dataclass(frozen=True)
class ModuleLimits:
    """What a module's check on save runs of its tests (``geak.moduleBudgetS``, ``geak.moduleCasesPerTest``): the
    evaluator's `tests_budget_s` and `cases_per_test` (None: no limit). Optimize's confirmation runs every case."""

    budget_s: float | None = None
    cases_per_test: int | None = None


class RepositoryEvaluators:
    """One warm evaluator per repository whose modules are checked: its jobs may read that repository (never write
    it), and its checks run a module's tests within `limits`."""

    def __init__(self, engine: Engine, limits: ModuleLimits | None = None):
        self.engine = engine
        self.limits = limits or ModuleLimits()
        self._evaluators: dict[str, Evaluator] = {}
        self._lock = asyncio.Lock()

    async def get(self, root: str, options: EvalOptions) -> Evaluator:
        """The evaluator of the repository at `root` (made on the engine's loop at first use, with `options`)."""
        async with self._lock:
            if root not in self._evaluators:
                limited = replace(options, tests_budget_s=self.limits.budget_s,
                                  cases_per_test=self.limits.cases_per_test)  # fmt: skip
                self._evaluators[root] = await self.engine.run(made_evaluator(limited, (root,)))
            return self._evaluators[root]

    async def close(self, limits: ModuleLimits) -> None:
        """Close every repository's evaluator (the next check makes a new one, with `limits`)."""
        async with self._lock:
            evaluators, self._evaluators, self.limits = list(self._evaluators.values()), {}, limits
        for evaluator in evaluators:
            await self.engine.run(evaluator.aclose())

    def open(self) -> list[Evaluator]:
        return list(self._evaluators.values())


async def made_evaluator(options: EvalOptions, readable: tuple[str, ...]) -> Evaluator:
    """An evaluator, made on the engine's loop (its pool belongs to that loop)."""
    return Evaluator(options, readable=readable)
