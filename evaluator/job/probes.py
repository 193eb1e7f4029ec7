"""Worker side of fresh-input probes: captured wrapper calls re-run on new inputs, beyond the test's own.

The reference job *makes* the probes: for each captured call it draws fresh inputs (``capture.draw_probe``, seeded
with a number the trusted side picked at random), saves them, and runs the call three times — twice for real (the
trusted side keeps a probe only where the reference agrees with itself: duplicate scatter indices or a race make
a probe worthless) and once with every Triton launch turned into a no-op (the "ghost" run: where the outputs do
not change without kernels, the probe cannot tell a kernel from a PyTorch fallback). A candidate job *replays*
the saved inputs, which the trusted side copied into its directory: it never draws them and never sees the seed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..shared.protocol import probe_input_file, probe_output_file
from . import sandbox
from .capture import CallRecorder, call_outputs, draw_probe, probe_tensors, rebuild_probe, replayable


def make_probes(
    recorder: CallRecorder,
    probe_seed: int,
    seed: int,
    limit: int,
    out_dir: Path,
    gpu: bool,
    describe: Callable[[BaseException], str],
) -> list[dict[str, Any]]:
    """Draw (with `probe_seed`), save and run (twice, then as a ghost) a probe for each of the first `limit`
    distinct calls. Random number generators are seeded with `seed` + the probe's index before each run."""
    entries = []
    for index, call in enumerate(recorder.unique_calls(limit)):
        entry: dict[str, Any] = {
            "index": index,
            "wrapper": call.wrapper,
            "signature": call.signature,
            "spec": call.spec,
            "status": "skipped",
        }
        entries.append(entry)
        if not replayable(call.spec):
            entry["message"] = "an argument cannot be redrawn (an object GEAK cannot copy)"
            continue
        try:
            args, kwargs = draw_probe(call, probe_seed + index)
        except (ValueError, RuntimeError, TypeError) as e:
            entry["message"] = f"inputs cannot be redrawn: {e}"
            continue
        torch.save(probe_tensors(args, kwargs), out_dir / probe_input_file(index))
        run = _runner(recorder.originals[call.wrapper], call.spec, out_dir / probe_input_file(index), gpu, seed + index)
        try:
            entry["launches"] = run(out_dir / probe_output_file(index))
            run(out_dir / probe_output_file(index, "again"))
            with sandbox.ghost_kernels():
                run(out_dir / probe_output_file(index, "ghost"))
        except BaseException as e:
            entry.update(status="error", message=describe(e))
            if sandbox.context_lost(gpu, entry["message"]):
                break
            continue
        entry["status"] = "ok"
    return entries


def replay_probes(
    recorder: CallRecorder,
    probes: list[dict[str, Any]],
    seed: int,
    out_dir: Path,
    gpu: bool,
    describe: Callable[[BaseException], str],
) -> list[dict[str, Any]]:
    """Run the candidate's wrappers on the reference's saved probe inputs (for real, then as a ghost)."""
    entries = []
    for probe in probes:
        index = probe["index"]
        entry: dict[str, Any] = {"index": index, "signature": probe["signature"], "status": "error"}
        entries.append(entry)
        fn = recorder.originals.get(probe["wrapper"])
        if fn is None:
            entry["message"] = f"wrapper {probe['wrapper']}() is missing"
            continue
        run = _runner(fn, probe["spec"], out_dir / probe_input_file(index), gpu, seed + index)
        try:
            entry["launches"] = run(out_dir / probe_output_file(index))
            with sandbox.ghost_kernels():
                run(out_dir / probe_output_file(index, "ghost"))
        except BaseException as e:
            entry["message"] = describe(e)
            if sandbox.context_lost(gpu, entry["message"]):
                break
            continue
        entry["status"] = "ok"
    return entries


def _runner(fn: Callable, spec: dict[str, Any], inputs: Path, gpu: bool, seed: int) -> Callable[[Path], dict]:
    """A function that runs `fn` on a fresh copy of the saved inputs, saves its outputs (return value and tensor
    arguments after the call) to the given path and returns the launches it made."""
    saved = torch.load(inputs, weights_only=True)

    def run(output: Path) -> dict[str, int]:
        args, kwargs = rebuild_probe(spec, saved, "cuda" if gpu else "cpu")
        sandbox.LAUNCHES.clear()
        sandbox.seed_everything(seed)  # a wrapper that draws random numbers (dropout) draws the same each run
        ret = fn(*args, **kwargs)
        sandbox.synchronize(gpu)
        torch.save(call_outputs(ret, args, kwargs), output)
        return dict(sandbox.LAUNCHES)

    return run
