"""Evaluation on a Ray cluster: one actor per GPU (`num_gpus=1`; Ray pins it with CUDA_VISIBLE_DEVICES) holds a
warm `Evaluator`, and every check or timing is a task on that actor. The agent loop, the model calls and the
checkpoints stay on the driver; file texts travel with each task, so the nodes need GEAK installed but no data.
Ray is optional (`pip install ray`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from geak.evaluator import BadInput, BenchResult, CheckResult, EvalOptions, Evaluator, ScreenResult

from .eval_slots import EvalSlot, SlotError


class EvalActor:
    """Runs inside a Ray actor: a lazily started Evaluator, references written once to local scratch."""

    def __init__(self, options: EvalOptions):
        self.options = options
        self.evaluator: Evaluator | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="geak-ray-"))

    def _evaluator(self) -> Evaluator:
        if self.evaluator is None:
            self.evaluator = Evaluator(self.options)
        return self.evaluator

    def _reference(self, name: str | None, text: str | None) -> Path | None:
        if text is None:
            return None
        path = self.scratch / hashlib.sha256(text.encode()).hexdigest()[:16] / Path(name or "reference.py").name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return path

    async def runtime(self) -> dict[str, Any]:
        import ray

        info = dict(await self._evaluator().runtime())
        info.update(
            ray_gpu_ids=[str(g) for g in ray.get_gpu_ids()],
            node=ray.util.get_node_ip_address(),
            pid=os.getpid(),
            visible=os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES"),
        )
        return info

    async def check(self, source: str, ref_name: str | None, ref_text: str | None) -> dict[str, Any]:
        try:
            result = await self._evaluator().check(source=source, against=self._reference(ref_name, ref_text))
        except BadInput as e:
            return {"bad_input": str(e)}
        return result.to_dict()

    async def bench(
        self, source: str, ref_name: str | None, ref_text: str | None, check_first: bool, rounds: int | None
    ) -> dict[str, Any]:
        try:
            result = await self._evaluator().bench(
                source=source, against=self._reference(ref_name, ref_text), check_first=check_first, rounds=rounds
            )
        except BadInput as e:
            return {"bad_input": str(e)}
        return result.to_dict()

    async def screen(
        self, ref_name: str, ref_text: str, variants: list[str], baseline: str | None, deadline_s: float, finalists: int
    ) -> dict[str, Any]:
        reference = self._reference(ref_name, ref_text)
        assert reference is not None
        try:
            result = await self._evaluator().screen(
                reference, variants, baseline=baseline, deadline_s=deadline_s, finalists=finalists
            )
        except BadInput as e:
            return {"bad_input": str(e)}
        return result.to_dict()

    async def prepare_reference(self, ref_name: str | None, ref_text: str | None) -> dict[str, Any]:
        reference = self._reference(ref_name, ref_text)
        assert reference is not None
        try:
            await self._evaluator().prepare_reference(reference)
        except BadInput as e:
            return {"bad_input": str(e)}
        return {}

    async def forget_reference(self, ref_name: str | None, ref_text: str | None) -> None:
        reference = self._reference(ref_name, ref_text)
        if self.evaluator is not None and reference is not None:
            await self.evaluator.forget_reference(reference)

    async def close(self) -> None:
        if self.evaluator is not None:
            await self.evaluator.aclose()
        shutil.rmtree(self.scratch, ignore_errors=True)


class RayEvaluator:
    """The driver's side: the `Evaluator` interface (options, runtime, check, bench, screen, prepare_reference,
    forget_reference, known_reference_seconds, aclose), served by one actor evaluating with `options`."""

    def __init__(self, actor: Any, options: EvalOptions):
        self.actor = actor
        self.options = options

    async def runtime(self) -> dict[str, Any]:
        return await self.actor.runtime.remote()

    async def check(self, file=None, *, source=None, against=None, progress=None) -> CheckResult:
        data = await self.actor.check.remote(_text(file, source), *_ref(against))
        return CheckResult.from_dict(_raise_bad_input(data))

    async def bench(self, file=None, *, source=None, against=None, progress=None, check_first=True, rounds=None):
        data = await self.actor.bench.remote(_text(file, source), *_ref(against), check_first, rounds)
        return BenchResult.from_dict(_raise_bad_input(data))

    async def screen(self, against, variants, *, baseline=None, deadline_s=60.0, finalists=2, progress=None):
        data = await self.actor.screen.remote(*_ref(against), variants, baseline, deadline_s, finalists)
        return ScreenResult.from_dict(_raise_bad_input(data))

    async def prepare_reference(self, file: str | Path, progress=None) -> None:
        _raise_bad_input(await self.actor.prepare_reference.remote(*_ref(file)))

    async def forget_reference(self, file: str | Path) -> None:
        await self.actor.forget_reference.remote(*_ref(file))

    def known_reference_seconds(self, references: list[Path]) -> dict[Path, float]:
        """None known here: each node keeps its references' costs in its own compile store."""
        return {}

    async def aclose(self) -> None:
        import ray

        try:
            await self.actor.close.remote()
        finally:
            ray.kill(self.actor)


def _read(path: str | Path, role: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{role} {path}: not readable ({e})") from e


def _text(file, source) -> str:
    if source is not None:
        return source
    if file is None:
        raise BadInput("give a file or source text")
    return _read(file, "file")


def _ref(against) -> tuple[str | None, str | None]:
    return (None, None) if against is None else (Path(against).name, _read(against, "reference"))


def _raise_bad_input(data: dict[str, Any]) -> dict[str, Any]:
    if "bad_input" in data:
        raise BadInput(data["bad_input"])
    return data


def ray_slots(address: str, options: EvalOptions, workers: int) -> list[EvalSlot]:
    """Connect to Ray ("local" starts a private instance) and start one actor per GPU of the cluster, or
    `workers` CPU actors (interpreter) where it has none."""
    try:
        import ray
    except ImportError as e:
        raise SlotError("ray_address is set but Ray is not installed: pip install ray") from e
    if not ray.is_initialized():
        if address == "local":
            ray.init(num_cpus=max(2, workers + 1), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    actor_cls = ray.remote(EvalActor)
    slots = []
    if gpus:
        for i in range(gpus):
            served = _options(options, "gpu")
            actor = actor_cls.options(num_gpus=1, num_cpus=1).remote(served)
            slots.append(EvalSlot(f"ray gpu actor {i}", RayEvaluator(actor, served)))
    else:
        for i in range(workers):
            served = _options(options, "interpreter")
            actor = actor_cls.options(num_gpus=0, num_cpus=1).remote(served)
            slots.append(EvalSlot(f"ray cpu actor {i}", RayEvaluator(actor, served)))
    return slots


def _options(options: EvalOptions, backend: str) -> EvalOptions:
    return replace(options, backend=backend, gpu_id=None)  # Ray pins the actor to its GPU


def shutdown_ray(address: str) -> None:
    import ray

    if address == "local" and ray.is_initialized():
        ray.shutdown()
