"""A reference's run is kept for the checks against it, and dropped with its outputs once the caller forgets it
(`Evaluator.forget_reference`): `geak eval` does so once every prediction of a golden file has been checked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from geak.evaluator.api import BadInput, EvalOptions, Evaluator

FIXTURES = Path(__file__).parent / "fixtures"
REF = FIXTURES / "add_native.py"
TB = FIXTURES / "suites" / "tritonbench"
GOLDEN = TB / "TritonBench_G_v1"


def _interpreted() -> EvalOptions:
    return EvalOptions(backend="interpreter", timeout_s=120, spares=0, fresh_inputs=False)


def test_a_forgotten_reference_leaves_disk_once_its_running_check_ends_and_runs_again_when_asked():
    said: list[str] = []
    candidate = REF.read_text()

    async def go():
        async with Evaluator(_interpreted()) as ev:
            kept = lambda: sorted(p.name for p in ev._scratch.iterdir())
            first = await ev.check(source=candidate, against=REF, progress=said.append)
            assert first.ok, first.message
            reference_dirs = kept()
            assert len(reference_dirs) == 1, reference_dirs  # the reference's run, kept for the next check
            forgotten = asyncio.Event()

            def forget_while_running(message: str) -> None:
                said.append(message)
                if message.startswith("running the tests of") and not forgotten.is_set():
                    forgotten.set()
                    asyncio.get_running_loop().create_task(ev.forget_reference(REF))

            second = await ev.check(source=candidate, against=REF, progress=forget_while_running)
            assert forgotten.is_set() and second.ok, second.message  # its reference's outputs stayed while it ran
            await asyncio.sleep(0.2)  # the removal, off the event loop
            assert kept() == [], kept()
            runs_before = sum(m.startswith("running the reference") for m in said)
            third = await ev.check(source=candidate, against=REF, progress=said.append)
            assert third.ok, third.message
            assert sum(m.startswith("running the reference") for m in said) == runs_before + 1
            await ev.forget_reference(FIXTURES / "missing.py")  # unknown or unreadable: nothing to drop

    asyncio.run(go())


def test_geak_eval_forgets_a_golden_file_once_its_last_prediction_is_checked(tmp_path):
    from geak.agent.batch.dataloaders import BUILT_IN
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot

    names = ["relu_kernel.py", "add_example.py", "relu_kernel.py"]
    events: list[str] = []

    class Logged(Evaluator):
        async def check(self, *args, **kwargs):
            result = await super().check(*args, **kwargs)
            events.append(f"checked {Path(kwargs['against']).name}")
            return result

        async def forget_reference(self, file):
            events.append(f"forgot {Path(file).name}")
            await super().forget_reference(file)

    async def go():
        evaluator = Logged(_interpreted())
        preds = tmp_path / "preds.jsonl"
        lines = [json.dumps({"filename": n, "predict": (GOLDEN / n).read_text()}) for n in names]
        preds.write_text("\n".join(lines) + "\n")
        try:
            outcome = await score_predictions(
                BUILT_IN["tritonbench"](TB), preds, [EvalSlot("cpu", evaluator)], tmp_path, per_slot=1
            )
            return outcome, sorted(p.name for p in evaluator._scratch.iterdir())
        finally:
            await evaluator.aclose()

    outcome, left = asyncio.run(go())
    assert all(r["pass_exe"] for r in outcome.records), outcome.records
    assert events == [  # the larger golden file first, the predictions of one golden file together
        "checked add_example.py",
        "forgot add_example.py",
        "checked relu_kernel.py",
        "checked relu_kernel.py",
        "forgot relu_kernel.py",
    ], events
    assert left == [], left  # no reference's outputs kept once every prediction was checked


def test_checks_at_once_against_one_reference_share_its_run():
    """Three predictions of one golden file checked at once (as `geak eval` starts them, together): the reference
    runs once, and each check says it waits for that run (before, each ran the reference itself)."""
    said: list[list[str]] = [[], [], []]

    async def go():
        options = EvalOptions(backend="interpreter", timeout_s=120, spares=0, max_concurrent=3, fresh_inputs=False)
        async with Evaluator(options) as ev:
            return await asyncio.gather(
                *(ev.check(source=REF.read_text(), against=REF, progress=said[i].append) for i in range(3))
            )

    results = asyncio.run(go())
    assert all(r.ok for r in results), [r.message for r in results]
    runs = [sum(m.startswith("running the reference") for m in messages) for messages in said]
    waits = [sum(m.startswith("waiting for the run of the reference add_native.py") for m in messages)
             for messages in said]  # fmt: skip
    assert sorted(runs) == [0, 0, 1] and sorted(waits) == [0, 1, 1], said


def test_a_prepared_reference_runs_once_and_serves_the_checks_against_it():
    said: list[str] = []

    async def go():
        async with Evaluator(_interpreted()) as ev:
            await ev.prepare_reference(REF, progress=said.append)
            assert [m for m in said if m.startswith("running the reference")], said
            said.clear()
            await ev.prepare_reference(REF, progress=said.append)  # kept: nothing runs
            checked = await ev.check(source=REF.read_text(), against=REF, progress=said.append)
            assert checked.ok, checked.message
            assert not [m for m in said if m.startswith("running the reference")], said
            try:
                await ev.prepare_reference(FIXTURES / "missing.py")
            except BadInput as e:
                assert "missing.py" in str(e)
            else:
                raise AssertionError("an unreadable reference was prepared")

    asyncio.run(go())
