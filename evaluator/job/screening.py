"""The screening job: many variants of a file's launch configuration tried on the test's own inputs in one process.

1. The reference module runs its test (or bench) functions once, and its wrapper calls are captured with their
   arguments (``bench_capture.capture_bench_calls``), while the device is shared.
2. The variants' kernels are compiled in parallel, in the order given, while the compile share of the time lasts
   (those not compiled in it are not run): their wrappers run on the captured arguments with every launch turned
   into a compile (``launch_modes.compile_only``) under Triton's ``AsyncCompileMode``, whose compiles then run in forked
   processes (``compile.forked``; where the Triton has the mode, else each compiles at its first run).
3. The reference (twice: which outputs it reproduces) and each variant run every captured call on a fresh copy of
   its arguments; the outputs are saved under the protocol's names for the caller to compare, and the compiled
   kernels' facts are kept (registers, spills, shared memory, warps, stages). An output bit for bit the reference's
   first one is not saved again, only named in the report (``identical``), as an argument a call left as it was is
   only marked: saving and roughly checking calls' outputs of hundreds of MB each, every one like the reference's,
   would take most of each variant's run, and so leave a search's time to few configurations.
   A configuration the device cannot run (out of resources) or the compiler refuses is skipped, not failed.
4. On a GPU, with the device alone, the variants that ran, launched kernels other than the reference's and gave
   roughly the reference's outputs (a rough check of this job's own, which only decides what is worth timing) are
   ranked by successive halving (``shared.screening``). Screen timings only rank: no speed is claimed from them.

The plan's deadline bounds it all: past it, no variant is compiled, run or timed any more.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

from ..shared.amd_devices import amd_arch
from ..shared.protocol import ScreenJob, screen_output_file
from ..shared.screening import ScreenPlan, survivors
from .amd_assembly import assembly_facts, kernel_assembly

ROUGH_TOLERANCE = 0.05  # the job's own output check: relative to the reference's RMS (ranking only)
PROGRESS_EVERY = 8  # variants run between two progress reports
TIMER_MEMORY_SHARE = 0.5  # of the free device memory, for the timers (graphs hold their calls' outputs)


def run_screen(job: ScreenJob, info: Any, send) -> dict[str, Any]:
    import torch

    from . import device_grant, launch_modes, poisoning
    from .bench_capture import calls_to_time, capture_bench_calls
    from .compile import trusted_cache

    save = torch.save  # bound before any user code is imported
    started = time.monotonic()
    plan = ScreenPlan.from_dict(job.plan)
    deadline = started + plan.deadline_s
    gpu = info.backend != "interpreter"
    runs_end = started + plan.deadline_s * (1 - plan.timing_share) if gpu else deadline
    # The reference's autotuner starts from the choice its trusted check kept (screen timings only rank): tuning
    # afresh here would spend much of the screening's budget on a file of dozens of configs.
    trusted_cache.reuse_autotuning(gpu)
    reference_spec, variant_specs = job.modules[0], job.modules[1:]
    with launch_modes.tuning_deferred():  # the device is shared until the timing starts
        captured = capture_bench_calls(job, reference_spec, send)
    if "error" in captured:
        return captured
    calls = calls_to_time(captured["calls"], job.max_calls).calls
    reference = _Variant("reference", captured["module"], None, calls, captured["recorder"].originals)
    send({"event": "progress", "screen": f"importing {len(variant_specs)} variants"})
    variants = [_load(spec, calls) for spec in variant_specs]
    loaded = [v for v in variants if v.error is None]
    compile_report = _compile_all(loaded, calls, plan, runs_end, gpu, send) if gpu else {"mode": "none"}
    loaded = [v for v in loaded if v.status == "ok"]  # those compiled in the time

    out_dir = Path(job.outputs_dir)
    poisoning.set_poisoning(True)
    try:
        with launch_modes.tuning_deferred():  # autotuned kernels tune when timed, with the device alone
            failed, lost = _run_all(reference, loaded, calls, job.seed, out_dir, save, runs_end, gpu, send)
    finally:
        poisoning.set_poisoning(False)
    if failed:
        return {"error": f"the reference failed on its own captured call: {failed}"}
    costs = reference.costs
    timing: dict[str, Any] = {"timed": False, "why": "timing needs a GPU"}
    if gpu and not lost:
        send({"event": "progress", "screen": "waiting for the device alone"})
        device_grant.DEVICE_GRANTS.wait_alone()
        timing = _rank(reference, [v for v in loaded if v.status == "ok"], calls, plan, deadline, send)
        device_grant.DEVICE_GRANTS.release()
    return {
        "calls": [{"wrapper": c.wrapper, "signature": c.signature, **costs[i]} for i, c in enumerate(calls)],
        "reference": reference.report(),
        "variants": {v.label: v.report() for v in variants},
        "compile": compile_report,
        "timing": timing,
        "device_limits": device_limits() if gpu else {},
        "seconds": time.monotonic() - started,
    }


def _run_all(
    reference: _Variant,
    variants: list[_Variant],
    calls: list[Any],
    seed: int,
    out_dir: Path,
    save,
    runs_end: float,
    gpu: bool,
    send,
) -> tuple[str | None, str | None]:
    """The reference twice, then each variant while time lasts; (why the reference failed, why the GPU context was
    lost), each None if it did not happen."""
    from . import error_reports

    send({"event": "progress", "screen": "running the reference"})
    for run in ("", "again"):
        problem = reference.run_calls(calls, seed, out_dir, save, run, gpu, reference.outputs if run else [])
        if problem:
            return problem, None
    lost = None
    for index, variant in enumerate(variants, 1):
        if lost or time.monotonic() > runs_end:
            variant.status, variant.message = "not run", lost or "out of time"
            continue
        if index % PROGRESS_EVERY == 1:
            last = min(index + PROGRESS_EVERY - 1, len(variants))
            send({"event": "progress", "screen": f"running variants {index}-{last} of {len(variants)}"})
        problem = variant.run_calls(calls, seed, out_dir, save, "", gpu, reference.outputs)
        if problem:
            variant.fail(problem)
            if error_reports.context_lost(gpu, problem):
                lost = f"the GPU context was lost after {variant.label} failed"
        else:
            variant.judge_against(reference, gpu)
    return None, lost


class _Variant:
    """One module under screening: its wrappers, what its runs produced, and how its timing went."""

    def __init__(self, label: str, module: Any, error: str | None, calls: list[Any], wrappers: dict[str, Any]):
        self.label = label
        self.module = module
        self.error = error
        self.functions = [wrappers.get(c.wrapper) for c in calls]
        self.status = "failed" if error else "ok"
        self.message = error or ""
        self.kernels: list[dict[str, Any]] = []
        self.outputs: list[Any] = []  # portable outputs per call (the reference's, and a variant's until judged)
        self.stable: list[bool] = []  # per call, whether the reference's second run roughly reproduced its output
        self.identical: list[int] = []  # calls whose output was bit for bit the reference's first (not saved again)
        self.costs: list[dict[str, Any]] = []
        self.samples: list[float] = []
        self.rung = 0
        self.compile_failed = False  # its last failed run did not compile for the device (``run_calls``)

    def fail(self, message: str) -> None:
        words = ("out of resource", "OutOfResources", "CompilationError")
        skipped = self.compile_failed or any(word in message for word in words)
        self.status, self.message = ("skipped" if skipped else "failed"), message

    def run_calls(
        self, calls: list[Any], seed: int, out_dir: Path, save, run: str, gpu: bool, first: list[Any]
    ) -> str | None:
        """Run every captured call on a fresh copy of its arguments and save the outputs, but those bit for bit as
        in `first` (the reference's first run's; empty for that run); the error, or None."""
        from . import error_reports, launch_modes, user_code
        from .capture import bytes_moved, call_outputs
        from .launch_modes import STATE

        outputs, compiled, identical = [], [], []
        for i, call in enumerate(calls):
            fn = self.functions[i]
            if fn is None:
                return f"{self.label} has no function {call.wrapper}"
            args, kwargs = _copied(call.args), _copied(call.kwargs)
            before = (_copied(args), _copied(kwargs))
            user_code.seed_everything(seed)
            try:
                with launch_modes.compiled_kept():
                    ret = fn(*args, **kwargs)
                    user_code.synchronize(gpu)
                    compiled += STATE.compiled
            except Exception as e:
                described = error_reports.describe_error(e, "", None)
                self.compile_failed = described["compile_error"]
                return described["message"]
            if self.label == "reference" and not run:
                self.costs.append({"bytes": bytes_moved(args, kwargs, ret), **_declared_costs(self, call, fn)})
            output = call_outputs(ret, *_untouched_marked(args, kwargs, before))
            if first and _identical(first[i], output):
                identical.append(i)
            else:
                save(output, out_dir / screen_output_file(self.label, i, run))
            outputs.append(output)
        self.identical = identical
        if run == "again":
            self.stable = [i in identical or _roughly_equal(once, again, gpu)
                           for i, (once, again) in enumerate(zip(self.outputs, outputs, strict=True))]  # fmt: skip
        else:
            self.outputs, self.kernels = outputs, compiled_facts(compiled)
        return None

    def judge_against(self, reference: _Variant, gpu: bool) -> None:
        """Decide what is worth timing: a variant that runs the reference's very kernels is the same configuration
        at run time; one whose outputs are far from the reference's is not timed (the caller's comparison, not this
        rough one, is the verdict). A call whose output the reference's second run did not roughly reproduce is left
        out, as the caller leaves it out (a kernel that fills only part of a `torch.empty` output): else variants
        the caller finds correct would be judged wrong here and never timed."""
        hashes = sorted(k.get("hash") or "" for k in self.kernels)
        pairs = zip(reference.outputs, self.outputs, reference.stable, strict=True)
        weighed = ((r, c) for i, (r, c, kept) in enumerate(pairs) if kept and i not in self.identical)
        if hashes and all(hashes) and hashes == sorted(k.get("hash") or "" for k in reference.kernels):
            self.status, self.message = "same", "launches the reference's very kernels"
        elif not all(_roughly_equal(r, c, gpu) for r, c in weighed):
            self.status, self.message = "wrong", "its outputs are far from the reference's"
        self.outputs = []  # saved for the caller; not needed here any more

    def report(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message[:2000],
            "kernels": self.kernels,
            "samples": self.samples,
            "rung": self.rung,
            "identical": self.identical,
        }


def _load(spec: dict[str, Any], calls: list[Any]) -> _Variant:
    from . import error_reports, user_code

    try:
        if spec.get("repository") is not None:  # a repository's module: beside the reference in its package
            from .repository import load_variant

            module = load_variant(spec["repository"], spec["path"], spec["module_name"])
        else:
            module = user_code.load_module(spec["path"], spec["module_name"])
    except Exception as e:
        why = error_reports.describe_error(e, spec["path"], None)["message"]
        return _Variant(spec["label"], None, f"import failed: {why}", calls, {})
    return _Variant(spec["label"], module, None, calls, {c.wrapper: _resolve(module, c.wrapper) for c in calls})


def _resolve(module: Any, name: str) -> Any:
    """A wrapper of a module by name: "fn", or "Class.apply"."""
    owner_name, _, attr = name.rpartition(".")
    owner = getattr(module, owner_name, None) if owner_name else module
    fn = getattr(owner, attr, None) if owner is not None else None
    return fn if callable(fn) else None


COMPILE_SHARE = 0.75  # of the time before the runs end, what compiling may take (the runs need the rest)


def _compile_all(
    variants: list[_Variant], calls: list[Any], plan: ScreenPlan, runs_end: float, gpu: bool, send
) -> dict[str, Any]:
    """Compile the variants' kernels in forked processes (``compile.forked``), in the order given (the caller's
    most promising first), until the compile share of the time is spent; a variant whose compiles did not end in
    the time is marked "not run" (compiling it at its first run would take the runs' time). What failed to compile
    here compiles at its first run, which says why."""
    from . import launch_modes, user_code
    from .compile.forked import ForkedCompiles, compile_mode

    workers = max(1, min(plan.compile_workers, len(os.sched_getaffinity(0))))
    executor = ForkedCompiles(workers)
    try:
        mode = compile_mode(executor)
    except ImportError:
        return {"mode": "serial", "why": "this Triton has no AsyncCompileMode"}
    started = time.monotonic()
    deadline = started + max(0.0, runs_end - started) * COMPILE_SHARE
    needs: list[tuple[_Variant, list[int]]] = []  # per variant, the submitted compiles its launches asked for
    late: set[int] = set()  # the variants not compiled in the time
    send({"event": "progress", "screen": f"compiling {len(variants)} variants in {workers} processes"})
    with launch_modes.tuning_deferred(), launch_modes.compile_only(), mode:
        try:
            for variant in variants:
                if time.monotonic() >= deadline:  # its wrappers would not even be run in the time
                    late.add(id(variant))
                    continue
                first = len(executor.asked)
                for i, call in enumerate(calls):
                    fn = variant.functions[i]
                    if fn is not None:
                        with contextlib.suppress(Exception):  # what fails here compiles at its first run
                            fn(*_copied(call.args), **_copied(call.kwargs))
                needs.append((variant, executor.asked[first:]))
                executor.pump()  # its compiles start while the next variants' wrappers run
            user_code.synchronize(gpu)
        finally:
            report = executor.run(deadline)
    # also a variant whose kernel is another's, compiled for that one and not in the time: at its run, it would
    # compile in this process with no bound, far past the round's deadline
    late |= {id(variant) for variant, asked in needs if report.not_in_time.intersection(asked)}
    for variant in variants:
        if id(variant) in late:
            variant.status, variant.message = "not run", "not compiled in the time"
    return {"mode": "processes", "workers": workers, "compiled": len(variants) - len(late), "variants": len(variants),
            "failed_compiles": report.failed, "seconds": round(time.monotonic() - started, 3)}  # fmt: skip


def _rank(
    reference: _Variant, contenders: list[_Variant], calls: list[Any], plan: ScreenPlan, deadline: float, send
) -> dict[str, Any]:
    """Successive halving over short timings of every call: each rung times the variants still in the race (and the
    reference) in shuffled order, keeps the faster half, and doubles the samples."""
    import torch

    from . import timing

    sets = [timing.InputSets((c.args, c.kwargs), 2) for c in calls]
    try:
        estimates = [timing.estimate_ms(lambda s=s, fn=fn: s.call(fn, 0)) for s, fn in zip(sets, reference.functions,
                                                                                              strict=True)]  # fmt: skip
        per_graph = [timing.graph_calls(e, len(s)) if e < timing.GRAPH_BELOW_MS else None
                     for e, s in zip(estimates, sets, strict=True)]  # fmt: skip
        reserved = torch.cuda.memory_reserved()
        timers = {"reference": _timers(reference, sets, estimates, per_graph, plan)}
        per_variant = max(torch.cuda.memory_reserved() - reserved, 1)
    except Exception as e:
        return {"timed": False, "why": f"the reference failed when timed: {e}"}
    room = int(torch.cuda.mem_get_info()[0] * TIMER_MEMORY_SHARE // per_variant)
    for variant in contenders:
        if time.monotonic() > deadline or len(timers) > room:
            variant.status, variant.message = "not timed", "out of time" if len(timers) <= room else "out of memory"
            continue
        try:
            timers[variant.label] = _timers(variant, sets, estimates, per_graph, plan)
        except Exception as e:
            variant.status, variant.message = "failed", f"failed when timed: {e}"
    alike = _unlike_calls(timers)
    for i in alike:  # a graph refused for some variant's call: every variant's is timed flushed, like with like
        for variant in [reference, *(v for v in contenders if v.label in timers)]:
            try:
                timers[variant.label][i] = timing.make_timer(variant.functions[i], sets[i], estimates[i], plan.rep_ms,
                                                             None)  # fmt: skip
            except Exception as e:
                if variant is reference:
                    return {"timed": False, "why": f"the reference failed when timed: {e}"}
                variant.status, variant.message = "failed", f"failed when timed: {e}"
                del timers[variant.label]
    alive = [v for v in contenders if v.label in timers]
    rng = random.Random(0)
    samples, rungs = plan.first_samples, 0
    while alive and time.monotonic() <= deadline:
        send({"event": "progress", "screen": f"timing {len(alive)} variants ({samples} samples each)"})
        racing = [reference, *alive]
        for _ in range(samples):
            for variant in racing:
                try:
                    variant.samples.append(sum(t.sample() for t in timers[variant.label]))
                except Exception as e:
                    if variant is reference:
                        return {"timed": False, "why": f"the reference failed when timed: {e}"}
                    variant.status, variant.message = "failed", f"failed when timed: {e}"
                    del timers[variant.label]
                if time.monotonic() > deadline:
                    break
            racing = [v for v in racing if v.label in timers]
            rng.shuffle(racing)
            if time.monotonic() > deadline:
                break
        rungs += 1
        for variant in alive:
            if variant.status == "ok" and not variant.samples:
                variant.status, variant.message = "not timed", "out of time"
        alive = [v for v in alive if v.status == "ok"]
        for variant in alive:
            variant.rung = rungs
        if len(alive) <= plan.finalists or time.monotonic() > deadline:
            break
        alive.sort(key=lambda v: statistics.median(v.samples))
        kept = survivors(len(alive), plan.finalists)
        for dropped in alive[kept:]:
            del timers[dropped.label]  # frees its graphs
        alive = alive[:kept]
        samples *= 2
    reference.rung = rungs
    return {"timed": True, "rungs": rungs, "estimates_ms": estimates, "flushed_alike": alike}


def _unlike_calls(timers: dict[str, list[Any]]) -> list[int]:
    """The calls whose timers do not all take one method (a variant's call refused the graph capture the others
    took): timed so, a variant's flushed call (the L2 cold, its launches in its time) would be ranked against the
    others' graph replays, and a faster variant screened slower than the original."""
    per_call = zip(*timers.values(), strict=True)
    return [i for i, found in enumerate(per_call) if len({t.method for t in found}) > 1]


def _timers(variant: _Variant, sets: list[Any], estimates: list[float], per_graph: list[int | None], plan) -> list:
    """A timer per captured call, timed the way the reference's is (graph replays of as many calls, or flushed),
    after one untimed call of each (where an autotuned kernel tunes)."""
    from . import timing, user_code

    for fn, s in zip(variant.functions, sets, strict=True):
        s.call(fn, 0)
    user_code.synchronize(True)
    return [
        timing.make_timer(fn, s, e, plan.rep_ms, g)
        for fn, s, e, g in zip(variant.functions, sets, estimates, per_graph, strict=True)
    ]


def _declared_costs(variant: _Variant, call: Any, fn: Any) -> dict[str, Any]:
    """What a call declares of its work: FLOPs from the file's `flops_<wrapper>` (or its benchmark), else from its
    kernels' `launch_metadata` (Triton's hook, summed over the call's launches)."""
    counter = getattr(variant.module, f"flops_{call.wrapper}", None)
    if callable(counter):
        try:
            return {"flops": int(counter(*call.args, **call.kwargs)), "flops_from": f"flops_{call.wrapper}"}
        except Exception:
            pass
    if call.flops:
        return {"flops": int(call.flops), "flops_from": "the benchmark"}
    found = _launch_metadata(fn, call)
    return {"flops": found.get("flops"), "flops_from": "launch_metadata" if found.get("flops") else None,
            "declared_bytes": found.get("bytes")}  # fmt: skip


def _launch_metadata(fn: Any, call: Any) -> dict[str, int]:
    """FLOPs and bytes the kernels of one call declare through `@triton.jit(launch_metadata=...)`."""
    try:
        from triton import knobs

        hook_chain = knobs.runtime.launch_enter_hook
    except (ImportError, AttributeError):
        return {}
    totals = {"flops": 0, "bytes": 0}

    def hook(metadata: Any) -> None:
        data = metadata.get() if hasattr(metadata, "get") else {}
        totals["flops"] += sum(int(v) for k, v in data.items() if k.startswith("flops"))
        totals["bytes"] += int(data.get("bytes", 0))

    try:
        if hasattr(hook_chain, "add"):
            hook_chain.add(hook)
        else:
            knobs.runtime.launch_enter_hook = hook
        fn(*_copied(call.args), **_copied(call.kwargs))
    except Exception:
        return {}
    finally:
        if hasattr(hook_chain, "remove"):
            hook_chain.remove(hook)
        else:
            knobs.runtime.launch_enter_hook = None
    return {k: v for k, v in totals.items() if v}


def compiled_facts(compiled: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The facts of each distinct kernel among launches' compiled kernels (``STATE.compiled``)."""
    found: dict[str, dict[str, Any]] = {}
    for name, kernel in compiled:
        facts = kernel_facts(name, kernel)
        found.setdefault(facts["hash"] or f"{name}:{len(found)}", facts)
    return list(found.values())


def kernel_facts(name: str, kernel: Any) -> dict[str, Any]:
    """What the compiler made of one kernel (None where this backend does not say)."""
    metadata = getattr(kernel, "metadata", None)

    def number(value: Any) -> int | None:
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    facts = {
        "kernel": name,
        "hash": str(getattr(kernel, "hash", "") or ""),
        "n_regs": number(getattr(kernel, "n_regs", None)),
        "n_spills": number(getattr(kernel, "n_spills", None)),
        "shared": number(getattr(metadata, "shared", None)),
        "num_warps": number(getattr(metadata, "num_warps", None)),
        "num_stages": number(getattr(metadata, "num_stages", None)),
    }
    text = kernel_assembly(kernel)
    if text is None:
        return facts
    # ROCm: the assembly's own counts (a driver may report 0 registers and spills), and the compiler's occupancy
    said = assembly_facts(text)
    renamed = {"vgprs": "n_regs", "spills": "n_spills", "waves_per_simd": "waves_per_simd",
               "scratch_bytes": "scratch_bytes"}  # fmt: skip
    return facts | {ours: said[theirs] for theirs, ours in renamed.items() if theirs in said}


def device_limits() -> dict[str, Any]:
    """The streaming multiprocessor's (compute unit's) limits, for the caller's occupancy estimate."""
    import torch

    return limits_of(torch.cuda.get_device_properties(torch.cuda.current_device()))


def limits_of(props: Any) -> dict[str, int]:
    """A device's limits from its torch properties; on an AMD architecture ``shared/amd_devices`` knows, the compute
    unit's own (wavefronts per SIMD, the VGPR file, LDS), which the caller's occupancy estimate then uses."""
    names = ("multi_processor_count", "regs_per_multiprocessor", "max_threads_per_multi_processor",
             "shared_memory_per_multiprocessor", "shared_memory_per_block_optin", "warp_size")  # fmt: skip
    limits = {name: int(getattr(props, name)) for name in names if isinstance(getattr(props, name, None), int)}
    arch = amd_arch(getattr(props, "gcnArchName", None))
    if arch is not None:
        limits |= {"max_waves_per_simd": arch.max_waves_per_simd, "vgprs_per_lane": arch.vgprs_per_lane,
                   "lds_per_cu": arch.lds_per_cu}  # fmt: skip
    return limits


def _copied(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    return value


def _untouched_marked(args: tuple, kwargs: dict, before: tuple[tuple, dict]) -> tuple[tuple, dict]:
    """The call's arguments with ``timing.UNTOUCHED`` in place of each tensor it left as it was (an input it only
    read: no need to save or compare it)."""
    import torch

    from .timing import UNTOUCHED

    def mark(after: Any, was: Any) -> Any:
        if isinstance(after, torch.Tensor) and isinstance(was, torch.Tensor) and torch.equal(after, was):
            return UNTOUCHED
        return after

    old_args, old_kwargs = before
    return (
        tuple(mark(a, b) for a, b in zip(args, old_args, strict=True)),
        {k: mark(v, old_kwargs[k]) for k, v in kwargs.items()},
    )


def _identical(reference: Any, candidate: Any) -> bool:
    """The same structure, bit for bit (a NaN equals nothing: such an output is saved and compared)."""
    return _alike(reference, candidate, exact=True)


def _roughly_equal(reference: Any, candidate: Any, gpu: bool = False) -> bool:
    """Close enough to be worth timing: same structure, tensors within ``ROUGH_TOLERANCE`` of the reference's scale
    (`gpu`: weighed on the GPU, where a large output and its copies weigh several times faster than on the host)."""
    return _alike(reference, candidate, exact=False, gpu=gpu)


def _close(reference: Any, candidate: Any) -> bool:
    """Floating tensors of one shape within ``ROUGH_TOLERANCE``, where they lie."""
    import torch

    wide = torch.float64 if reference.dtype == torch.float64 else torch.float32  # 4x faster than doubles on CPU
    ref, cand = reference.to(wide), candidate.to(wide)
    scale = float(ref[torch.isfinite(ref)].pow(2).mean().sqrt()) if ref.numel() else 0.0
    scale = scale if math.isfinite(scale) else 0.0
    return bool(torch.allclose(cand, ref, rtol=ROUGH_TOLERANCE, atol=ROUGH_TOLERANCE * scale + 1e-6, equal_nan=True))


def _alike(reference: Any, candidate: Any, exact: bool, gpu: bool = False) -> bool:
    """The same structure, with its tensors and numbers the same (`exact`: bit for bit, types and dtypes too) or
    roughly so."""
    import torch

    if isinstance(reference, torch.Tensor):
        if not isinstance(candidate, torch.Tensor) or reference.shape != candidate.shape:
            return False
        if exact:
            return reference.dtype == candidate.dtype and bool(torch.equal(reference, candidate))
        if not reference.is_floating_point():
            return bool(torch.equal(reference, candidate))
        if gpu:
            try:
                return _close(reference.to("cuda"), candidate.to("cuda"))
            except torch.cuda.OutOfMemoryError:  # no room beside the job's own tensors: weighed here instead
                pass
        return _close(reference, candidate)
    if isinstance(reference, dict):
        return (
            isinstance(candidate, dict)
            and reference.keys() == candidate.keys()
            and all(_alike(reference[k], candidate[k], exact, gpu) for k in reference)
        )
    if isinstance(reference, (list, tuple)):
        return (
            (type(candidate) is type(reference) if exact else isinstance(candidate, (list, tuple)))
            and len(reference) == len(candidate)
            and all(_alike(r, c, exact, gpu) for r, c in zip(reference, candidate, strict=True))
        )
    if exact:
        return type(candidate) is type(reference) and bool(reference == candidate)
    if isinstance(reference, float) and isinstance(candidate, (int, float)):
        both_nan = math.isnan(reference) and math.isnan(candidate)
        return both_nan or math.isclose(reference, candidate, rel_tol=ROUGH_TOLERANCE, abs_tol=1e-6)
    return reference == candidate
