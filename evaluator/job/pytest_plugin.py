"""Pytest-style tests run by pytest itself, inside a job process, on the module the worker loaded and instrumented.

`run_session` runs pytest as a library on the job's file with `CasePlugin`, so parametrize, fixtures (``request``,
``tmp_path``, ``monkeypatch``, module fixtures), ``skip``/``skipif``/``xfail`` and test classes behave as users
expect, while the evaluator keeps what it needs:

* collection uses the worker's module object (already imported, its wrapper functions proxied by the
  ``CallRecorder``), never a second import of the file;
* selection by test function: the job's tests run; benchmark cases (``test_performance*``) are reported as
  benchmarks in a check and are the only cases a bench runs; the suite harness's result-saving hooks never run;
* per case: the job's preparation (seeding) before its fixtures, kernel launches counted, wrapper calls recorded
  during the test call, and one outcome named by its pytest id (``test_x[4-fp16]``, ``TestK::test_y``) with its
  output: the test's return value, or its ``result_gold`` entry in the ROCm-benchmark layout.

pytest writes to the job log (its capture is off); no config file, conftest or environment plugin is loaded, and
``tmp_path`` lives in the job's scratch directory.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ..shared.test_ids import chosen, sanitized_test_id, test_function
from . import error_reports, user_code
from .case_limits import is_left_out
from .launch_modes import STATE

_MODULE = pytest.StashKey[ModuleType]()


class LoadedModule(pytest.Module):
    """The job's file as pytest sees it, backed by the module object the worker already imported."""

    def _getobj(self) -> ModuleType:
        return self.config.stash[_MODULE]


@dataclass
class SessionPlan:
    """What one pytest session runs. `tests`: test functions (`test_x`, `TestK::test_y`) whose cases run;
    `benchmarks`: functions whose cases are only reported (kind "benchmark"); anything else is deselected."""

    tests: frozenset[str]
    benchmarks: frozenset[str] = frozenset()
    output_source: str = "return"  # "return" | "result_gold"


@dataclass
class _Case:
    name: str
    started: float
    threads: set[int]
    reports: list[tuple[str, pytest.TestReport, BaseException | None]] = field(default_factory=list)
    output: Any = None
    has_output: bool = False
    output_of: str = "return"


OnCase = Callable[[dict[str, Any], BaseException | None], "str | None"]


class CasePlugin:
    """The pytest plugin. `on_case(entry, error)` receives each finished case (entry as in the worker's check
    result, plus `_return` when it has an output) and may return a reason to stop the session (a lost GPU)."""

    def __init__(
        self,
        module: ModuleType,
        path: Path,
        plan: SessionPlan,
        recorder: Any,
        gpu: bool,
        on_case: OnCase,
        before_test: Callable[[], None] | None = None,
        on_start: Callable[[str], None] | None = None,
        name_of: Callable[[str], str] | None = None,
    ):
        self.module = module
        self.path = path.resolve()
        self.plan = plan
        self.recorder = recorder
        self.gpu = gpu
        self.on_case = on_case
        self.before_test = before_test
        self.on_start = on_start
        self.name_of = name_of or case_id  # a case's name from its node id (a repository's: the node id itself)
        self.selected: list[str] = []
        self.benchmarks: list[str] = []
        self.finished: set[str] = set()
        self.collect_errors: list[dict[str, Any]] = []
        self.stop_reason: str | None = None
        self._case: _Case | None = None

    # ------------------------------------------------------------------------------------ collection

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[_MODULE] = self.module

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(self, module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
        if Path(module_path).resolve() == self.path:
            return LoadedModule.from_parent(parent, path=Path(module_path))
        return None

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append(
                {"name": self.name_of(report.nodeid) or "collection", "kind": "error", "message": _longrepr(report)}
            )

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        keep, benchmarks, dropped = [], [], []
        for item in items:
            name = self.name_of(item.nodeid)
            if chosen(name, self.plan.tests):
                keep.append(item)
            elif test_function(name) in self.plan.benchmarks:
                benchmarks.append(item)
            else:
                dropped.append(item)
        if benchmarks or dropped:
            config.hook.pytest_deselected(items=benchmarks + dropped)
        items[:] = keep
        self.selected = [self.name_of(i.nodeid) for i in keep]
        self.benchmarks = [self.name_of(i.nodeid) for i in benchmarks]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        for name in self.benchmarks:
            message = "a benchmark case: timed by the bench stage, not checked"
            self.on_case({"name": name, "kind": "benchmark", "message": message}, None)

    # ------------------------------------------------------------------------------------ running

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        name = self.name_of(item.nodeid)
        if self.on_start is not None:
            self.on_start(name)
        STATE.launches.clear()
        if self.before_test is not None:
            self.before_test()  # before the fixtures, which may draw the inputs
        self._case = _Case(name, time.perf_counter(), user_code.live_threads())
        try:
            return (yield)
        finally:
            case, self._case = self._case, None
            self.finished.add(name)
            entry, error = self._outcome(case)
            reason = self.on_case(entry, error)
            if reason:
                self.stop_reason = reason
                item.session.shouldstop = reason

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        previous, self.recorder.recording = self.recorder.recording, True
        try:
            return (yield)
        finally:
            self.recorder.recording = previous

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """Call the test as pytest does, keeping its return value (an output, as in direct-call tests)."""
        function = pyfuncitem.obj
        if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            return None  # pytest's own implementation reports that async tests need a plugin
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        returned = function(**args)
        user_code.synchronize(self.gpu)
        case = self._case
        if case is not None:
            if self.plan.output_source == "result_gold":
                gold = getattr(self.module, "result_gold", None)
                key = sanitized_test_id(case.name)
                if isinstance(gold, dict) and key in gold:
                    case.output, case.has_output, case.output_of = gold[key], True, f"result_gold[{key!r}]"
            else:
                case.output, case.has_output = returned, True
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if self._case is not None:
            error = call.excinfo.value if call.excinfo is not None else None
            self._case.reports.append((call.when, report, error))
        return report

    # ------------------------------------------------------------------------------------ outcomes

    def _outcome(self, case: _Case) -> tuple[dict[str, Any], BaseException | None]:
        entry: dict[str, Any] = {"name": case.name, "kind": "pass", "message": ""}
        error: BaseException | None = None
        for when, report, exc in case.reports:
            xfail = getattr(report, "wasxfail", None)
            if report.failed:
                error = exc
                if exc is not None and not isinstance(exc, pytest.fail.Exception):
                    described = error_reports.describe_error(exc, str(self.path), self.module)
                    kind = "assert" if described["is_assertion"] and when == "call" else "error"
                    message = described["message"] if when == "call" else f"in {when}: {described['message']}"
                    entry.update(kind=kind, message=message, error=described)
                else:  # pytest.fail(), a strict XPASS, or a failure pytest reports without an exception
                    entry.update(kind="assert" if when == "call" else "error", message=_longrepr(report))
                break
            if report.skipped:
                kind = "xfail" if xfail is not None else "skipped"
                reason = xfail if xfail is not None else _skip_reason(report)
                entry.update(kind=kind, message=f"{'expected failure' if xfail is not None else 'skipped'}: {reason}")
                if xfail is None and is_left_out(reason):  # a check's limit kept it from running (``case_limits``)
                    entry.update(kind="left out", message=reason)
                break
            if when == "call" and xfail is not None:
                entry.update(kind="xpass", message=f"passed although marked xfail ({xfail})".replace(" ()", ""))
        if not case.reports:
            entry.update(kind="error", message="pytest did not run this case")
        entry["duration_s"] = time.perf_counter() - case.started
        entry["launches"] = dict(STATE.launches)
        leftover = user_code.live_threads() - case.threads
        if leftover and entry["kind"] in ("pass", "xpass"):
            entry.update(kind="error", message=f"{case.name} left {len(leftover)} thread(s) running after it returned")
        if entry["kind"] in ("pass", "xpass") and case.has_output:
            entry["_return"], entry["output_of"] = case.output, case.output_of
        return entry, error


def case_id(nodeid: str) -> str:
    """A case's name: its pytest node id without the file (`f.py::TestK::test_y[1]` → `TestK::test_y[1]`)."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else ""


def run_session(
    plugin: CasePlugin, scratch: Path, args: list[str] | None = None, others: tuple[object, ...] = ()
) -> list[dict[str, Any]]:
    """Run pytest on the plugin's file (or with `args`: a repository's tests, ``repository.session_args``; `others`:
    plugins beside it, a repository's ``case_limits.CaseLimits``); returns entries for what did not run as a case
    (collection errors, cases left after a stop, selected tests pytest never collected)."""
    basetemp = scratch / "pytest-tmp"
    args = args or [
        str(plugin.path),
        "-q",
        "-s",  # no capture: output goes to the job log
        "-c",
        os.devnull,  # no config file of the user's tree
        "--rootdir",
        str(plugin.path.parent),
        "--noconftest",
        "-p",
        "no:cacheprovider",
        "--basetemp",
        str(basetemp),
    ]
    saved = {k: os.environ.pop(k, None) for k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        code = pytest.main(args, plugins=[plugin, *others])
    finally:
        os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        raise RuntimeError(f"pytest could not run the tests (exit code {int(code)}); see the job log")
    extra = list(plugin.collect_errors)
    for name in plugin.selected:
        if name not in plugin.finished:
            why = plugin.stop_reason or "the session stopped early"
            extra.append({"name": name, "kind": "error", "message": f"not run: {why}"})
    if not plugin.collect_errors:
        for test in sorted(t for t in plugin.plan.tests if not any(chosen(n, (t,)) for n in plugin.selected)):
            extra.append({"name": test, "kind": "error", "message": f"pytest collected no case of {test}"})
    return extra


def _longrepr(report: pytest.TestReport | pytest.CollectReport) -> str:
    text = str(report.longrepr or "").strip()
    lines = text.splitlines()
    return "\n".join(lines[-15:]) if lines else "failed"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")
