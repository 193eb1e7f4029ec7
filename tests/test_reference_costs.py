"""How long each reference's own run took, kept beside the compile store: recorded by the evaluator, read back, and
used by `geak eval` to start the slowest golden files first."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from geak.evaluator import reference_costs
from geak.evaluator.api import BadInput, EvalOptions, Evaluator

FIXTURES = Path(__file__).parent / "fixtures"
TB = FIXTURES / "suites" / "tritonbench"  # a small suite in TritonBench-revised's layout
GOLDEN = TB / "TritonBench_G_v1"


def test_costs_are_kept_newest_last_and_a_bad_or_missing_file_reads_as_none(tmp_path, monkeypatch):
    root = str(tmp_path)
    assert reference_costs.load(root) == {} and reference_costs.load(None) == {}
    reference_costs.record(None, "a", 1.0)  # no store: nothing kept, nothing raised
    monkeypatch.setattr(reference_costs, "MAX_ENTRIES", 2)
    for key, seconds in (("a", 1.0), ("b", 2.0), ("a", 3.0), ("c", 4.0)):
        reference_costs.record(root, key, seconds)
    assert reference_costs.load(root) == {"a": 3.0, "c": 4.0}  # "b" was recorded longest ago
    assert [p.name for p in tmp_path.iterdir()] == [reference_costs.FILE]  # no temporary file left
    (tmp_path / reference_costs.FILE).write_text("{not json")
    assert reference_costs.load(root) == {}
    (tmp_path / reference_costs.FILE).write_text(json.dumps({"a": "slow", "b": 2}))
    assert reference_costs.load(root) == {"b": 2.0}


def test_the_evaluator_records_a_references_own_run_passed_or_refused(tmp_path):
    kept = tmp_path / "kept"
    refused = tmp_path / "refused.py"
    refused.write_text((FIXTURES / "add_native.py").read_text() + "\n\ndef test_raises():\n    raise KeyError('x')\n")

    async def go():
        options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, compile_cache=str(kept))
        async with Evaluator(options) as ev:
            assert ev.known_reference_seconds([FIXTURES / "add_native.py", refused]) == {}
            await ev.check(FIXTURES / "add_native.py", against=FIXTURES / "add_native.py")
            with pytest.raises(BadInput):
                await ev.check(FIXTURES / "add_native.py", against=refused)
            return ev.known_reference_seconds([FIXTURES / "add_native.py", refused, tmp_path / "missing.py"])

    known = asyncio.run(go())
    assert set(known) == {FIXTURES / "add_native.py", refused}, known
    assert all(seconds > 0 for seconds in known.values()), known


def test_references_start_longest_first_and_the_largest_where_not_known(tmp_path):
    small, large, slow = (tmp_path / f"{n}.py" for n in ("small", "large", "slow"))
    for path, size in ((small, 10), (large, 1000), (slow, 1)):
        path.write_text("x" * size)
    missing = tmp_path / "missing.py"
    assert reference_costs.longest_first([small, missing, large, slow], {slow: 5.0}) == [slow, large, small, missing]
    assert reference_costs.longest_first([small, slow, large], {small: 2.0, slow: 9.0}) == [slow, small, large]


def test_a_first_run_starts_the_file_that_writes_many_autotune_configs_first(tmp_path):
    """Where no run is known, a file's size and the autotune configs it writes foretell its cost: the configs built in
    nested loops over literal lists (TritonBench-revised `int8_dequant_matmul.py`: 418, its test at the 120 s limit)
    count once a pass."""
    many = tmp_path / "many.py"
    many.write_text(
        "import triton\n"
        "configs = [triton.Config({'BLOCK': 16}, num_warps=1)]\n"  # 1
        "for stages in [2, 3, 4]:\n"
        "    for block in (32, 64):\n"
        "        configs.append(triton.Config({'BLOCK': block}, num_stages=stages))\n"  # 3 x 2
        "        for split in range(1, 9, 2):\n"
        "            configs.append(triton.Config({'BLOCK': block, 'SPLIT': split}))\n"  # 3 x 2 x 4
        "configs += [Config({'BLOCK': b}) for b in [8, 16] for w in range(3)]\n"  # 2 x 3
        "for n in sizes():\n"
        "    configs.append(triton.Config({'BLOCK': n}))\n"  # a loop the source does not size: once
    )
    assert reference_costs.configs_written(many.read_text()) == 1 + 6 + 24 + 6 + 1
    assert reference_costs.configs_written("def broken(:\n    triton.Config({})\n") == 0
    large = tmp_path / "large.py"
    large.write_text("# " + "x" * 20 * reference_costs.BYTES_PER_CONFIG + "\n")
    assert reference_costs.text_cost(tmp_path / "missing.py") == 0
    assert reference_costs.longest_first([large, many], {}) == [many, large]
    assert reference_costs.longest_first([large, many], {large: 1.0}) == [large, many]


@pytest.mark.parametrize(
    ("names", "known", "first"),
    [
        # known here before: the slow one first, whatever its size
        (["relu_kernel.py", "add_example.py", "relu_kernel.py"], {"add_example.py": 100.0, "relu_kernel.py": 1.0},
         ["add_example.py", "relu_kernel.py", "relu_kernel.py"]),
        # a first run: the largest golden file first (add_example.py 1059 bytes, row_sum.py 862, relu_kernel.py 803;
        # none autotunes)
        (["relu_kernel.py", "row_sum.py", "add_example.py"], {},
         ["add_example.py", "row_sum.py", "relu_kernel.py"]),
    ],
)  # fmt: skip
def test_geak_eval_checks_the_golden_files_known_to_be_slow_first(tmp_path, names, known, first):
    """The evaluator says which golden files ran long here before (above); `geak eval` starts their predictions
    first (where none is known, the largest golden file first), and still writes its records in line order."""
    from geak.agent.batch.dataloaders import BUILT_IN
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot

    started: list[str] = []
    asked: list[list[Path]] = []

    class Logged(Evaluator):
        async def check(self, *args, **kwargs):
            started.append(Path(kwargs["against"]).name)
            return await super().check(*args, **kwargs)

        def known_reference_seconds(self, references):
            asked.append(references)
            return {GOLDEN / name: seconds for name, seconds in known.items()}

    async def go():
        evaluator = Logged(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
        preds = tmp_path / "preds.jsonl"
        lines = [json.dumps({"filename": n, "predict": (GOLDEN / n).read_text()}) for n in names]
        preds.write_text("\n".join(lines) + "\n")
        try:
            return await score_predictions(BUILT_IN["tritonbench"](TB), preds, [EvalSlot("cpu", evaluator)], tmp_path)
        finally:
            await evaluator.aclose()

    outcome = asyncio.run(go())
    assert asked == [sorted({GOLDEN / n for n in names})], asked
    assert started == first, started
    assert [r["line"] for r in outcome.records] == [0, 1, 2]
    assert all(r["pass_exe"] for r in outcome.records), outcome.records
