"""The LLM-free launch-parameter search, driven by a synthetic (fake) evaluator."""

import asyncio
import math
from dataclasses import dataclass

import pytest

from geak.agent.launch_params import find_tunable_params
from geak.agent.launch_search import Trial, search_launch_params

SOURCE = """\
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y, out):
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
"""


@dataclass
class Measured:
    ok: bool
    latency_ms: float | None
    message: str = ""
    faster: bool | None = None


def launch_values(source):
    """What a candidate's launch uses, by parameter name (what a real evaluator would run)."""
    return {p.name: p.current for p in find_tunable_params(source)}


def synthetic(best_block=4096, best_warps=8, broken=lambda v: False, timed=True):
    """A fake evaluator with a bowl-shaped latency around (best_block, best_warps, 3 stages)."""
    seen = []

    async def evaluate(source):
        await asyncio.sleep(0)
        values = launch_values(source)
        seen.append(values)
        if broken(values):
            return Measured(False, None, "output mismatch: max abs error 3.5")
        latency = (
            1.0
            + 0.3 * (math.log2(values["BLOCK_SIZE"]) - math.log2(best_block)) ** 2
            + 0.2 * (math.log2(values["num_warps"]) - math.log2(best_warps)) ** 2
            + 0.1 * (values["num_stages"] - 3) ** 2
        )
        return Measured(True, latency if timed else None)

    return evaluate, seen


def run(evaluate, **kwargs):
    kwargs.setdefault("budget", 50)
    return asyncio.run(search_launch_params(SOURCE, evaluate, **kwargs))


def test_finds_the_optimum_and_never_repeats_values():
    evaluate, seen = synthetic()
    reported = []
    result = run(evaluate, on_trial=reported.append)
    assert launch_values(result.best.source) == {"BLOCK_SIZE": 4096, "num_warps": 8, "num_stages": 3}
    assert result.improved
    assert result.trials[0].source == SOURCE  # the baseline comes first, unchanged
    assert reported == result.trials
    signatures = [tuple(sorted(t.values.items())) for t in result.trials]
    assert len(signatures) == len(set(signatures)) == len(seen)
    assert result.summary.startswith("2.4 ms -> 1 ms (2.40x faster)")
    assert "add_kernel.BLOCK_SIZE (line 15) 1024 -> 4096" in result.summary
    assert "add_kernel.num_warps (line 15) 4 -> 8" in result.summary


def test_the_rewritten_best_source_only_changes_the_launch():
    evaluate, _ = synthetic()
    best = run(evaluate).best.source
    expected = SOURCE.replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=4096, num_warps=8)")
    assert best == expected.replace("cdiv(n, 1024)", "cdiv(n, 4096)")  # the grid's equal literal follows


def test_skips_failing_candidates():
    evaluate, _ = synthetic(best_block=16384, broken=lambda v: v["BLOCK_SIZE"] >= 4096)
    result = run(evaluate)
    assert result.best.ok
    assert launch_values(result.best.source)["BLOCK_SIZE"] == 2048
    failed = [t for t in result.trials if not t.ok]
    assert failed and all(launch_values(t.source)["BLOCK_SIZE"] >= 4096 for t in failed)
    assert "failed" in result.summary


def test_respects_the_budget():
    evaluate, seen = synthetic()
    result = run(evaluate, budget=3)
    assert len(result.trials) == len(seen) == 3
    assert launch_values(result.best.source)["BLOCK_SIZE"] == 4096  # two moves up, within the budget
    assert "budget of 3 evaluations spent" in result.summary
    baseline_only = run(synthetic()[0], budget=1)
    assert len(baseline_only.trials) == 1 and not baseline_only.improved
    with pytest.raises(ValueError, match="budget must be at least 1"):
        run(evaluate, budget=0)


def test_noise_level_differences_do_not_move():
    async def evaluate(source):
        values = launch_values(source)
        return Measured(True, 1.0 - 0.01 * (values["BLOCK_SIZE"] != 1024))  # 1% faster: noise

    result = run(evaluate)
    assert result.best is result.trials[0] and not result.improved
    assert "no launch configuration beat the baseline (1 ms) by > 2%" in result.summary


def test_without_timing_checks_neighbours_for_correctness_only():
    evaluate, _ = synthetic(timed=False, broken=lambda v: v["num_warps"] == 8)
    result = run(evaluate)
    assert result.best is result.trials[0] and not result.improved
    neighbours = [launch_values(t.source) for t in result.trials[1:]]
    assert [(v["BLOCK_SIZE"], v["num_warps"], v["num_stages"]) for v in neighbours] == [
        (2048, 4, 3),
        (512, 4, 3),
        (1024, 8, 3),
        (1024, 2, 3),
        (1024, 4, 4),
        (1024, 4, 2),
    ]
    assert "speed could not be measured" in result.summary
    assert "Checked 6 neighbouring launch configuration(s) for correctness: 1 failed" in result.summary
    limited = run(synthetic(timed=False)[0], budget=4)
    assert len(limited.trials) == 4


def test_failing_baseline_stops_the_search():
    evaluate, seen = synthetic(broken=lambda v: True)
    result = run(evaluate)
    assert len(result.trials) == len(seen) == 1
    assert not result.improved
    assert result.summary == "the baseline fails (output mismatch: max abs error 3.5); nothing to tune"


def test_should_stop_and_crashing_evaluations():
    calls = []

    async def evaluate(source):
        calls.append(source)
        if len(calls) == 2:
            raise RuntimeError("GPU fell off the bus")
        return Trial(values={}, source=source, ok=True, latency_ms=1.0 / len(calls), message="")

    result = run(evaluate, should_stop=lambda: len(calls) >= 3)
    assert len(result.trials) == 3
    assert result.trials[1].ok is False
    assert result.trials[1].message == "evaluation raised RuntimeError: GPU fell off the bus"
    assert result.improved and result.best is result.trials[2]
    assert result.summary.endswith("(stopped early)")


def test_nothing_to_tune():
    source = SOURCE.replace("@triton.jit", "@triton.autotune(configs=[], key=[])\n@triton.jit")

    async def evaluate(source):
        return Measured(True, 1.0)

    result = asyncio.run(search_launch_params(source, evaluate, budget=10))
    assert len(result.trials) == 1
    assert result.summary.startswith("no tunable launch parameters")


def test_block_sizes_first_and_seed_orders_ties_deterministically():
    two_launches = SOURCE + "    add_kernel[(triton.cdiv(n, 512),)](x, y, out, n, BLOCK_SIZE=512)\n"

    async def flat(source):
        return Measured(True, 1.0)

    def first_changed(seed):
        trials = asyncio.run(search_launch_params(two_launches, flat, budget=2, seed=seed)).trials
        return next(key for key, value in trials[1].values.items() if value != trials[0].values[key])

    assert first_changed(0) == first_changed(0)
    assert {first_changed(seed) for seed in range(8)} == {
        "add_kernel:BLOCK_SIZE@L15",
        "add_kernel:BLOCK_SIZE@L16",
    }


def test_kernel_focus_tunes_only_that_kernels_launches():
    other = SOURCE.replace("add_kernel", "sub_kernel").split("@triton.jit")[1]
    two_kernels = SOURCE + "\n\n@triton.jit" + other

    async def flat(source):
        return Measured(True, 1.0)

    trials = asyncio.run(search_launch_params(two_kernels, flat, budget=20, kernel="sub_kernel")).trials
    moved = {key for t in trials[1:] for key, value in t.values.items() if value != trials[0].values[key]}
    assert moved and all(key.startswith("sub_kernel:") for key in moved)
