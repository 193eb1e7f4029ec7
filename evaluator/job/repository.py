"""A module of a repository under check, in the job: the repository importable as its own configuration says, the
module's text replaced by the job's file, and the repository's tests run by pytest with its configuration and its
`conftest.py` files.

The repository is only read: the module is replaced by an import hook (a finder ahead of every other that loads the
job's file under the module's dotted name), never by writing into the repository, and no bytecode is written
beside its files. The job's `repository` field (the caller's ``repo_tests.ModuleTests.to_job``) says where it lies,
the module's dotted name, the folders that go first on `sys.path` and the node ids of the tests to run.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


def import_candidate(
    repository: dict[str, Any], path: str, on_loaded: Callable[[ModuleType], T]
) -> tuple[ModuleType, T]:
    """Import the repository's module with the text of the job's file at `path` in its place; `on_loaded` runs on
    the module as soon as its code has run, before its package (whose `__init__` may import names from it) goes on:
    what it wraps is what the rest of the repository binds. Returns the module and what `on_loaded` returned."""
    sys.dont_write_bytecode = True  # no `__pycache__` beside the repository's files, where a job can write at all
    for entry in reversed(repository["sys_path"]):
        sys.path.insert(0, entry)
    loaded: list[T] = []
    finder = CandidateFinder(repository["module"], path, lambda module: loaded.append(on_loaded(module)))
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    module = importlib.import_module(repository["module"])
    if not loaded:  # imported before the finder was in place: cannot happen in a fresh job process
        raise ImportError(f"{repository['module']} was imported before the candidate could replace it")
    return module, loaded[0]


def load_variant(repository: dict[str, Any], path: str, name: str) -> ModuleType:
    """Another text of the module (a variant a timing or screening compares with the one the tests ran), loaded
    beside it in its package under `name`: its relative imports resolve as the module's, while the repository (and
    the module's name in it) keeps the text its tests ran with. Its wrappers replay the calls those tests made."""
    from .user_code import load_module

    package = repository["module"].rpartition(".")[0]
    return load_module(path, f"{package}.{name}" if package else name)


class CandidateFinder(importlib.abc.MetaPathFinder):
    """Finds the module under check at the job's file; every other module where the repository has it."""

    def __init__(self, name: str, path: str, on_loaded: Callable[[ModuleType], object]):
        self.name, self.path, self.on_loaded = name, path, on_loaded

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        loader = _CandidateLoader(fullname, self.path, self.on_loaded)
        return importlib.util.spec_from_file_location(fullname, self.path, loader=loader)


class _CandidateLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, on_loaded: Callable[[ModuleType], object]):
        super().__init__(fullname, path)
        self.on_loaded = on_loaded

    def exec_module(self, module: ModuleType) -> None:
        super().exec_module(module)
        self.on_loaded(module)


def session_args(repository: dict[str, Any], scratch: Path) -> list[str]:
    """pytest's arguments for the repository's chosen tests: its root as rootdir, its configuration file (whose
    `addopts` are dropped: they may name plugins a job does not load), its conftest files, no cache written."""
    root = repository["root"]
    return [
        *(os.path.join(root, node) for node in repository["nodes"]),
        "-q",
        "-s",  # no capture: output goes to the job log
        "--rootdir",
        root,
        "-c",
        repository["config"] or os.devnull,
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
        "--basetemp",
        str(scratch / "pytest-tmp"),
    ]


def case_limits(repository: dict[str, Any], report: Callable[[dict[str, Any], BaseException | None], object]):
    """The pytest plugin of the check's limits on the repository's cases (``case_limits``), or None where it has
    none."""
    cases, budget = repository.get("cases_per_test"), repository.get("budget_s")
    if cases is None and budget is None:
        return None
    from .case_limits import CaseLimits

    return CaseLimits(cases, budget, case_name, report)


def case_name(nodeid: str) -> str:
    """A repository's case is named by its node id, file included (`tests/test_x.py::test_y[4]`): its tests live in
    several files."""
    return nodeid


def unloadable() -> str:
    """Why none of the repository's tests ran where pytest could not start its session."""
    return (
        "pytest could not load the repository's tests: its configuration, a conftest.py or what they import failed "
        "(a package missing from this environment?); the output says which"
    )
