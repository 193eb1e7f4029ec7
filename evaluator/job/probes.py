"""Worker side of the probes: captured wrapper calls run again on other inputs than the test's own.

The reference job *makes* the probes, each saved with its inputs and its spec:
- a *fresh* probe per distinct call: new values at the tested shapes (``capture.draw_probe``, seeded with a number
  the trusted side picked at random), run three times: twice for real (the trusted side keeps a probe only where
  the reference agrees with itself; the second run fills new allocations with the second poison, so what the
  reference never writes shows) and once with every Triton launch turned into a no-op (the "ghost" run: where
  the outputs do not change without kernels, the probe cannot tell a kernel from a PyTorch fallback);
- *shape* and *value* probes (``probe_variants``): other sizes, and larger values of one sign (climbing down
  ``shared.probe_rules.VALUE_MAGNITUDES`` until the reference stays finite), each run twice for real. They fit a
  time budget (`ProbeBudget`: a share of what the check costs, as the reference's own runs measured it), at most
  `SHAPE_PER_CALL` and `VALUE_PER_CALL` per call and `VARIANTS_PER_CHECK` in all. On the CPU interpreter each
  runs in a forked process, so that an out-of-bounds access at a size the reference was never run at costs only
  that probe, and one over the budget is stopped.
A candidate job *replays* the saved inputs, which the trusted side copied into its directory (fresh probes also
as a ghost): it never draws them and never sees the seed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..shared.probe_rules import (
    GHOST_RUN,
    OVER_BUDGET,
    SECOND_RUN,
    VALUE_MAGNITUDES,
    nonfinite_elements,
    probe_place,
    probe_where,
    stays_finite,
)
from ..shared.protocol import probe_input_file, probe_output_file
from . import error_reports, launch_modes, poisoning, process_ties, user_code
from .capture import (
    CallRecorder,
    RecordedCall,
    call_outputs,
    draw_probe,
    probe_tensors,
    rebuild_probe,
    replayable,
    signature,
)
from .launch_modes import STATE
from .probe_variants import Variant, element_count, footprint, shape_variants, value_signs, value_variant

SHAPE_PER_CALL = 3
VALUE_PER_CALL = 2
VARIANTS_PER_CHECK = 12  # shape and value probes tried, at most
SHARE = 0.1  # of a candidate's check (its import, tests and fresh probes, plus FIXED_S) its shape and value probes add
FIXED_S = 0.3  # what a check costs besides: the job process, the caller's comparison
MAKING = 2.0  # the reference's time to make them, in that share: two runs each, and the attempts that fail
# ...but at least this much (replay, making), so that a check of milliseconds still gets its probes (on a GPU a probe
# runs in milliseconds; the CPU interpreter is slow, and a forked process costs some 50 ms)
FLOOR_S = {True: (0.1, 0.5), False: (0.3, 1.0)}  # by gpu
OVERHEAD_S = 0.05  # what making a variant costs besides what making its fresh probe took (a forked process)

Describe = Callable[[BaseException], str]
Starting = Callable[[str], None]  # told each probe's name as it starts (the job's progress)


@dataclass
class ProbeBudget:
    """Seconds left for shape and value probes: `replay_s` for what a candidate will run (each probe's second run as
    the reference took it: compiled already), `making_s` for all the reference spends on them (compiling for new
    sizes, and the attempts that fail, included)."""

    replay_s: float
    making_s: float

    @classmethod
    def of_check(cls, check_s: float, gpu: bool) -> ProbeBudget:
        """For a check whose job took `check_s` up to its shape and value probes (less the reference's second run of
        its tests: what a candidate's job takes)."""
        share = SHARE * (check_s + FIXED_S)
        replay, making = FLOOR_S[gpu]
        return cls(max(share, replay), max(MAKING * share, making))

    def affords(self, replay_s: float, making_s: float) -> bool:
        """Is there time for a probe that a candidate replays in `replay_s` and the reference makes in `making_s`?"""
        return replay_s <= self.replay_s and making_s + OVERHEAD_S <= self.making_s


@dataclass
class _Base:
    """A call whose fresh probe ran, as its variants need it: what that probe took (its first run; all of its making:
    drawing and saving its inputs and outputs, its three runs, which on a busy device wait their turn), and how many
    non-finite elements its outputs held."""

    call: RecordedCall
    index: int  # its fresh probe's
    duration_s: float
    made_s: float
    nonfinite: int
    kept: dict[str, int]  # variants kept, by kind


@dataclass(frozen=True)
class _Runs:
    """How a probe is run: also as a ghost; with the first run's outputs at most `finite_below` non-finite
    elements; in a forked process stopped after `limit_s` (None: in this one)."""

    ghost: bool = False
    finite_below: int | None = None
    limit_s: float | None = None


def make_probes(
    recorder: CallRecorder,
    probe_seed: int,
    seed: int,
    limit: int,
    out_dir: Path,
    gpu: bool,
    describe: Describe,
    check_s: float,
    poison: bool,
    variants: bool,
    starting: Starting,
    hung: frozenset[str] = frozenset(),
    budget_s: float | None = None,
) -> list[dict[str, Any]]:
    """The reference's probes: a fresh one for each of the first `limit` distinct calls, then shape and value
    probes within the budget that `check_s` (its import and its tests' first run) and the fresh probes set. Inputs
    are drawn with `probe_seed` + the probe's index; random number generators are seeded with `seed` + the index
    before each run. `poison`: new allocations are poisoned (the second run of a probe then gets the second
    poison). `variants`: False, fresh values only. `starting` is told each probe as it starts. `hung`: the places
    (``probe_place``) where an earlier run of this reference hung, skipped. `budget_s`: the shape and value probes'
    replay budget, fixed (None: a share of the check)."""
    maker = _Maker(recorder, probe_seed, seed, out_dir, gpu, describe, poison, starting, hung)
    limits = {"shape": SHAPE_PER_CALL, "value": VALUE_PER_CALL}
    bases = []
    started = time.perf_counter()
    for call in recorder.unique_calls(limit):
        making = time.perf_counter()
        entry, measured = maker.make(call, Variant("fresh", "fresh values", call.spec), _Runs(ghost=True))
        if maker.lost(entry):
            return maker.entries
        if entry["status"] == "ok":
            made_s = time.perf_counter() - making
            kept = dict.fromkeys(limits, 0)
            bases.append(_Base(call, entry["index"], measured["duration_s"], made_s, measured["nonfinite"], kept))
    budget = (
        ProbeBudget.of_check(check_s + time.perf_counter() - started, gpu)
        if budget_s is None
        else ProbeBudget(budget_s, MAKING * budget_s)
    )
    tried, seen = 0, {footprint(b.call.spec) for b in bases}
    for base, variant in _variants_in_turn(bases if variants else [], recorder):
        scale = element_count(variant.spec) / max(element_count(base.call.spec), 1)
        if tried >= VARIANTS_PER_CHECK or base.kept[variant.kind] >= limits[variant.kind]:
            continue
        if variant.kind == "shape" and footprint(variant.spec) in seen:  # another call, or its variant, is this one
            continue
        seen.add(footprint(variant.spec))
        if not budget.affords(base.duration_s * scale, base.made_s * scale):
            continue
        tried += 1
        started = time.perf_counter()
        entry, measured = _make_variant(maker, base, variant, None if gpu else budget.making_s)
        budget.making_s -= time.perf_counter() - started
        if entry["status"] == "ok":
            budget.replay_s -= measured["again_s"]
            base.kept[variant.kind] += 1
        if maker.lost(entry):
            break
    return maker.entries


def _variants_in_turn(bases: list[_Base], recorder: CallRecorder) -> Iterator[tuple[_Base, Variant]]:
    """Each call's variants (shape and value in turn: one above, positive values, a wide row, negative values...),
    a turn at a time across the calls: every call's first variant, then every call's second..."""
    queues = []
    for base in bases:
        shapes = shape_variants(base.call, recorder.originals.get(base.call.wrapper), STATE.steps)
        values = [value_variant(base.call, sign, VALUE_MAGNITUDES[0]) for sign in value_signs(base.call)]
        pairs = (shapes[i : i + 1] + values[i : i + 1] for i in range(max(len(shapes), len(values))))
        queues.append([v for pair in pairs for v in pair])
    for turn in range(max(map(len, queues), default=0)):
        for base, queue in zip(bases, queues, strict=True):
            if turn < len(queue):
                yield base, queue[turn]


def _make_variant(
    maker: _Maker, base: _Base, variant: Variant, limit_s: float | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Make one shape or value probe; a value probe climbs down its magnitudes until the reference's outputs stay
    as finite as on its fresh probe."""
    if variant.kind == "shape":
        return maker.make(base.call, variant, _Runs(limit_s=limit_s), of=base.index)
    runs = _Runs(finite_below=base.nonfinite, limit_s=limit_s)
    for magnitude in VALUE_MAGNITUDES:
        variant = value_variant(base.call, variant.floats.sign, magnitude)
        entry, measured = maker.make(base.call, variant, runs, of=base.index, keep=False)
        if entry["status"] != "not finite":
            break
    else:
        entry = {**entry, "status": "skipped", "message": "the reference's outputs are not finite on larger values"}
    maker.entries.append(entry)
    return entry, measured


class _Maker:
    """Draws, saves and runs the reference's probes, numbering them in order (`entries`)."""

    def __init__(
        self, recorder: CallRecorder, probe_seed: int, seed: int, out_dir: Path, gpu: bool, describe: Describe,
        poison: bool, starting: Starting, hung: frozenset[str],
    ):  # fmt: skip
        self.recorder, self.probe_seed, self.seed, self.out_dir = recorder, probe_seed, seed, out_dir
        self.gpu, self.describe, self.poison, self.starting = gpu, describe, poison, starting
        self.hung = hung
        self.entries: list[dict[str, Any]] = []

    def lost(self, entry: dict[str, Any]) -> bool:
        """Is the GPU context gone (nothing more can run)?"""
        return error_reports.context_lost(self.gpu, entry.get("message", ""))

    def make(
        self, call: RecordedCall, variant: Variant, runs: _Runs, of: int | None = None, keep: bool = True
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One probe (`of`: the index of the fresh probe of its call): its entry (status ok, skipped or error with
        why, or "not finite") and what its runs measured; the entry joins `entries` unless `keep` is False."""
        index = len(self.entries)
        entry = {
            "index": index,
            "kind": variant.kind,
            "label": variant.label,
            "of": index if of is None else of,
            "wrapper": call.wrapper,
            "signature": call.signature,
            "spec": variant.spec,
            "status": "skipped",
        }
        if keep:
            self.entries.append(entry)
        if not replayable(call.spec):
            entry["message"] = "an argument cannot be redrawn (an object that cannot be copied)"
            return entry, {}
        try:
            args, kwargs = draw_probe(call, self.probe_seed + index, variant.spec, variant.floats)
        except (ValueError, RuntimeError, TypeError) as e:
            entry["message"] = f"inputs cannot be redrawn: {e}"
            return entry, {}
        entry["signature"] = signature(call.wrapper, args, kwargs)
        where = probe_where(entry)
        if probe_place(where) in self.hung:
            entry["message"] = "the reference hung on these inputs in an earlier run"
            return entry, {}
        self.starting(where)
        inputs = self.out_dir / probe_input_file(index)
        torch.save(probe_tensors(args, kwargs), inputs)
        run = _runner(self.recorder.originals[call.wrapper], variant.spec, inputs, self.gpu, self.seed + index)

        say = self.starting if runs.limit_s is None else lambda _: None  # a forked process never writes to the caller

        def all_runs() -> dict[str, Any]:
            started = time.perf_counter()
            launches, outputs = run(self.out_dir / probe_output_file(index))
            measured = {"launches": launches, "duration_s": time.perf_counter() - started}
            measured["nonfinite"] = nonfinite_elements(outputs)
            if runs.finite_below is not None and not stays_finite(runs.finite_below, measured["nonfinite"]):
                return {**measured, "status": "not finite"}
            say(f"{where}{SECOND_RUN}")
            again = time.perf_counter()
            with poisoning.second_poison_filled() if self.poison else contextlib.nullcontext():
                run(self.out_dir / probe_output_file(index, "again"))
            measured["again_s"] = time.perf_counter() - again
            if runs.ghost:
                say(f"{where}{GHOST_RUN}")
                with launch_modes.ghost_kernels():
                    run(self.out_dir / probe_output_file(index, "ghost"))
            return {**measured, "status": "ok"}

        try:
            measured = all_runs() if runs.limit_s is None else _forked(all_runs, runs.limit_s, self.describe)
        except ProbeOverBudget as e:
            entry.update(status=OVER_BUDGET, message=str(e))
            return entry, {}
        except ProbeFailed as e:
            entry.update(status="error", message=str(e))
            return entry, {}
        except BaseException as e:
            entry.update(status="error", message=self.describe(e))
            return entry, {}
        entry.update(status=measured["status"], launches=measured["launches"])
        return entry, measured


class ProbeFailed(RuntimeError):
    """A probe's forked process crashed or raised."""


class ProbeOverBudget(ProbeFailed):
    """A probe's forked process was stopped: the probes' time was spent."""


def _forked(fn: Callable[[], dict[str, Any]], limit_s: float, describe: Describe) -> dict[str, Any]:
    """`fn()` in a forked process (CPU only: no GPU context survives a fork), killed after `limit_s`: its JSON
    result; ProbeFailed if it crashes or raises (with `describe`'s words), ProbeOverBudget if it runs out of
    time."""
    read_fd, write_fd = os.pipe()
    gc.freeze()  # the child's collections leave the parent's objects (and their pages) alone: no copy on write
    pid = process_ties.fork_process()
    if pid:
        gc.unfreeze()
    else:  # never returns
        code = 1
        try:
            os.close(read_fd)
            torch.set_num_threads(1)  # the parent's OpenMP threads are gone: a parallel region would wait for them
            try:
                report = {"value": fn()}
            except BaseException as e:
                report = {"error": describe(e)[:2000]}
            os.write(write_fd, json.dumps(report).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        data = _read_until(read_fd, time.monotonic() + max(limit_s, 0.0))
    finally:
        os.close(read_fd)
    if data is None:
        os.kill(pid, signal.SIGKILL)
    status = os.waitpid(pid, 0)[1]
    if data is None:
        raise ProbeOverBudget(f"stopped after {limit_s:.1f} s: the probes' time was spent")
    if not data:
        raise ProbeFailed(f"the reference crashed on these inputs ({_ended(status)})")
    report = json.loads(data)
    if "error" in report:
        raise ProbeFailed(report["error"])
    return report["value"]


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to `fd` until its writer closes it; None at `deadline`."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def replay_probes(
    recorder: CallRecorder,
    probes: list[dict[str, Any]],
    seed: int,
    out_dir: Path,
    gpu: bool,
    describe: Describe,
    starting: Starting,
) -> list[dict[str, Any]]:
    """Run the candidate's wrappers on the reference's saved probe inputs (fresh probes also as a ghost); `starting`
    is told each probe as it starts."""
    entries = []
    for probe in probes:
        index = probe["index"]
        entry: dict[str, Any] = {"index": index, "signature": probe["signature"], "status": "error"}
        entries.append(entry)
        fn = recorder.originals.get(probe["wrapper"])
        if fn is None:
            entry["message"] = f"wrapper {probe['wrapper']}() is missing"
            continue
        starting(probe_where(probe))
        run = _runner(fn, probe["spec"], out_dir / probe_input_file(index), gpu, seed + index)
        try:
            entry["launches"] = run(out_dir / probe_output_file(index))[0]
            if probe.get("kind", "fresh") == "fresh":
                starting(f"{probe_where(probe)}{GHOST_RUN}")
                with launch_modes.ghost_kernels():
                    run(out_dir / probe_output_file(index, "ghost"))
        except BaseException as e:
            entry["message"] = describe(e)
            if error_reports.context_lost(gpu, entry["message"]):
                break
            continue
        entry["status"] = "ok"
    return entries


def _runner(
    fn: Callable, spec: dict[str, Any], inputs: Path, gpu: bool, seed: int
) -> Callable[[Path], tuple[dict[str, int], dict[str, Any]]]:
    """A function that runs `fn` on a fresh copy of the saved inputs, saves its outputs (return value and tensor
    arguments after the call) to the given path and returns the launches it made and the outputs."""
    saved = torch.load(inputs, weights_only=True)

    def run(output: Path) -> tuple[dict[str, int], dict[str, Any]]:
        args, kwargs = rebuild_probe(spec, saved, "cuda" if gpu else "cpu")
        STATE.launches.clear()
        user_code.seed_everything(seed)  # a wrapper that draws random numbers (dropout) draws the same each run
        with launch_modes.tuning_kept():  # an autotuned kernel runs its tested choice at other sizes: no tuning
            ret = fn(*args, **kwargs)
        user_code.synchronize(gpu)
        outputs = call_outputs(ret, args, kwargs)
        torch.save(outputs, output)
        return dict(STATE.launches), outputs

    return run
