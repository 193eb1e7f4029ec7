"""The calls a bench or screen job times: one variant imported and its bench functions run (pytest benchmark cases
through pytest), each call of a wrapper function captured with its arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..shared.protocol import BenchJob

if TYPE_CHECKING:  # capture imports torch at its top; the job's modules import it where they use it
    from .capture import RecordedCall

Send = Callable[[dict[str, Any]], None]


def capture_bench_calls(job: BenchJob, spec: dict[str, Any], send: Send, estimate=None) -> dict[str, Any]:
    """Import one variant and run its bench functions (pytest benchmark cases through pytest), capturing the wrapper
    calls a timing may time (``calls_to_time`` chooses): {"module", "recorder", "calls", "kernels"}, or an error
    result. `estimate(fn)`: the timer's first timing of a benchmarked callable, which
    `PytestBenchmarker.run_benchmark` reports (None: no GPU)."""
    import torch

    from . import error_reports, rocm_bench, user_code
    from .capture import CallRecorder, unique_calls
    from .launch_modes import STATE

    seed = job.seed
    label = spec["label"]
    repository = spec.get("repository")  # a repository's module: its tests run with this text in the module's place
    recording = lambda m: CallRecorder(
        m, spec["wrappers"], keep_args=True, describe_values=False, launches=lambda: sum(STATE.launches.values())
    )
    try:
        user_code.seed_everything(seed)
        if repository is not None:
            from .repository import import_candidate

            module, recorder = import_candidate(repository, spec["path"], recording)
        else:
            module = user_code.load_module(spec["path"], spec["module_name"])
            recorder = recording(module)
    except BaseException as e:
        return {
            "error": f"{label}: import failed",
            "error_detail": error_reports.describe_error(e, spec["path"], None),
            "label": label,
        }
    collector = rocm_bench.Collector(recorder, estimate)
    recorder.recording = True
    with rocm_bench.collecting(collector):
        pytest_functions = job.pytest_functions
        failed = _bench_pytest(job, spec, module, recorder, send) if pytest_functions else None
        if failed:
            return failed
        for name in (n for n in job.functions if n not in pytest_functions):
            send({"event": "progress", "bench": f"{label}:{name}"})
            try:
                user_code.seed_everything(seed)
                getattr(module, name)()
                torch.cuda.synchronize()
            except BaseException as e:
                return {
                    "error": f"{label}: {name}() failed",
                    "label": label,
                    "error_detail": error_reports.describe_error(e, spec["path"], module),
                }
    recorder.recording = False
    calls = unique_calls(collector.timed_calls(), recorder.limit)
    if not calls:
        what = ", ".join(collector.unwrapped()) or ", ".join(job.functions)
        return {
            "error": f"{label}: {what} called no wrapper function (a function that launches the kernels), so there "
            "is no call to time"
        }
    return {"module": module, "recorder": recorder, "calls": calls, "kernels": set(spec["kernels"])}


def variant_of(spec: dict[str, Any], captured: dict[str, Any]) -> dict[str, Any]:
    """Another text of a repository's module beside the one whose tests ran (`captured`, ``capture_bench_calls``):
    loaded in its package (``repository.load_variant``), its wrappers given the calls those tests made."""
    from . import error_reports
    from .capture import CallRecorder
    from .repository import load_variant

    try:
        module = load_variant(spec["repository"], spec["path"], spec["module_name"])
    except BaseException as e:
        return {
            "error": f"{spec['label']}: import failed",
            "error_detail": error_reports.describe_error(e, spec["path"], None),
            "label": spec["label"],
        }
    recorder = CallRecorder(module, spec["wrappers"], keep_args=False, limit=0, describe_values=False)
    missing = sorted({c.wrapper for c in captured["calls"]} - recorder.originals.keys())
    if missing:
        why = f"{spec['label']}: has no {', '.join(missing)}, whose calls the tests made"
        return {"error": why, "label": spec["label"]}
    return {"module": module, "recorder": recorder, "calls": list(captured["calls"]), "kernels": set(spec["kernels"])}


@dataclass(frozen=True)
class TimedCalls:
    """Of one variant's captured calls, those a timing times (`calls`) and the signatures of those it leaves out
    for launching no Triton kernel (`helpers`)."""

    calls: list[RecordedCall]
    helpers: list[str]


def calls_to_time(calls: list[RecordedCall], limit: int, like: list[str] | None = None) -> TimedCalls:
    """The calls of `calls` (distinct signatures) a timing times, at most `limit`. `like`: the signatures the
    reference's calls were chosen by, in their order (every variant times the reference's calls, whatever its own
    launch). Else those that launched a Triton kernel, unless none did: a call that launches none (a helper that
    packs weights in Python, say) is not the kernels' time: a host-bound helper of hundreds of ms a call beside a
    kernel of well under a millisecond would decide the speedup, and its timing hold the device alone for seconds."""
    if like is not None:
        by_signature = {c.signature: c for c in reversed(calls)}
        return TimedCalls([by_signature[s] for s in like if s in by_signature] or calls[:limit], [])
    kernels = [c for c in calls if c.launched != 0]
    if not kernels:
        return TimedCalls(calls[:limit], [])
    return TimedCalls(kernels[:limit], [c.signature for c in calls if c.launched == 0])


def _bench_pytest(job: BenchJob, spec: dict[str, Any], module, recorder, send: Send) -> dict[str, Any] | None:
    """Run the file's pytest benchmark cases (the wrapper calls of their benchmarked callables are captured); the
    error result of the first case that fails, else None."""
    from . import user_code
    from .pytest_plugin import CasePlugin, SessionPlan, run_session
    from .repository import case_limits, case_name, session_args, unloadable

    label, path = spec["label"], Path(spec["path"])
    repository = spec.get("repository")
    failures: list[dict[str, Any]] = []

    def record(entry: dict[str, Any], error: BaseException | None) -> str | None:
        if entry["kind"] in ("assert", "error"):
            failures.append(entry)
            return "a benchmark case failed"
        return None

    plugin = CasePlugin(
        module,
        path,
        SessionPlan(frozenset(job.pytest_functions)),
        recorder,
        True,
        on_case=record,
        before_test=lambda: user_code.seed_everything(job.seed),
        on_start=lambda name: send({"event": "progress", "bench": f"{label}:{name}"}),
        **({"name_of": case_name} if repository is not None else {}),
    )
    if repository is None:
        failures += [e for e in run_session(plugin, Path(job.scratch)) if e["kind"] == "error"]
    else:  # the repository's tests, with its configuration, under the check's limits
        limits = case_limits(repository, record)
        args = session_args(repository, Path(job.scratch))
        try:
            ended = run_session(plugin, Path(job.scratch), args, (limits,) if limits is not None else ())
        except RuntimeError:  # its configuration or a conftest.py failed
            ended = [{"name": "collection", "kind": "error", "message": unloadable()}]
        failures += [e for e in ended if e["kind"] == "error"]
    if not failures:
        return None
    first = failures[0]
    return {
        "error": f"{label}: {first['name']} failed",
        "label": label,
        "error_detail": first.get("error") or {"message": first["message"], "frames": []},
    }
