"""The bench job: a timing of each variant's captured calls (reference first, if any), interleaved on the device
alone, with the outputs of its timed calls saved for the caller to compare."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from ..shared.protocol import REPRODUCED, BenchJob, timed_output_file, timed_output_sets
from .bench_capture import Send, calls_to_time, capture_bench_calls, variant_of
from .bench_preparation import Laps, made_ready_ahead, prepare_timers, ready_calls

_MONOTONIC = time.monotonic  # bound before any user code: a timing's time limit


def run_bench(job: BenchJob, info: Any, send) -> dict[str, Any]:
    """Time the captured calls of each variant (reference first, if any) interleaved, on shared input sets that
    rotate and change values between timed calls; report samples, launches and device time per call, and save the
    outputs of late timed-like calls for the caller to compare (``timing_rules``)."""
    import torch

    from ..shared.sequential import RoundPlan, settled
    from . import device_grant, error_reports, launch_modes, poisoning, timing
    from .compile import trusted_cache
    from .screening import device_limits

    save = torch.save  # bound before any user code is imported
    poisoning.set_poisoning(False)
    trusted_cache.reuse_autotuning(False)
    laps, ahead_laps = Laps(), Laps()
    # the device is shared until the timing starts: autotuned kernels only compile their configs meanwhile
    with launch_modes.tuning_deferred(), launch_modes.configs_compiled_ahead():
        captured = _bench_variants(job, send)
        if "error" in captured:
            return captured
        variants = captured["variants"]
        labels = list(variants)
        signatures = {label: [c.signature for c in v["calls"]] for label, v in variants.items()}
        if len({tuple(s) for s in signatures.values()}) > 1:
            return {"error": "the variants' captured calls differ: " + json.dumps(signatures)}
        ready = made_ready_ahead(job, variants, labels, send, ahead_laps) if info.backend != "interpreter" else None
        if ready is not None and "error" in ready:
            return ready
    send({"event": "progress", "bench": "waiting for the device alone"})
    device_grant.DEVICE_GRANTS.wait_alone()
    granted = _MONOTONIC()
    if info.backend == "interpreter":
        return {"error": "timing needs a GPU: no CUDA or ROCm device is visible"}
    planned = RoundPlan.from_dict(job.rounds)

    # identical kernels of the variants are tuned once, on the first's calls; each config timed by a few calls
    with launch_modes.twins_tuned_alike(), launch_modes.tuned_with(timing.tuning_bench):
        if ready is None:
            ready = ready_calls(job, variants, labels, send, laps)
        prepared = ready if "error" in ready else prepare_timers(job, ready["calls"], labels, planned, laps)
    if "error" in prepared:
        return prepared
    timers, per_call = prepared["timers"], prepared["calls"]

    plan = planned.for_calls(
        [(entry["method"], entry["estimate_ms"], entry["graph_nodes"]) for entry in per_call[labels[0]]]
    )
    stop = None
    timed_out = False
    rounds_from = _MONOTONIC()
    if set(labels) == {"reference", "candidate"}:

        def stop(out: dict[str, list[list[float]]]) -> bool:
            nonlocal timed_out
            if settled(out["reference"], out["candidate"], plan):
                return True
            timed_out = bool(plan.max_s) and _MONOTONIC() - rounds_from > plan.max_s
            return timed_out

    lag_before = timing.device_lag_ms()
    send({"event": "progress", "bench": "timed rounds", "batch": "start"})
    try:
        rounds = timing.interleaved(timers, plan, seed=job.seed, stop=stop)
    except timing.TimingFooled as e:
        return {"error": str(e), "fooled": True}
    except Exception as e:  # user code that fails only when timed
        return {"error": "a call failed while it was timed", "error_detail": error_reports.describe_error(e, "", None)}
    send({"event": "progress", "bench": "timed rounds", "batch": "end"})
    phases_s = {
        **{f"ahead {part}": seconds for part, seconds in ahead_laps.seconds.items()},
        "prepare": rounds_from - granted,
        **{f"prepare {part}": seconds for part, seconds in laps.seconds.items()},
        "rounds": _MONOTONIC() - rounds_from,
    }
    device_lag_ms = max(lag_before, timing.device_lag_ms())
    device_grant.DEVICE_GRANTS.release()  # measured: the outputs' check and the exit share the device
    for label in labels:
        for i, entry in enumerate(per_call[label]):
            timer = timers[label][i]
            samples = [r[i] for r in rounds[label]]
            entry.update(
                samples=samples,
                median_ms=statistics.median(samples),
                timed_calls=timer.timed_calls,
                timed_launches=timer.launches_per_call(),
            )
    if len(labels) > 1:
        send({"event": "progress", "bench": "checking the outputs of the timed calls"})
        try:
            _save_timed_outputs(timers, per_call, Path(job.outputs_dir), save)
        except Exception as e:
            detail = error_reports.describe_error(e, "", None)
            return {"error": "a call failed when the outputs of the timed calls were checked", "error_detail": detail}
    device_ms = {label: sum(t.device_ms for t in timers[label]) for label in labels}
    tuned = {label: autotune_choices(variants[label]["module"]) for label in labels}
    return {
        "calls": per_call,
        "labels": labels,
        "device_ms": device_ms,
        "autotune": tuned,
        "device_lag_ms": device_lag_ms,
        "device_limits": device_limits(),
        "rounds_timed_out": timed_out,
        "helpers": captured["helpers"],
        "phases_s": phases_s,
    }


def autotune_choices(module) -> dict[str, dict[str, str]]:
    """What each `@triton.autotune` kernel of a module chose (informational: why an interval is wide): kernel ->
    tuning key -> config."""
    from triton.runtime.autotuner import Autotuner

    choices: dict[str, dict[str, str]] = {}
    for value in list(vars(module).values()):
        fn = value
        for _ in range(4):  # through @triton.heuristics wrappers
            if fn is None or isinstance(fn, Autotuner):
                break
            try:
                fn = getattr(fn, "fn", None)
            except Exception:
                fn = None
        if isinstance(fn, Autotuner):
            name = getattr(fn.base_fn, "__name__", "?")
            choices[name] = {str(key): str(config) for key, config in dict(fn.cache).items()}
    return choices


def _bench_variants(job: BenchJob, send: Send) -> dict[str, Any]:
    """Load each variant and run its bench functions once, capturing the wrapper calls (with cloned arguments); every
    variant times the calls the reference's chose (``calls_to_time``; the first variant's where none is labelled so).
    A repository's module runs its tests with the first variant in the module's place; the others replay its calls.
    {"variants": {label: variant}, "helpers": the signatures left untimed}, or {"error": ...} when one fails."""
    from . import timing

    variants: dict[str, Any] = {}
    for spec in job.modules:
        first = next(iter(variants.values()), None)
        if first is not None and spec.get("repository") is not None:  # a repository's module: its tests ran once
            captured = variant_of(spec, first)
        else:
            captured = capture_bench_calls(job, spec, send, timing.estimate_ms)
        if "error" in captured:
            return captured
        variants[spec["label"]] = captured
    chooser = "reference" if "reference" in variants else next(iter(variants))
    chosen = calls_to_time(variants[chooser]["calls"], job.max_calls)
    like = [c.signature for c in chosen.calls]
    for label, v in variants.items():
        v["calls"] = chosen.calls if label == chooser else calls_to_time(v["calls"], job.max_calls, like).calls
    return {"variants": variants, "helpers": chosen.helpers}


def _save_timed_outputs(timers, entries: dict[str, list[dict[str, Any]]], out_dir: Path, save) -> None:
    """After all the timed calls: each variant's outputs on the same fresh values at its timed addresses (the
    reference's twice, to tell nondeterminism from cheating), saved under the names the caller expects
    (``protocol``). New allocations are poisoned meanwhile, so an output left unwritten cannot hold a right answer
    by chance."""
    from . import poisoning, timing
    from .capture import call_outputs, same_outputs

    poisoning.set_poisoning(True)
    try:
        first_label = next(iter(entries))  # the reference: its output size picks the checked sets for every variant
        for label, label_timers in timers.items():
            for i, timer in enumerate(label_timers):
                checked = timed_output_sets(len(timer.sets), entries[first_label][i]["certain_bytes"])
                first: dict[int, Any] = {}
                for run in ("", "again") if label == "reference" else ("",):
                    for k, (ret, args, kwargs) in timer.check_outputs(checked, timing.CHECK_STEP).items():
                        outputs = call_outputs(ret, args, kwargs)
                        if run and same_outputs(first[k], outputs):
                            outputs = REPRODUCED  # gigabytes that need no saving, reading back and comparing
                        first.setdefault(k, outputs)
                        save(outputs, out_dir / timed_output_file(label, i, k, run))
    finally:
        poisoning.set_poisoning(False)
