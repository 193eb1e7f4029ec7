"""Where a batch run's candidates are evaluated: one evaluator (a warm worker pool) per local GPU, pinned with
CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES; interpreter evaluators on a machine without a GPU; or evaluators held
by Ray actors, one per GPU of a cluster (`ray_evaluation`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from geak.evaluator import EvalOptions, Evaluator, WorkerStartError, device_masks, pin_device, usable_cores

from .. import config
from ..config import AgentConfig
from .run_config import RunConfig


class SlotError(RuntimeError):
    """No place to evaluate: e.g. `backend: gpu` without a GPU, or Ray unavailable."""


@dataclass
class EvalSlot:
    """One evaluator and the problems it currently serves. `gpu`: the device id it is pinned to (None: the
    interpreter, or whatever Ray assigned, which `runtime` then reports)."""

    name: str
    evaluator: Any  # Evaluator, or RayEvaluator (the same async interface)
    gpu: str | None = None
    active: int = 0
    runtime: dict[str, Any] | None = None

    async def describe(self) -> str:
        if self.runtime is None:
            self.runtime = await self.evaluator.runtime()
        rt = self.runtime
        where = f"{rt.get('device')} ({rt.get('backend')}{', ' + rt['arch'] if rt.get('arch') else ''})"
        extra = f", Ray GPU ids {rt['ray_gpu_ids']} on {rt.get('node')}" if "ray_gpu_ids" in rt else ""
        if self.gpu is not None and not extra:  # which of the machine's GPUs: proof that each slot has its own
            extra = ", " + ", ".join(f"{k}={v}" for k, v in pin_device(os.environ, int(self.gpu)).items())
        return f"{self.name}: {where}{extra}"


# A sample's device time in batch runs: a flushed sample's burst, and five graph replays of 0.5 ms (25 ms and five of
# 2 ms for one file): shorter samples take less of the device alone over hundreds of problems, while most timings
# still decide at their first look and A/A verdicts stay as clean.
BATCH_REP_MS = 2.5
BATCH_BENCH_CALLS = 8  # calls timed per problem in batch runs (16 for one file)
BATCH_MAX_ROUNDS = 24  # the most rounds a batch run's timing takes before it says undecided (40 for one file)
BATCH_ROUNDS_S = 10.0  # past this many seconds of rounds a batch run's timing stops undecided (one file: no limit)


def batch_eval_options(agent: AgentConfig, backend: str, gpu_id: int | None) -> EvalOptions:
    """A batch run's evaluator settings, on `backend`, pinned to `gpu_id`. Every timing of hundreds of problems has
    the GPU alone while it measures, one after another: they time fewer calls with shorter bursts (the sequential
    rounds take more where a speedup needs them to be decided), stop undecided sooner (an undecided timing's rounds
    take far longer than a decided one's, and a host-bound file whose calls take 100 ms each would hold the device for
    minutes: ``BATCH_ROUNDS_S``), and take no per-kernel device
    time, which no batch record reads. A fixed `bench_rounds` (``--rounds``) is kept."""
    return replace(
        config.eval_options(agent, backend),
        gpu_id=gpu_id,
        profile_kernels=False,
        rep_ms=BATCH_REP_MS,
        max_bench_calls=BATCH_BENCH_CALLS,
        max_bench_rounds=BATCH_MAX_ROUNDS,
        max_rounds_s=BATCH_ROUNDS_S,
    )


EVAL_JOBS_CAP = 16  # checks at once on one GPU when not told (each holds a device context and some memory)


def eval_jobs_per_gpu(gpus: int) -> int:
    """Checks `geak eval` runs at once on each of `gpus` GPUs when not told: as many as the cores allow (a check is
    mostly the CPU's work: imports, compiles, comparisons; its kernels barely load the device), two cores left to
    the caller, at least 2 and at most ``EVAL_JOBS_CAP``."""
    return max(2, min(EVAL_JOBS_CAP, (usable_cores() - 2) // max(1, gpus)))


def visible_gpu_ids() -> list[int]:
    """Ids of the GPUs this process sees, counted as torch counts them (0..n-1): under CUDA_VISIBLE_DEVICES=2,3 they
    are 0 and 1, which the pool pins to the machine's GPUs 2 and 3 (``pool.pin_device``)."""
    masks = device_masks(os.environ)
    if masks:  # every mask must show a GPU for a worker to be pinned to it
        return list(range(min(len(entries) for entries in masks.values())))
    import torch

    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


def slot_gpus(run: RunConfig) -> list[int]:
    """The GPUs a run's local slots use: run.gpu_ids, default every visible one; none on the interpreter."""
    return [] if run.backend == "interpreter" else (run.gpu_ids if run.gpu_ids is not None else visible_gpu_ids())


def local_slots(run: RunConfig, agent: AgentConfig) -> list[EvalSlot]:
    """One evaluator per GPU (``slot_gpus``) running `run.jobs_per_gpu` jobs at once, else `run.workers` interpreter
    evaluators."""
    gpus = slot_gpus(run)
    if not gpus:
        if run.backend == "gpu":
            raise SlotError("backend: gpu, but no GPU is visible (set gpu_ids, or use backend: auto)")
        interpreted = lambda: replace(batch_eval_options(agent, "interpreter", None), host_jobs=run.workers)
        return [EvalSlot(f"interpreter {i}", Evaluator(interpreted())) for i in range(run.workers)]
    try:
        for g in gpus:  # before any evaluator is made: an id that is not visible is a configuration error
            pin_device(os.environ, g)
    except WorkerStartError as e:
        raise SlotError(f"gpu_ids: {e}") from e
    on_host = run.jobs_per_gpu * len(gpus)  # every slot's jobs share the host's cores
    # every worker a slot runs at once starts with its first (a worker takes seconds to start: started later, the
    # rest would start beside the first checks)
    at_once = dict(max_concurrent=run.jobs_per_gpu, spares=run.jobs_per_gpu, host_jobs=on_host)
    options = {g: replace(batch_eval_options(agent, "gpu", g), **at_once) for g in gpus}
    return [EvalSlot(f"gpu {g}", Evaluator(options[g]), str(g)) for g in gpus]
