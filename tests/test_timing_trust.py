"""Timing that cannot be gamed, and honest speedups: the caller's rules on synthetic per-call data (no GPU)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from geak.evaluator import peaks as peaks_cache
from geak.evaluator import timing_rules as rules
from geak.evaluator.bench import bench_result
from geak.evaluator.job.timing import InputSets, factor, interleaved, set_count
from geak.evaluator.pool import JobOutcome
from geak.evaluator.results import DEFAULT_NOISE_MARGIN, BenchResult, Peaks
from geak.evaluator.runtime_facts import RuntimeFacts
from geak.evaluator.shared.protocol import timed_output_file, timed_output_sets
from geak.evaluator.shared.sequential import (
    GRAPH_MARGIN,
    RoundPlan,
    futile,
    judge,
    rounds_needed,
    settled,
    stopped_where_the_rule_says,
)
from geak.evaluator.speedup import speedup_interval

H200 = Peaks("NVIDIA H200", 4240.0, 675.0, 51.0, "measured", 60 << 20, 9800.0, 0.015)
PLAN16 = RoundPlan.fixed(16, H200.noise_margin)
RUNTIME = {"backend": "cuda", "device": "NVIDIA H200", "torch_version": "2.11", "triton_version": "3.6"}
FACTS = RuntimeFacts.from_dict(RUNTIME)


def rounds_with(offset: float, n: int = 15, jitter: float = 0.002, seed: int = 0) -> tuple[list, list]:
    """Reference and candidate rounds whose per-round ratio is 1 + offset, with multiplicative jitter."""
    rng = random.Random(seed)
    ref = [[1.0 * (1 + offset) * (1 + rng.uniform(-jitter, jitter))] for _ in range(n)]
    cand = [[1.0 * (1 + rng.uniform(-jitter, jitter))] for _ in range(n)]
    return ref, cand


# ----------------------------------------------------------------------------------------- noise floor


@pytest.mark.parametrize("offset", [0.0005, 0.001, 0.002, 0.005, -0.0005, -0.005])
def test_aa_with_systematic_offsets_is_within_noise(offset):
    s = speedup_interval(*rounds_with(offset, jitter=0.0005))
    assert (s.low > 1.0 or s.high < 1.0) or offset == 0  # the interval excludes 1: the old rule claimed a change
    assert not s.significant and s.verdict == "within noise (±1.5%)" and s.margin == DEFAULT_NOISE_MARGIN


def test_real_speedups_and_slowdowns_are_claimed():
    faster = speedup_interval(*rounds_with(0.2))
    assert faster.significant and faster.verdict == "faster" and faster.low > 1.15
    slower = speedup_interval(*rounds_with(-0.2))
    assert slower.significant and slower.verdict == "slower" and slower.high < 0.85


def test_verdict_needs_the_whole_interval_beyond_the_margin():
    assert judge(1.011, 1.05, 0.01) == "faster"
    assert judge(1.009, 1.05, 0.01).startswith("undecided")  # straddles 1 + margin: neither a change nor none
    assert judge(0.95, 0.989, 0.01) == "slower"
    assert judge(0.95, 1.001, 0.005) == "undecided (the interval straddles the ±0.5% noise band)"
    assert judge(0.996, 1.004, 0.005) == "within noise (±0.5%)"  # wholly inside the band: decided, no change
    # the device's measured margin decides: 0.6% is a speedup on a quiet device, noise on a loud one
    ref, cand = rounds_with(0.006, jitter=0.0002)
    assert speedup_interval(ref, cand, RoundPlan.fixed(15, 0.005)).verdict == "faster"
    assert speedup_interval(ref, cand, RoundPlan.fixed(15, 0.01)).verdict == "within noise (±1%)"


class PlacedTimer:
    """A stand-in timer whose sample depends on where it runs: `second` is the factor of the later place in a round
    (two variants, one call each), `drift` a slope per sample (a GPU still warming); `base` is its true time."""

    def __init__(self, name: str, base: float, log: list, second: float = 1.0, drift: float = 0.0):
        self.name, self.base, self.log, self.second, self.drift = name, base, log, second, drift

    def sample(self) -> float:
        place = len(self.log)
        self.log.append(self.name)
        return self.base * (self.second if place % 2 else 1.0) * (1 + self.drift * place)


def placed_timers(candidate_base: float, **effect) -> tuple[dict, list]:
    log: list[str] = []
    timers = {"reference": [PlacedTimer("reference", 1.0, log, **effect)]}
    timers["candidate"] = [PlacedTimer("candidate", candidate_base, log, **effect)]
    return timers, log


def test_rounds_come_in_pairs_whose_second_reverses_the_first():
    timers, log = placed_timers(1.0)
    rounds = interleaved(timers, RoundPlan.fixed(5), seed=3)
    assert len(rounds["reference"]) == len(rounds["candidate"]) == 6  # made even
    pairs = [log[i : i + 4] for i in range(0, len(log), 4)]
    assert all(p[:2] == p[:1:-1] for p in pairs)  # A B | B A
    assert {p[0] for p in pairs} == {"reference", "candidate"}  # the first order is still drawn at random


@pytest.mark.parametrize("effect", [{"second": 0.85}, {"second": 1.2}, {"drift": 0.01}])
@pytest.mark.parametrize("rounds", [3, 5, 15])
def test_aa_is_within_noise_whatever_a_place_in_the_round_is_worth(effect, rounds):
    # A variant that runs second in a round is 15% faster (or 20% slower), or each sample is 1% slower than the
    # last: in unpaired rounds of random order, 5 rounds often put one variant second more often, and the A/A claimed.
    for seed in range(20):
        timers, _ = placed_timers(1.0, **effect)
        s = speedup_interval(*interleaved(timers, RoundPlan.fixed(rounds), seed=seed).values())
        assert not s.significant and abs(s.ratio - 1.0) < 0.002, (seed, s)


def test_a_real_speedup_is_still_claimed_whatever_a_place_is_worth():
    timers, _ = placed_timers(1 / 1.25, second=0.85)
    s = speedup_interval(*interleaved(timers, RoundPlan.fixed(15), seed=0).values())
    assert s.verdict == "faster" and 1.24 < s.low <= s.ratio <= s.high < 1.26


class SteadyTimer:
    """A stand-in timer of a fixed time with multiplicative jitter drawn from `rng`."""

    def __init__(self, base: float, jitter: float, rng: random.Random):
        self.base, self.jitter, self.rng = base, jitter, rng

    def sample(self) -> float:
        return self.base * (1 + self.rng.uniform(-self.jitter, self.jitter))


def sequential(candidate_base: float, jitter: float, seed: int = 0, plan: RoundPlan | None = None):
    rng = random.Random(seed)
    plan = plan or RoundPlan(margin=0.01)
    timers = {"reference": [SteadyTimer(1.0, jitter, rng)], "candidate": [SteadyTimer(candidate_base, jitter, rng)]}
    stop = lambda out: settled(out["reference"], out["candidate"], plan)  # the rule the job follows
    return interleaved(timers, plan, seed=seed, stop=stop), plan


@pytest.mark.parametrize("candidate_base", [1.0, 1 / 1.3, 1.3])
def test_a_clear_verdict_stops_at_the_first_look(candidate_base):
    rounds, plan = sequential(candidate_base, jitter=0.001)
    assert len(rounds["reference"]) == plan.min_rounds == 6
    assert speedup_interval(rounds["reference"], rounds["candidate"], plan).decided
    assert stopped_where_the_rule_says(rounds["reference"], rounds["candidate"], plan) is None


def test_an_unclear_verdict_takes_rounds_until_decided_or_the_limit():
    taken = []
    for seed in range(10):
        rounds, plan = sequential(1 / 1.012, jitter=0.04, seed=seed)  # 1.2% faster in ±4% noise: near the edge
        taken.append(len(rounds["reference"]))
        s = speedup_interval(rounds["reference"], rounds["candidate"], plan)
        assert taken[-1] in plan.looks(), (seed, s)
        assert s.decided or taken[-1] == plan.max_rounds or futile(rounds["reference"], rounds["candidate"], plan)
        assert s.verdict in ("faster",) or not s.significant  # never "slower"
        assert stopped_where_the_rule_says(rounds["reference"], rounds["candidate"], plan) is None
    assert sum(taken) / len(taken) > 12  # near the edge in heavy noise, many rounds before the verdict or futility
    clear, plan = sequential(1 / 1.3, jitter=0.04)
    assert len(clear["reference"]) < plan.max_rounds  # a clear 1.3x in the same noise stops early


def test_aa_never_claims_a_change_however_noisy_under_sequential_rounds():
    for seed in range(30):
        rounds, plan = sequential(1.0, jitter=0.03, seed=seed)
        s = speedup_interval(rounds["reference"], rounds["candidate"], plan)
        assert not s.significant, (seed, s)


def test_a_timing_no_later_look_could_decide_stops_undecided_early_and_a_clear_one_does_not():
    """Calls that vary by tens of percent between rounds (TritonBench-revised `matrix_reduction.py`: 86%) took every
    round a batch run allows to end undecided. A look where even half the spread at the plan's last look would
    leave the interval undecided stops there: never with a verdict, and never where more rounds could give one."""
    early = 0
    for seed in range(20):
        rounds, plan = sequential(1.0, jitter=0.5, seed=seed)
        ref, cand = rounds["reference"], rounds["candidate"]
        s = speedup_interval(ref, cand, plan)
        assert stopped_where_the_rule_says(ref, cand, plan) is None, (seed, len(ref), s)
        assert not futile(ref[:6], cand[:6], plan)  # too few pairs to judge the spread by
        if len(ref) < plan.max_rounds and not s.decided:  # (noise of ±50% claims at times, futility or not)
            early += 1
            assert futile(ref, cand, plan)
    assert early >= 12, early  # of 20; the rest ran every round (or claimed, as without futility)
    verdicts = []
    for seed in range(40):
        rounds, plan = sequential(1 / 1.3, jitter=0.5, seed=seed)  # 1.3x in the same noise: more rounds decide it
        verdicts.append(speedup_interval(rounds["reference"], rounds["candidate"], plan).verdict.split()[0])
    # 31 of 40 without futility (163 of 200 seeds; 157 with it)
    assert verdicts.count("faster") >= 26 and "slower" not in verdicts, verdicts
    steady, plan = sequential(1.0, jitter=0.01)  # light noise: rounds until within noise, as before
    assert speedup_interval(steady["reference"], steady["candidate"], plan).verdict.startswith("within noise")


def test_a_job_that_stops_off_its_rule_is_caught():
    rounds, plan = sequential(1.0, jitter=0.05, seed=1)
    ref, cand = rounds["reference"], rounds["candidate"]
    needed = rounds_needed(ref, cand, plan)
    assert needed == len(ref) > plan.min_rounds
    early = stopped_where_the_rule_says(ref[:6], cand[:6], plan)  # stopped where the rule says go on
    assert early and "stopping rule says" in early
    clear, _ = sequential(1 / 1.3, jitter=0.001)
    extra = [[1.0]] * 2, [[1 / 1.3]] * 2
    late = stopped_where_the_rule_says(clear["reference"] + extra[0], clear["candidate"] + extra[1], plan)
    assert late and "rounds were timed where the" in late  # went on where the rule says stop
    odd = stopped_where_the_rule_says(ref[:7], cand[:7], plan)  # a count the plan never looks at
    assert odd and "the plan looks at" in odd


def test_a_time_limit_stops_an_undecided_timing_at_a_look_and_only_there():
    """A batch run's plan stops a timing whose rounds took its limit at the next look, undecided: the caller accepts
    that stop where the speedup was undecided at every look so far, and nowhere else."""
    plan = RoundPlan(6, 24, 0.01, max_s=10.0)
    assert RoundPlan.from_dict(asdict(plan)) == plan and plan.for_calls([("cuda-graph", 1.0, 1)]).max_s == 10.0
    ticks = iter(range(1, 1000))  # 4 s from one look to the next: the limit is passed at the look at 12
    rng = random.Random(3)
    timers = {"reference": [SteadyTimer(1.0, 0.05, rng)], "candidate": [SteadyTimer(1.0, 0.05, rng)]}
    timed_out = []

    def stop(out):
        if speedup_interval(out["reference"], out["candidate"], plan).decided:
            return True
        timed_out.append(next(ticks) * 4 > plan.max_s)
        return timed_out[-1]

    rounds = interleaved(timers, plan, seed=3, stop=stop)
    ref, cand = rounds["reference"], rounds["candidate"]
    assert len(ref) == 12 and timed_out == [False, False, True], (len(ref), timed_out)
    assert stopped_where_the_rule_says(ref, cand, plan, timed_out=True) is None
    assert "stopping rule says" in stopped_where_the_rule_says(ref, cand, plan)  # without the limit: stopped early
    unlimited = RoundPlan(6, 24, 0.01)
    assert "time limit" in stopped_where_the_rule_says(ref, cand, unlimited, timed_out=True)
    clear, _ = sequential(1 / 1.3, jitter=0.001)  # decided at 6: a stop past it is no time limit's
    extra = [[1.0]] * 2, [[1 / 1.3]] * 2
    late = stopped_where_the_rule_says(clear["reference"] + extra[0], clear["candidate"] + extra[1], plan, True)
    assert late and "stopping rule says 6" in late
    verdict = speedup_interval(ref, cand, plan).verdict
    assert verdict.startswith("undecided"), verdict


def test_batch_runs_give_their_timings_a_time_limit_and_single_benches_none():
    from geak.agent.batch.eval_slots import BATCH_ROUNDS_S, batch_eval_options
    from geak.agent.config import AgentConfig
    from geak.evaluator.bench import round_plan
    from geak.evaluator.options import EvalOptions

    batch = batch_eval_options(AgentConfig(), "gpu", 0)
    assert round_plan(batch, None, True, 0.01).max_s == BATCH_ROUNDS_S > 0
    assert round_plan(EvalOptions(), None, True, 0.01).max_s == 0  # the editor and `geak bench`: rounds until decided
    assert round_plan(batch, 8, True, 0.01) == RoundPlan.fixed(8, 0.01)  # --rounds: exactly those


def test_plans_are_whole_pairs():
    assert RoundPlan.fixed(5).looks() == (6,)
    assert RoundPlan(6, 40).looks() == (6, 8, 12, 16, 24, 32, 40)
    with pytest.raises(ValueError):
        RoundPlan.from_dict({"min_rounds": 5, "max_rounds": 40, "margin": 0.01})
    with pytest.raises(ValueError):
        RoundPlan.from_dict({"min_rounds": 8, "max_rounds": 6, "margin": 0.01})


# ----------------------------------------------------------------------------------------- peaks cache


def test_measured_peaks_round_trip_through_the_cache(tmp_path):
    path = tmp_path / "peaks.json"
    peaks_cache.store(FACTS, H200, path)
    assert peaks_cache.read_cached(FACTS, path) == H200
    assert peaks_cache.read_cached(replace(FACTS, triton_version="3.7"), path) is None  # another stack: measure


@pytest.mark.parametrize(
    "change",
    [
        {"bandwidth_gbps": 9e12},  # switches the impossible-speed check off
        {"bandwidth_gbps": 100.0},  # far below an H200's datasheet
        {"tflops_16bit": 1e9},
        {"tflops_fp32": float("nan")},
        {"l2_gbps": 1e9},
        {"noise_margin": 0.0},  # would claim every A/A offset as a speedup
        {"noise_margin": 0.9},  # would hide every real speedup
        {"noise_margin": True},
        {"device": "NVIDIA H100"},
        {"source": "datasheet (H200)"},
        {"bandwidth_gbps": "4240"},
        {"extra": 1},
    ],
)
def test_absurd_cache_entries_are_discarded(tmp_path, change):
    path = tmp_path / "peaks.json"
    entry = {**asdict(H200), **change}
    text = json.dumps({peaks_cache.cache_key(FACTS): entry})
    path.write_text(text)
    assert peaks_cache.read_cached(FACTS, path) is None
    peaks_cache.store(FACTS, replace(H200, noise_margin=0.9), path)  # never written either
    assert path.read_text() == text


def test_missing_fields_or_a_broken_file_mean_measure_again(tmp_path):
    path = tmp_path / "peaks.json"
    entry = asdict(H200)
    del entry["noise_margin"]
    path.write_text(json.dumps({peaks_cache.cache_key(FACTS): entry}))
    assert peaks_cache.read_cached(FACTS, path) is None
    path.write_text("[1, 2")
    assert peaks_cache.read_cached(FACTS, path) is None
    path.write_text("[1, 2]")
    assert peaks_cache.read_cached(FACTS, path) is None


def test_datasheet_peaks_carry_the_default_margin():
    p = peaks_cache.datasheet_peaks("NVIDIA H200", 1)
    assert p.bandwidth_gbps == 4800.0 and p.noise_margin == DEFAULT_NOISE_MARGIN and p.source == "datasheet (H200)"


def test_the_caller_judges_what_a_peaks_job_measured():
    """The job sends ceilings and A/A rounds (``job/device_ceilings.measure``); the margin is derived here."""
    identical = [[1.0]] * 4  # 4 rounds of one timed call
    off = [[1.0], [1.02], [1.0], [1.02]]
    found = {f: getattr(H200, f) for f in ("device", "bandwidth_gbps", "tflops_16bit", "tflops_fp32", "l2_bytes")}
    found |= {"l2_gbps": H200.l2_gbps, "aa_rounds": [{"a": identical, "b": identical}]}
    peaks = peaks_cache.measured_peaks(found, H200.device)
    assert peaks == replace(H200, noise_margin=peaks_cache.MIN_NOISE_MARGIN)  # no departure: the floor
    wide = [{"a": identical, "b": [[2.0]] * 4}]
    assert peaks_cache.noise_margin(wide) == peaks_cache.MAX_NOISE_MARGIN
    assert peaks_cache.noise_margin([{"a": off, "b": identical}]) > peaks_cache.MIN_NOISE_MARGIN
    assert peaks_cache.measured_peaks({"device": H200.device, "l2_bytes": 1}, H200.device) is None  # datasheet mode
    assert peaks_cache.measured_peaks({**found, "device": "NVIDIA H100"}, H200.device) is None
    assert peaks_cache.measured_peaks({**found, "aa_rounds": [{"a": identical}]}, H200.device) is None


# ----------------------------------------------------------------------------------------- physics floors


def entry(method: str = "cuda-graph", **extra) -> dict:
    base = {
        "wrapper": "add",
        "signature": "add(f32[16777216], f32[16777216])",
        "bytes": 3 * 4 * (1 << 24),
        "certain_bytes": 4 * (1 << 24),
        "flops": None,
        "method": method,
        "input_sets": 4,
        "checked_launches": {"add_kernel": 1},
        "timed_launches": {"add_kernel": 1.0},
        "timed_calls": 4000,
        "estimate_ms": 1.0,
    }
    return {**base, **extra}


def test_graph_replay_is_not_exempt_from_the_impossible_speed_check():
    # the memoizing candidate seen on the H200: 210,205% of the copy peak, with a graph timing
    ms = 4 * (1 << 24) / (2102.05 * 4240e9) * 1e3
    problem = rules.impossible_speed("candidate", entry("cuda-graph"), ms, H200)
    assert problem and "physically impossible" in problem and "cuda-graph" in problem and "L2" in problem
    assert rules.impossible_speed("candidate", entry("flushed"), ms, H200)


def test_hot_graph_data_may_beat_dram_but_not_l2():
    hot = {"certain_bytes": 4 << 16, "bytes": 12 << 16}
    at_2x_dram = (4 << 16) / (2 * 4240e9) * 1e3
    assert rules.impossible_speed("candidate", entry("cuda-graph", **hot), at_2x_dram, H200) is None
    assert rules.impossible_speed("candidate", entry("flushed", **hot), at_2x_dram, H200)
    unknown_l2 = replace(H200, l2_gbps=0.0)  # taken as 4x DRAM, as is a measured L2 rate below that
    assert rules.impossible_speed("candidate", entry("cuda-graph", **hot), at_2x_dram, unknown_l2) is None
    assert rules.impossible_speed("candidate", entry("cuda-graph", **hot), at_2x_dram / 4, unknown_l2)
    assert rules.impossible_speed("candidate", entry("cuda-graph", **hot), at_2x_dram / 4, H200)
    big_l2 = replace(H200, l2_gbps=40000.0)
    assert rules.impossible_speed("candidate", entry("cuda-graph", **hot), at_2x_dram / 4, big_l2) is None


def test_a_real_flushed_timing_passes():
    ms = 3 * 4 * (1 << 24) / (3800e9) * 1e3  # 90% of the copy peak
    assert rules.impossible_speed("candidate", entry("flushed"), ms, H200) is None
    assert "timed at 0" in rules.impossible_speed("candidate", entry("flushed"), 0.0, H200)


def test_declared_flops_above_the_matmul_peak_are_impossible():
    flops = 2 * 4096**3
    matmul = entry("flushed", certain_bytes=2 * 4096 * 4096, bytes=6 * 4096 * 4096, flops=flops)
    ms_real = flops / 600e12 * 1e3
    assert rules.impossible_speed("candidate", matmul, ms_real, H200) is None
    problem = rules.impossible_speed("candidate", matmul, ms_real / 10, H200)
    assert problem and "TFLOP/s" in problem
    fp8 = {**matmul, "low_precision": True}  # 8-bit inputs: twice the 16-bit ceiling
    assert rules.impossible_speed("candidate", fp8, flops / 1300e12 * 1e3, H200) is None


# ----------------------------------------------------------------------------------------- launches


def test_timed_calls_that_launch_nothing_fail():
    cand = entry(timed_launches={}, checked_launches={"add_kernel": 1})
    problem = rules.launch_problem("candidate", cand, entry())
    assert problem and "launched no Triton kernel in its timed calls" in problem
    # a torch fallback everywhere: nothing launched untimed either, but the reference launches
    fallback = entry(timed_launches={}, checked_launches={})
    assert "no Triton kernel" in rules.launch_problem("candidate", fallback, entry())
    # without a reference, a file that never launches a kernel is timed as it is
    assert rules.launch_problem("candidate", fallback, None) is None


def test_timed_calls_that_skip_launches_fail():
    after_40 = entry(timed_launches={"add_kernel": 40 / 4000}, checked_launches={"add_kernel": 1})
    problem = rules.launch_problem("candidate", after_40, entry())
    assert problem and "fewer kernels" in problem and "add_kernel 0.01 per timed call vs 1 untimed" in problem
    renamed = entry(timed_launches={"fused": 1.0}, checked_launches={"fused": 1})  # its own kernels: fine
    assert rules.launch_problem("candidate", renamed, entry()) is None
    assert rules.launch_problem("candidate", entry(), entry()) is None


# ----------------------------------------------------------------------------------------- timed outputs


def save_outputs(directory, label: str, k: int, tensor, run: str = "", call: int = 0) -> None:
    torch.save(
        {"return": tensor, "args": [None, None], "kwargs": {}}, directory / timed_output_file(label, call, k, run)
    )


def test_outputs_of_timed_calls_must_match_the_reference(tmp_path):
    right = torch.arange(8, dtype=torch.float32)
    for k, value in ((0, right), (3, right * 2)):
        save_outputs(tmp_path, "reference", k, value)
        save_outputs(tmp_path, "reference", k, value, "again")
        save_outputs(tmp_path, "candidate", k, value)
    assert rules.output_problems("add(f32[8])", 0, 4, tmp_path, 4000) == ([], [])
    save_outputs(tmp_path, "candidate", 3, right)  # cached by address: the values of an earlier call
    problems, _ = rules.output_problems("add(f32[8])", 0, 4, tmp_path, 4000)
    assert len(problems) == 1 and "input set 4, after 4000 timed calls" in problems[0]
    assert "differ from the reference's on the same inputs" in problems[0]
    save_outputs(tmp_path, "candidate", 0, torch.full((8,), math.nan))  # left unwritten (poisoned)
    problems, _ = rules.output_problems("add(f32[8])", 0, 4, tmp_path, 41)  # the sets are read side by side
    assert len(problems) == 2 and "NaN" in problems[0] and "input set 4" in problems[1]  # and said in their order


def test_a_reproduced_reference_run_is_a_marker_and_large_outputs_are_checked_once(tmp_path):
    from geak.evaluator.job.capture import same_outputs
    from geak.evaluator.shared.protocol import LARGE_OUTPUT_BYTES, REPRODUCED

    right = torch.arange(8, dtype=torch.float32)
    for k in (0, 3):
        save_outputs(tmp_path, "reference", k, right * (k + 1))
        torch.save(REPRODUCED, tmp_path / timed_output_file("reference", 0, k, "again"))
        save_outputs(tmp_path, "candidate", k, right * (k + 1))
    assert rules.output_problems("add(f32[8])", 0, 4, tmp_path, 4000) == ([], [])
    save_outputs(tmp_path, "candidate", 3, right)
    assert rules.output_problems("add(f32[8])", 0, 4, tmp_path, 4000)[0]  # the marker does not excuse a mismatch
    assert timed_output_sets(4) == [0, 3] and timed_output_sets(4, LARGE_OUTPUT_BYTES + 1) == [3]
    (tmp_path / timed_output_file("candidate", 0, 0)).unlink()  # only the last set of a large call is read
    assert rules.output_problems("add", 0, 4, tmp_path, 9, None, LARGE_OUTPUT_BYTES + 1)[0]  # set 4 still differs
    same = {"return": right, "args": [right.clone(), "untouched input"], "kwargs": {}}
    assert same_outputs(same, {"return": right.clone(), "args": [right, "untouched input"], "kwargs": {}})
    assert not same_outputs(same, {"return": right + 1, "args": [right, "untouched input"], "kwargs": {}})
    assert not same_outputs(same, {"return": right.double(), "args": [right, "untouched input"], "kwargs": {}})
    nan = torch.full((2,), math.nan)
    assert not same_outputs(nan, nan.clone())  # NaN is never the same: such outputs are saved and compared


def test_identical_autotuned_kernels_of_two_variants_are_tuned_once():
    """In a timing job the reference's choice for a key is the candidate's where their kernels are the same (same
    source, configs and keys): an A/A's two tunings otherwise pick among near-equal configs by noise."""
    from geak.evaluator.job import autotuning, launch_modes

    class Tuner:  # what the wrapper reads of Triton's Autotuner
        def __init__(self, src: str, benchmarked: list):
            self.fn = SimpleNamespace(src=src)
            self.configs = ["BLOCK: 64", "BLOCK: 128", "BLOCK: 256"]
            self.keys = ["n"]
            self.cache: dict = {}
            self.benchmarked = benchmarked

    def tune(tuner, key):  # Triton's run: benchmark a key it has no choice for (here: by the source's noise)
        if key not in tuner.cache:
            tuner.benchmarked.append(key)
            tuner.cache[key] = tuner.configs[hash((tuner.fn.src, key, len(tuner.benchmarked))) % 3]
        return tuner.cache[key]

    log: list = []
    with launch_modes.twins_tuned_alike():
        reference, candidate, changed = Tuner("k", log), Tuner("k", log), Tuner("k2", log)
        for key in ((1024,), (4096,)):
            picked = autotuning._tuned_like_twins(reference, lambda t, k: tune(t, k), (key,), {})
            assert autotuning._tuned_like_twins(candidate, lambda t, k: tune(t, k), (key,), {}) == picked
            autotuning._tuned_like_twins(changed, lambda t, k: tune(t, k), (key,), {})
    assert log == [(1024,), (1024,), (4096,), (4096,)]  # the twin tuned nothing; the changed kernel tuned itself


def test_an_autotuned_kernel_tunes_among_the_configs_that_compiled_ahead_and_fails_as_triton_would_if_none_did():
    """Configs that failed to compile in forked processes are not compiled again by the tuning (a check of
    TritonBench-revised `triton_linear_activation.py` compiled 88 configs failing in ptxas one by one, a minute on an
    H200); where every one failed, the first runs alone and raises what Triton raises. The tuner's configs are its
    own again after."""
    from geak.evaluator.job.compile import configs_ahead

    tuner = SimpleNamespace(configs=["B64", "B128", "B256"])
    seen: list[list[str]] = []

    def original(t, *args, **kwargs):
        seen.append(list(t.configs))
        return t.configs[-1]

    assert configs_ahead.tuned_without(tuner, original, ["B128"], (), {}) == "B256"
    assert configs_ahead.tuned_without(tuner, original, [], (), {}) == "B256"
    assert configs_ahead.tuned_without(tuner, original, ["B64", "B128", "B256"], (), {}) == "B64"
    assert seen == [["B64", "B256"], ["B64", "B128", "B256"], ["B64"]]
    assert tuner.configs == ["B64", "B128", "B256"]


def test_a_timing_jobs_autotuner_times_its_configs_with_the_short_benchmark_unless_its_file_gave_one(monkeypatch):
    """Triton's default benchmark spends 125 ms a config (10-11 s a tuning key of a 48-config file on an H100, most
    of its timing): within ``tuned_with`` a real Autotuner without a benchmark of its own uses the given one, and
    its default again after; one whose file passed `do_bench` keeps it."""
    import triton
    import triton.language as tl

    from geak.evaluator.job import autotuning, launch_modes, timing
    from geak.evaluator.job.launch_modes import STATE

    def kernel(x, BLOCK: tl.constexpr):
        pass

    configs = [triton.Config({"BLOCK": b}) for b in (64, 128)]
    default = triton.autotune(configs=configs, key=[])(triton.jit(kernel))
    own = lambda kernel_call, quantiles: [1.0, 1.0, 1.0]
    given = triton.autotune(configs=configs, key=[], do_bench=own)(triton.jit(kernel))
    quick = lambda kernel_call, quantiles=None: [2.0, 2.0, 2.0]
    with autotuning._benchmarked_by(default, quick), autotuning._benchmarked_by(given, quick):
        assert default.do_bench is quick and given.do_bench is own
    assert "do_bench" not in vars(default) and given.do_bench is own  # Triton's default (it needs a GPU to be read)
    with autotuning._benchmarked_by(default, None):
        assert "do_bench" not in vars(default)
    with launch_modes.tuned_with(quick):
        assert STATE.tuning_bench[-1] == (quick, False)
    assert STATE.tuning_bench == []
    # A check (no choice by speed) also replaces the benchmark Triton builds from `use_cuda_graph` (ROCm
    # `rmsnorm_fwd.py`'s), never one the file wrote; a timing job keeps both.
    with pytest.warns(Warning):  # Triton calls the argument deprecated
        graphed = triton.autotune(configs=configs, key=[], use_cuda_graph=True)(triton.jit(kernel))
    assert autotuning.tritons_own_benchmark(graphed._do_bench) and not autotuning.tritons_own_benchmark(own)
    tritons = graphed._do_bench
    with autotuning._benchmarked_by(graphed, quick, over_tritons=True), autotuning._benchmarked_by(given, quick, True):
        assert graphed.do_bench is quick and given.do_bench is own
    with autotuning._benchmarked_by(graphed, quick):
        assert graphed.do_bench is tritons
    called = []
    monkeypatch.setattr(timing, "_spun_times", lambda fn, calls: [float(calls - i) for i in range(calls)])
    assert timing.tuning_bench(lambda: called.append(1), (0.5, 0.2, 0.8)) == [4.0, 2.0, 6.0]
    assert timing.tuning_bench(lambda: called.append(1)) == 4.0 and called == [1, 1]  # a warm call before each


def test_an_autotuned_kernel_probed_at_other_sizes_runs_its_tested_choice_without_tuning():
    """Probes at other sizes bring tuning keys the tests did not: the kernel runs the config it chose for a tested
    key (re-tuning cost an H200 10 s for one probe); a key it tuned keeps its own choice."""
    from geak.evaluator.job import autotuning, launch_modes

    tuner = SimpleNamespace(arg_names=["x", "n", "BLOCK"], keys=["n"], configs=["B64", "B128", "B256"], cache={})
    x = torch.zeros(2)
    assert autotuning._tuning_key(tuner, (x, 1024), {}) == (1024, "torch.float32")
    with launch_modes.tuning_kept():
        assert autotuning._untuned_config(tuner, (x, 1024), {}) is None  # nothing tuned yet: it tunes
        tuner.cache = {(1024, "torch.float32"): "B128", (4096, "torch.float32"): "B256"}
        assert autotuning._untuned_config(tuner, (x, 1024), {}) is None  # a tested key: its own choice
        assert autotuning._untuned_config(tuner, (x, 1040), {}) == "B128"  # another size: the first tested choice
        assert autotuning._untuned_config(tuner, (x,), {"n": 4112}) == "B128"
    assert autotuning._untuned_config(tuner, (x, 1040), {}) is None  # outside the probes: Triton tunes
    with launch_modes.tuning_deferred():
        assert autotuning._untuned_config(tuner, (x, 1040), {}) == "B64"


def test_missing_linked_or_hostile_output_files_fail(tmp_path):
    save_outputs(tmp_path, "reference", 0, torch.ones(4))
    save_outputs(tmp_path, "reference", 0, torch.ones(4), "again")
    assert "could not be read back" in rules.output_problems("f", 0, 1, tmp_path, 1)[0][0]
    (tmp_path / timed_output_file("candidate", 0, 0)).symlink_to(tmp_path / timed_output_file("reference", 0, 0))
    assert "could not be read back" in rules.output_problems("f", 0, 1, tmp_path, 1)[0][0]
    (tmp_path / timed_output_file("candidate", 0, 0)).unlink()
    (tmp_path / timed_output_file("candidate", 0, 0)).write_bytes(b"PK\x03\x04 not a torch file")
    assert "could not be read back" in rules.output_problems("f", 0, 1, tmp_path, 1)[0][0]
    with pytest.raises(ValueError):
        timed_output_file("../reference", 0, 0)


def test_a_nondeterministic_reference_is_not_held_against_the_candidate(tmp_path):
    save_outputs(tmp_path, "reference", 0, torch.zeros(4))
    save_outputs(tmp_path, "reference", 0, torch.ones(4), "again")
    save_outputs(tmp_path, "candidate", 0, torch.full((4,), 7.0))
    problems, notes = rules.output_problems("f", 0, 1, tmp_path, 1)
    assert problems == [] and "reference gives different outputs" in notes[0]


# ----------------------------------------------------------------------------------------- wall clock


def test_claimed_device_time_must_fit_the_callers_clock():
    assert rules.wall_clock_problem({"reference": 300.0, "candidate": 400.0}, 1.0) is None
    problem = rules.wall_clock_problem({"reference": 3000.0, "candidate": 400.0}, 1.0)
    assert problem and "3400 ms of device time" in problem and "1000 ms" in problem
    assert "cannot be verified" in rules.wall_clock_problem({"candidate": 1.0}, None)


def test_forged_batch_events_only_shrink_the_window():
    now = iter(range(100))
    clock = rules.BatchClock(lambda: next(now))
    clock.on_event({"batch": "start"})  # forged at import: 0
    clock.on_event({"batch": "start"})  # the real one: 1
    clock.on_event({"bench": "x"})
    clock.on_event({"batch": "end"})  # 2
    clock.on_event({"batch": "end"})  # forged late: ignored
    assert clock.window_s == 1
    clock.on_event({"batch": "start"})  # forged after the end: the window is open again, so rejected
    assert clock.window_s is None


# ----------------------------------------------------------------------------------------- the verdict


def job_result(cand_entry: dict, device_ms: float = 500.0, ratio: float = 1.0, method: str = "flushed") -> dict:
    ref_entry = entry(method)
    cand_entry = {**entry(method), **cand_entry}
    n = 16
    return {
        "calls": {
            "reference": [{**ref_entry, "samples": [1.0 + 0.001 * (i % 3) for i in range(n)]}],
            "candidate": [{**cand_entry, "samples": [1.0 / ratio] * n}],
        },
        "labels": ["reference", "candidate"],
        "device_ms": {"reference": device_ms / 2, "candidate": device_ms / 2},
    }


def verdict(result: dict, tmp_path, window_s: float | None = 2.0, ran_again: str = ""):
    for k in timed_output_sets(4):  # what an honest job saves after its timed batch
        for label, run in (("reference", ""), ("reference", "again"), ("candidate", "")):
            save_outputs(tmp_path, label, k, torch.ones(4), run)
    outcome = JobOutcome("ok", result, ran_again=ran_again)
    return bench_result(outcome, "cand.py", None, None, FACTS, H200, tmp_path, window_s, PLAN16)


def test_an_honest_timing_gets_a_speedup_with_its_noise_floor(tmp_path):
    r = verdict(job_result({}, ratio=1.0), tmp_path)
    assert r.ok and r.speedup and r.speedup.verdict == "within noise (±1.5%)" and not r.speedup.significant
    assert r.peaks == H200 and "within noise" in r.message and "once more" not in r.message
    r = verdict(job_result({}, ratio=1.0), tmp_path, ran_again="the GPU stayed busy with the paused jobs' queued work")
    assert r.message.endswith("timed once more, once the jobs sharing the GPU had ended (the GPU stayed busy with "
                              "the paused jobs' queued work)")  # fmt: skip
    r = verdict(job_result({}, ratio=1.25), tmp_path)
    assert r.ok and r.speedup.verdict == "faster"


def test_helpers_left_untimed_and_the_phases_are_reported(tmp_path):
    result = {**job_result({}), "helpers": ["pack(f16[64,64], 128)", "pack(f16[64,64], 64)"],
              "phases_s": {"prepare": 0.25, "rounds": 1.5}}  # fmt: skip
    r = verdict(result, tmp_path)
    assert r.ok and r.helpers == ("pack(f16[64,64], 128)", "pack(f16[64,64], 64)")
    assert "; not timed: 2 call(s) of pack, which launch no Triton kernel" in r.message
    assert r.phases_s == {"prepare": 0.25, "rounds": 1.5}
    assert BenchResult.from_dict(r.to_dict()) == r
    forged = verdict({**job_result({}), "phases_s": {"rounds": "soon"}}, tmp_path)
    assert not forged.ok and "malformed" in forged.message


def test_timings_mostly_of_graph_replays_are_judged_in_a_wider_band(tmp_path):
    """Tiny calls replayed in graphs differ systematically by up to ~1.5% between identical files: a 1.8% speedup of
    them is no claim, where the same of flushed calls is."""
    plan = RoundPlan(6, 40, 0.015)
    assert plan.for_calls([("cuda-graph", 0.01, 1), ("flushed", 0.005, 0)]).margin == GRAPH_MARGIN
    assert plan.for_calls([("cuda-graph", 0.01, 1), ("flushed", 0.5, 0)]).margin == plan.margin
    flushed = verdict(job_result({}, ratio=1.018), tmp_path)
    assert flushed.ok and flushed.speedup.verdict == "faster" and flushed.speedup.margin == 0.015
    graphs = verdict(job_result({}, ratio=1.018, method="cuda-graph"), tmp_path)
    assert graphs.ok and not graphs.speedup.significant and graphs.speedup.margin == GRAPH_MARGIN


def test_rejections_carry_clear_reasons(tmp_path):
    r = verdict(job_result({"timed_launches": {}}), tmp_path)
    assert not r.ok and r.message.startswith("timing rejected: candidate:") and "no Triton kernel" in r.message
    assert r.diagnostics and r.diagnostics[0].severity == "error"
    r = verdict(job_result({}, device_ms=5000.0), tmp_path, window_s=2.0)
    assert not r.ok and "tampered" in r.message
    r = verdict(job_result({}), tmp_path, window_s=None)
    assert not r.ok and "cannot be verified" in r.message
    stale = job_result({})
    verdict(stale, tmp_path)
    save_outputs(tmp_path, "candidate", 3, torch.zeros(4))
    r = bench_result(JobOutcome("ok", stale), "cand.py", None, None, FACTS, H200, tmp_path, 2.0, PLAN16)
    assert not r.ok and "differ from the reference's on the same inputs" in r.message
    fast = job_result({"timed_launches": {}}, ratio=20000.0)
    r = verdict(fast, tmp_path)
    assert not r.ok and "(and 1 more)" in r.message and "physically impossible" in r.diagnostics[1].message


def test_a_malformed_report_fails_cleanly(tmp_path):
    result = job_result({})
    del result["device_ms"]
    r = verdict(result, tmp_path)
    assert not r.ok and "malformed" in r.message
    result = job_result({})
    result["calls"]["candidate"][0]["samples"] = "fast"
    assert not verdict(result, tmp_path).ok
    result = job_result({}, ratio=2.0)  # fewer rounds than the reference's: no speedup can be paired
    del result["calls"]["candidate"][0]["samples"][-1]
    r = verdict(result, tmp_path)
    assert not r.ok and "malformed" in r.message and "different numbers of rounds" in r.message


@pytest.mark.parametrize("sample", [0.0, -1.0, float("nan"), float("inf")])
def test_one_sample_of_no_negative_or_endless_time_rejects_the_timing(tmp_path, sample):
    """The medians look sane, yet a pair of rounds could claim any speedup (or divide by zero) in the caller."""
    result = job_result({}, ratio=1.25)
    result["calls"]["candidate"][0]["samples"][:2] = [sample, sample]
    r = verdict(result, tmp_path)
    assert not r.ok and r.speedup is None and "the timing was fooled" in r.message, r.message


def test_a_report_off_its_stopping_rule_is_not_believed(tmp_path):
    result = job_result({}, ratio=1.25)
    sequential_plan = RoundPlan(6, 40, H200.noise_margin)  # 16 rounds of a clear 1.25x: the rule stops at 6
    for who in ("reference", "candidate"):
        result["calls"][who][0]["samples"] = result["calls"][who][0]["samples"][:16]
    verdict(result, tmp_path)
    r = bench_result(JobOutcome("ok", result), "cand.py", None, None, FACTS, H200, tmp_path, 2.0, sequential_plan)
    assert not r.ok and "did not follow its stopping rule" in r.message and "rule says 6" in r.message


def test_an_undecided_interval_says_why_it_is_wide(tmp_path):
    result = job_result({}, ratio=1.0)
    noisy = [1.0, 1.3, 0.8, 1.2, 0.9, 1.25, 0.85, 1.1] * 2
    result["calls"]["candidate"][0]["samples"] = noisy
    result["autotune"] = {"reference": {"k": {"(1024,)": "BLOCK: 64"}}, "candidate": {"k": {"(1024,)": "BLOCK: 128"}}}
    result["device_lag_ms"] = 2.4
    r = verdict(result, tmp_path)
    assert r.ok and not r.speedup.decided and not r.speedup.significant, r.message
    why = r.speedup.verdict
    assert why.startswith("undecided") and "after 16 rounds" in why
    assert "autotuning chose BLOCK: 64 for the reference and BLOCK: 128 for the candidate" in why
    assert "busy with other work" in why and "varies by" in why


def test_the_speedup_comes_from_the_samples_the_rules_believed(tmp_path):
    result = job_result({}, ratio=1.25)
    result["rounds"] = {"reference": [[1.0]] * 16, "candidate": [[0.001]] * 16}  # a report's own say: ignored
    r = verdict(result, tmp_path)
    assert r.ok and r.speedup.verdict == "faster" and 1.24 < r.speedup.ratio < 1.26 and r.speedup.rounds == 16


# ----------------------------------------------------------------------------------------- input sets


def test_input_sets_rotate_addresses_and_refresh_values_identically_for_every_variant():
    x = torch.randn(64)
    idx = torch.randperm(64)
    base = ((x, idx), {"scale": 2.0, "out": torch.zeros(64)})
    ref, cand = InputSets(base, 3), InputSets(base, 3)
    pointers = {s[0][0].data_ptr() for s in ref.sets} | {s[0][0].data_ptr() for s in cand.sets}
    assert len(pointers) == 6 and x.data_ptr() not in pointers
    for sets in (ref, cand):
        sets.sets[1][0][1].zero_()  # a call that mutated its index argument
        sets.refresh(1, 7)
    assert torch.equal(ref.sets[1][0][0], cand.sets[1][0][0])
    assert torch.allclose(ref.sets[1][0][0], x * factor(7))
    assert not torch.equal(ref.sets[1][0][0], x)
    assert torch.equal(ref.sets[1][0][1], idx)  # index tensors keep their values (and structure)
    assert ref.sets[1][1]["scale"] == 2.0
    assert len({factor(step) for step in range(1000)}) == 1000
    assert all(0.5 <= factor(step, seed) < 1.0 for step in range(100) for seed in (0, 1))
    assert InputSets(base, 1, seed=1).call(lambda a, b, scale, out: a * scale, 0).shape == (64,)


def test_inputs_a_call_only_read_are_told_from_those_it_wrote():
    x, idx = torch.randn(64), torch.randperm(64)
    sets = InputSets(((x, idx, 3), {"out": torch.zeros(64), "bias": torch.ones(64)}), 2)
    sets.refresh(1, 5)
    args, kwargs = sets.sets[1]
    torch.add(args[0], kwargs["bias"], out=kwargs["out"])  # reads x, idx and bias; writes out
    assert sets.untouched(1, 5) == {0, 1, 4}  # positions: args, then kwargs (3 is not a tensor)
    args[1][0] += 1  # a call that also changed its index argument
    assert sets.untouched(1, 5) == {0, 4}
    assert sets.untouched(1, 6) == set()  # against another refresh, the scaled inputs no longer match


def test_set_count_fits_the_memory_budget():
    assert set_count(1 << 30, 8 << 30) == 4
    assert set_count(3 << 30, 8 << 30) == 2
    assert set_count(9 << 30, 8 << 30) == 1
    assert set_count(0, 0) == 4


# ----------------------------------------------------------------------------------------- the worker's timer (CPU)


class HostClock:
    """The host clock of the timer's tests: it moves a microsecond at each reading, and as long as a stand-in call
    says it takes (`sleep`), never with the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeEvent:
    """`torch.cuda.Event` on the host clock: the timer's bookkeeping runs without a GPU."""

    clock = HostClock()

    def __init__(self, enable_timing: bool = False):
        self.at = 0.0

    def record(self, stream=None) -> None:
        self.at = self.clock() + (1e-3 if stream is not None else 0.0)  # side-stream work ends later

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3


@pytest.fixture
def host_clock() -> HostClock:
    return HostClock()


@pytest.fixture
def host_timer(monkeypatch, host_clock):
    from geak.evaluator.job import timing

    main = SimpleNamespace(cuda_stream=1)
    monkeypatch.setattr(timing, "_host_clock", host_clock)
    monkeypatch.setattr(FakeEvent, "clock", host_clock)
    monkeypatch.setattr(timing, "_Event", FakeEvent)
    monkeypatch.setattr(timing, "_record_on", lambda event, stream: event.record(None if stream is main else stream))
    monkeypatch.setattr(timing, "_elapsed_ms", FakeEvent.elapsed_time)
    monkeypatch.setattr(timing, "_wait_for", FakeEvent.synchronize)
    monkeypatch.setattr(timing, "_current_stream", lambda: main)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "ExternalStream", lambda handle: handle)
    monkeypatch.setattr(timing, "_flush_buffer", lambda: torch.empty(16))
    monkeypatch.setattr(timing, "_probe_buffer", lambda: torch.zeros(1))
    monkeypatch.setattr(timing, "_spin", lambda cycles: None)
    monkeypatch.setattr(timing, "_cycles_per_ms", lambda: 2e6)  # not cached from these stand-ins
    monkeypatch.setattr(timing, "_flush_ms", lambda: 0.0)
    return timing


def test_the_timer_reads_clocks_bound_before_user_code(monkeypatch):
    """A file that forges torch.cuda.Event's clock or time.perf_counter at import (tests/fixtures/forged_timer.py)
    does not reach the timer: it bound the C-level event methods and the host clock when the worker started."""
    import re
    import time

    from geak.evaluator.job import timing

    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0, raising=False)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert timing._elapsed_ms is getattr(torch._C._CudaEventBase, "elapsed_time", None)
    assert timing._host_clock is not time.perf_counter and timing._host_clock() > 0
    code = Path(timing.__file__).read_text()
    assert not re.search(r"\.elapsed_time\(|\.record\(|torch\.cuda\.(synchronize|Event)\(|time\.perf_counter\(", code)


def honest_add(x, y):
    from geak.evaluator.job.launch_modes import STATE

    STATE.launches["add_kernel"] += 1
    return x + y


def memoizing_add():
    from geak.evaluator.job.launch_modes import STATE

    cache = {}

    def add(x, y):
        key = (x.data_ptr(), y.data_ptr())
        if key not in cache:
            STATE.launches["add_kernel"] += 1
            cache[key] = x + y
        return cache[key]

    return add


def timed(timing, fn, tmp_path, label: str) -> dict:
    """Time `fn` as the worker does (flushed timer), then save its late outputs as the worker does."""
    from geak.evaluator.job.capture import call_outputs

    gen = torch.Generator().manual_seed(0)  # every variant times the same values
    base = ((torch.randn(256, generator=gen), torch.randn(256, generator=gen)), {})
    sets = InputSets(base, 2)
    sets.call(fn, 0)
    timer = timing.make_timer(fn, sets, estimate=1.0, rep_ms=10.0, per_graph=None)
    for _ in range(3):
        timer.sample()
    for run in ("", "again") if label == "reference" else ("",):
        for k, (ret, args, kwargs) in timer.check_outputs(timed_output_sets(2), timing.CHECK_STEP).items():
            torch.save(call_outputs(ret, args, kwargs), tmp_path / timed_output_file(label, 0, k, run))
    assert timer.method == "flushed" and timer.timed_calls == 30 and timer.device_ms > 0
    return entry("flushed", timed_launches=timer.launches_per_call(), timed_calls=timer.timed_calls, input_sets=2)


def test_the_timer_catches_an_output_memoized_by_address(host_timer, tmp_path):
    ref_entry = timed(host_timer, honest_add, tmp_path, "reference")
    assert ref_entry["timed_launches"] == {"add_kernel": 1.0}
    good_entry = timed(host_timer, honest_add, tmp_path, "candidate")
    assert rules.launch_problem("candidate", good_entry, ref_entry) is None
    assert rules.output_problems("add", 0, 2, tmp_path, 30) == ([], [])

    cheat_entry = timed(host_timer, memoizing_add(), tmp_path, "candidate")
    assert "fewer kernels" in rules.launch_problem("candidate", cheat_entry, ref_entry)
    problems, _ = rules.output_problems("add", 0, 2, tmp_path, 30)
    assert len(problems) == 2 and "differ from the reference's on the same inputs" in problems[0]


def test_the_evaluator_uses_only_believable_cached_peaks(tmp_path, monkeypatch):
    """The caller reads the cache, validates it, and (absurd or absent) asks a job that runs no user code."""
    import asyncio

    from geak.evaluator.api import EvalOptions, Evaluator

    monkeypatch.setenv("GEAK_CACHE_DIR", str(tmp_path))

    async def peaks_seen(entry: dict | None) -> Peaks:
        async with Evaluator(EvalOptions(backend="interpreter", spares=0)) as ev:
            info = await ev.runtime()
            if entry is not None:
                key = peaks_cache.cache_key(RuntimeFacts.from_dict(info))
                path = tmp_path / "peaks.json"
                path.write_text(json.dumps({key: {**entry, "device": info["device"]}}))
            first = await ev.device_peaks()
            assert await ev.device_peaks() is first  # asked once per evaluator
            return first

    cached = asdict(replace(H200, device="?"))
    assert asyncio.run(peaks_seen(cached)).bandwidth_gbps == 4240.0
    absurd = {**cached, "bandwidth_gbps": 1e9}
    fallback = asyncio.run(peaks_seen(absurd))  # measured again: no GPU here, so no figures at all
    assert fallback.source == "unknown device" and fallback.noise_margin == DEFAULT_NOISE_MARGIN


@pytest.mark.skipif(not torch.cuda.is_available(), reason="measuring the device needs a GPU")
def test_the_peaks_job_loads_its_kernels_before_it_has_the_device_alone(tmp_path, monkeypatch):
    """The job measuring the device's ceilings and margin compiles and loads what it runs while the device is still
    shared (``device_ceilings.warm_up``): the pool pauses every other job only for the measurements."""
    import asyncio
    import logging

    from geak.evaluator.api import EvalOptions, Evaluator

    monkeypatch.setenv("GEAK_CACHE_DIR", str(tmp_path))
    said: list[str] = []

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger = logging.getLogger("geak.evaluator.device_share")
    heard, level = Heard(), logger.level
    logger.addHandler(heard)
    logger.setLevel(logging.DEBUG)

    async def go() -> Peaks:
        async with Evaluator(EvalOptions(spares=0)) as ev:
            return await ev.device_peaks(progress=said.append)

    try:
        peaks = asyncio.run(go())
    finally:
        logger.removeHandler(heard)
        logger.setLevel(level)
    loading = next(i for i, m in enumerate(said) if "loading what the device's measurement runs" in m)
    alone = next(i for i, m in enumerate(said) if "alone for a job" in m)
    measuring = next(i for i, m in enumerate(said) if m == "timing measuring the device's peaks and noise floor")
    assert loading < alone < measuring, said
    assert peaks.source == "measured" and peaks.bandwidth_gbps > 0 and peaks.tflops_16bit > 0, peaks


def test_a_flushed_call_keeps_the_device_busy_while_its_wrapper_runs_its_host_code(host_timer, host_clock, monkeypatch):
    """After the L2 flush the device spins for twice the wrapper's host time, less the flush's own (at most
    ``MAX_COVER_MS``): a wrapper whose host code outlasts the flush would be timed with the device waiting for its
    launches."""
    spins: list[int] = []
    monkeypatch.setattr(host_timer, "_spin", spins.append)
    monkeypatch.setattr(host_timer, "_flush_ms", lambda: 0.1)

    def host_bound(ms):
        def call(x, y):
            host_clock.sleep(ms / 1e3)
            return honest_add(x, y)

        return call

    sets = InputSets(((torch.randn(64), torch.randn(64)), {}), 2)
    slow = host_timer.make_timer(host_bound(0.5), sets, estimate=1.0, rep_ms=5.0, per_graph=None)
    assert 0.85 <= slow.cover_cycles / 2e6 <= host_timer.MAX_COVER_MS  # 2 x 0.5 ms less the flush's 0.1
    spins.clear()
    slow.sample()
    assert spins == [slow.cover_cycles] * slow.reps
    assert host_timer.make_timer(honest_add, sets, estimate=1.0, rep_ms=5.0, per_graph=None).cover_cycles == 0
    capped = host_timer.make_timer(host_bound(5.0), sets, estimate=10.0, rep_ms=5.0, per_graph=None)
    assert capped.cover_cycles == int(host_timer.MAX_COVER_MS * 2e6)


def test_the_timer_rejects_work_on_a_side_stream(host_timer):
    from geak.evaluator.job.launch_modes import STATE

    def side_stream_add(x, y):
        STATE.launches["add_kernel"] += 1
        STATE.launch_streams[7] += 1  # what the launch counter records for a launch on stream 7
        return x + y

    sets = InputSets(((torch.randn(64), torch.randn(64)), {}), 2)
    timer = host_timer.make_timer(side_stream_add, sets, estimate=1.0, rep_ms=5.0, per_graph=None)
    with pytest.raises(host_timer.TimingFooled, match="side stream that the timed stream does not wait for"):
        timer.sample()
    honest = host_timer.make_timer(honest_add, sets, estimate=1.0, rep_ms=5.0, per_graph=None)
    assert honest.sample() >= 0


def test_a_busy_gpu_is_told_apart_from_work_that_escaped_the_timed_stream(host_timer, host_clock, monkeypatch):
    """On an H100 shared with another process, honest golden files were rejected as "work escaped the timed stream"
    (every call waited ~2.4 ms for a time slice). The guard now times an empty kernel the same way before it blames
    the code."""
    backlog = {"left by the call": 0.0, "other processes": 0.0}

    def synchronize():  # waits for what the device still has to do, as torch.cuda.synchronize does
        host_clock.sleep(backlog["left by the call"] + backlog["other processes"])
        backlog["left by the call"] = 0.0

    monkeypatch.setattr(host_timer, "_synchronize", synchronize)
    x = torch.ones(4)

    def side_stream_work():
        backlog["left by the call"] = 0.01
        return x + 1

    with pytest.raises(host_timer.TimingFooled, match="escaped the timed stream") as caught:
        host_timer.guard(side_stream_work, median_ms=0.5)
    assert not isinstance(caught.value, host_timer.DeviceBusy)

    backlog["other processes"] = 0.01
    with pytest.raises(host_timer.DeviceBusy, match=r"busy with other work .* empty kernel took"):
        host_timer.guard(lambda: x + 1, median_ms=0.5)
    backlog["other processes"] = 0.0
    host_timer.guard(lambda: x + 1, median_ms=0.5)  # a free device: nothing to say


def test_a_stall_of_the_host_is_not_taken_for_work_that_escaped_but_escaping_most_calls_is(
    host_timer, host_clock, monkeypatch
):
    """On an H200 whose host was busy compiling, an honest file's guard saw 5.3 ms against a timed 2.4 ms: this
    process stalled in some round trips. A lag is measured once more before it counts. A call whose work escapes
    the timed stream in most calls (what would fool a timed median) still lags then, and is rejected."""
    trips = {"n": 0, "stalled": set()}

    def synchronize():  # the waits after the calls of the stalled round trips take 10 ms longer
        trips["n"] += 1
        if trips["n"] % 2 == 0 and trips["n"] // 2 in trips["stalled"]:
            host_clock.sleep(0.01)

    monkeypatch.setattr(host_timer, "_synchronize", synchronize)
    x = torch.ones(4)
    for stalled in ({1, 3}, {1, 3, 5}, {2, 3, 4, 5}):  # of the first 5 round trips: a median stalled too
        trips["n"], trips["stalled"] = 0, stalled
        host_timer.guard(lambda: x + 1, median_ms=0.5)

    calls = {"n": 0}
    backlog = {"left": 0.0}

    def synchronize_backlog():
        host_clock.sleep(backlog["left"])
        backlog["left"] = 0.0

    def escapes_four_calls_in_five():
        calls["n"] += 1
        if calls["n"] % 5:
            backlog["left"] = 0.01
        return x + 1

    monkeypatch.setattr(host_timer, "_synchronize", synchronize_backlog)
    with pytest.raises(host_timer.TimingFooled, match="escaped the timed stream"):
        host_timer.guard(escapes_four_calls_in_five, median_ms=0.5)


def test_a_host_bound_call_of_tens_of_ms_is_estimated_guarded_and_sampled_with_fewer_calls(
    host_timer, host_clock, monkeypatch
):
    """TritonBench-revised `matmul_dequant_int4.py` calls take a second each (weights packed in Python): five calls
    to estimate, five round trips to guard and five calls a sample held one H200 alone for 89 s of a batch run."""
    monkeypatch.setattr(host_timer, "_spin", lambda cycles: None)
    calls = {"n": 0}

    def call(ms: float):
        def fn():
            calls["n"] += 1
            host_clock.sleep(ms / 1e3)

        return fn

    assert host_timer.estimate_ms(call(0.1)) > 0 and calls["n"] == host_timer.ESTIMATE_CALLS
    calls["n"] = 0
    assert host_timer.estimate_ms(call(25)) >= 25 and calls["n"] == 2
    calls["n"] = 0
    host_timer.guard(call(25), median_ms=25)
    assert calls["n"] == 3
    calls["n"] = 0
    host_timer.guard(call(0.1), median_ms=0.1)
    assert calls["n"] == 5

    # a batch run's 10 s of rounds to the first look (6 rounds, two variants, one call): 833 ms a call's share
    share_ms = 10_000 / (6 * 2)
    assert host_timer.fewest_reps(1060, share_ms) == 1
    assert host_timer.fewest_reps(220, share_ms) == 3
    assert host_timer.fewest_reps(2, share_ms) == host_timer.fewest_reps(1060, None) == host_timer.MIN_REPS
    sets = InputSets(((torch.randn(4),), {}), 1)
    assert host_timer.make_timer(lambda x: x, sets, 1060, 10.0, None, 1).reps == 1
    assert host_timer.make_timer(lambda x: x, sets, 0.001, 10.0, None, 1).reps == 1000  # short calls: rep_ms


# ----------------------------------------------------------------------------------------- the agent follows


def test_the_agent_follows_the_verdict_not_the_interval():
    from geak.agent.memory import Candidate, Evaluation, ProblemMemory
    from geak.agent.tuning.launch_search import Finalist

    def timed_eval(low: float, high: float) -> Evaluation:
        ratio = (low + high) / 2
        return Evaluation(
            True, "perf", "", timed=True, latency_ms=1 / ratio, speedup=ratio, speedup_low=low, speedup_high=high,
            speedup_verdict=judge(low, high, 0.01),
        )  # fmt: skip

    noise = timed_eval(1.003, 1.007)  # excludes 1, but within the noise floor
    memory = ProblemMemory("f.py", "code", [Candidate("c1.1", 1, 1, "generate", "x", evaluation=noise)])
    assert not noise.faster and memory.best() is None
    memory.candidates.append(Candidate("c1.2", 1, 2, "reflect", "y", evaluation=timed_eval(1.2, 1.3)))
    assert memory.best().id == "c1.2"

    assert not Finalist("note", "src", 0.5, noise).confirmed  # twice as fast in screening, noise by the bench's verdict
    assert Finalist("note", "src", 0.9, timed_eval(1.2, 1.3)).confirmed


def test_a_timing_stopped_by_its_time_limit_says_so_and_stays_undecided(tmp_path):
    result = job_result({}, ratio=1.0)
    noisy = [1.0, 1.3, 0.8, 1.2, 0.9, 1.25, 0.85, 1.1]  # undecided at 6 and 8 rounds
    for who, samples in (("reference", [1.0] * 8), ("candidate", noisy)):
        result["calls"][who][0]["samples"] = samples
    verdict(result, tmp_path)  # the timed outputs an honest job saves
    limited = RoundPlan(6, 24, H200.noise_margin, max_s=10.0)
    result["rounds_timed_out"] = True
    r = bench_result(JobOutcome("ok", result), "cand.py", None, None, FACTS, H200, tmp_path, 2.0, limited)
    assert r.ok and not r.speedup.decided and not r.speedup.significant, r.message
    why = r.speedup.verdict
    assert why.startswith("undecided") and "after 8 rounds: its rounds took the timing's limit of 10 s" in why, why
    result["rounds_timed_out"] = False  # the same early stop, without the limit's word: not believed
    r = bench_result(JobOutcome("ok", result), "cand.py", None, None, FACTS, H200, tmp_path, 2.0, limited)
    assert not r.ok and "did not follow its stopping rule" in r.message


def test_what_placement_shifts_a_microsecond_graph_call_is_no_claim():
    """On an H200, TritonBench-revised files against themselves came out 3.4-5.5% apart on 1-3 µs calls replayed in
    graphs, the sign following which variant was prepared first: such an offset is within the band, a real speedup
    of such calls is still claimed, and calls timed flushed keep their band."""
    from geak.evaluator.shared.sequential import PLACEMENT_MS

    rng = random.Random(0)
    jitter = lambda: 1 + rng.uniform(-0.002, 0.002)
    ms = 0.001  # a 1 µs call
    graph = RoundPlan(6, 24, 0.008).for_calls([("cuda-graph", 0.003, 1)])
    assert graph.graph_nodes == 1 and graph.margin == GRAPH_MARGIN
    ref = [[ms * jitter()] for _ in range(6)]
    placed = [[ms / 1.05 * jitter()] for _ in range(6)]  # 5% apart, as placement made two identical files
    s = speedup_interval(ref, placed, graph)
    assert not s.significant and s.margin == pytest.approx(PLACEMENT_MS / ms, rel=0.01), s
    assert stopped_where_the_rule_says(ref, placed, graph) is None  # the job's rule judges in the same band
    faster = [[ms / 1.5 * jitter()] for _ in range(6)]
    assert speedup_interval(ref, faster, graph).verdict == "faster"
    flushed = RoundPlan(6, 24, 0.008).for_calls([("flushed", 0.1, 0)])
    big = [[0.1 * jitter()] for _ in range(6)]
    quicker = [[0.1 / 1.05 * jitter()] for _ in range(6)]
    assert flushed.graph_nodes == 0 and speedup_interval(big, quicker, flushed).verdict == "faster"
    two_ms = RoundPlan(6, 24, 0.008).for_calls([("cuda-graph", 2.0, 1)])  # a graph of long calls: the band it had
    long_calls = [[2.0 * jitter()] for _ in range(6)]
    assert speedup_interval(long_calls, long_calls, two_ms).margin == GRAPH_MARGIN


def test_placement_widens_the_band_by_every_node_a_call_replays(tmp_path):
    """On an H200, `logsumexp_fwd.py` against itself (four 15 µs calls, each a Triton kernel and nine of torch's in
    its graph) came out 0.963x and 0.976x in the two orders of one `geak eval`, 4-7% a call: each node replayed
    shifts by placement, so the band counts nodes, not calls. A real speedup of such calls is still claimed, and the
    caller judges in the band of the nodes the job reported."""
    from geak.evaluator.shared.sequential import PLACEMENT_MS

    rng = random.Random(1)
    jitter = lambda: 1 + rng.uniform(-0.002, 0.002)
    calls = [("cuda-graph", 0.015, 10)] * 4
    plan = RoundPlan(6, 24, 0.008).for_calls(calls)
    assert plan.graph_nodes == 40 and plan.margin == GRAPH_MARGIN
    ref = [[0.015 * jitter() for _ in calls] for _ in range(6)]
    placed = [[0.015 / 0.969 * jitter() for _ in calls] for _ in range(6)]  # what that eval claimed "slower"
    s = speedup_interval(ref, placed, plan)
    assert not s.significant and s.margin == pytest.approx(PLACEMENT_MS * 40 / 0.06, rel=0.01), s
    assert speedup_interval(ref, placed, RoundPlan(6, 24, 0.008).for_calls([("cuda-graph", 0.015, 1)] * 4)).significant
    faster = [[0.015 / 1.3 * jitter() for _ in calls] for _ in range(6)]
    assert speedup_interval(ref, faster, plan).verdict == "faster"
    assert stopped_where_the_rule_says(ref, placed, plan) is None
    tiny = entry("cuda-graph", bytes=4096, certain_bytes=1024, estimate_ms=0.015, graph_nodes=10)
    samples = {"reference": [0.015 * jitter() for _ in range(16)], "candidate": [0.015 / 0.97] * 16}
    result = {**job_result({}), "calls": {who: [{**tiny, "samples": row}] for who, row in samples.items()}}
    judged = verdict(result, tmp_path).speedup
    assert judged is not None and judged.margin == pytest.approx(PLACEMENT_MS * 10 / 0.015, rel=0.01), judged
    assert not judged.significant


def test_timings_started_together_wait_for_one_measurement_of_the_device(monkeypatch):
    """Six `geak eval` timings that start at once each asked for the device's peaks: one peaks job measures them, the
    others wait for it (each such job has the device alone)."""
    import asyncio

    from geak.evaluator.api import Evaluator
    from geak.evaluator.options import EvalOptions

    jobs: list[str] = []

    async def go() -> list[Peaks]:
        ev = Evaluator(EvalOptions(backend="interpreter", spares=0))

        async def runtime_info():
            return RUNTIME

        async def run(job, **kwargs):
            jobs.append(job["kind"])
            await asyncio.sleep(0.05)  # a measurement takes a while: the others arrive meanwhile
            return JobOutcome("ok", {"peaks": None})

        monkeypatch.setattr(ev.pool, "runtime_info", runtime_info)
        monkeypatch.setattr(ev.pool, "run", run)
        monkeypatch.setattr(peaks_cache, "read_cached", lambda info, *a: None)
        monkeypatch.setattr(peaks_cache, "store", lambda *a: None)
        try:
            return await asyncio.gather(*(ev.device_peaks() for _ in range(6)))
        finally:
            await ev.aclose()

    found = asyncio.run(go())
    assert jobs == ["peaks"], jobs
    assert all(p is found[0] for p in found)


AUTOTUNED_TWINS = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from geak.evaluator.job import launch_counter, launch_modes
from geak.evaluator.job.launch_modes import STATE

launch_counter.install()


def make():
    @triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (256, 128, 64)], key=["n"])
    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK < 256)  # the first config cannot run, as too much shared memory for a device
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
    return add_one


@triton.jit
def plain(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


reference, candidate = make(), make()
x = torch.zeros(300)
grid = lambda meta: (triton.cdiv(300, meta["BLOCK"]),)
with launch_modes.tuning_deferred(), launch_modes.configs_compiled_ahead():  # the interpreter compiles nothing ahead
    plain[(1,)](x, 300, BLOCK=512)
    reference[grid](x, 300)
    candidate[grid](x, 300)
print("deferred", len(reference.cache), len(candidate.cache), x.tolist() == [2.0] * 300)
print("untuned", dict(STATE.deferred_tunings))
key = (300, "torch.float32")
reference.cache[key], candidate.cache[key] = reference.configs[1], candidate.configs[2]  # chosen apart, untwinned
with launch_modes.twins_tuned_alike():
    reference[grid](x, 300)
    candidate[grid](x, 300)
print("twins", candidate.cache[key] is candidate.configs[1])
"""


def test_a_deferred_autotuner_runs_the_first_config_that_runs_and_twins_take_one_choice(tmp_path):
    """A timing job captures with tuning deferred: a kernel whose first config cannot run runs the next one, with no
    choice kept (tuning there, on a shared device, chose by noise: an A/A of TritonBench-revised `matmul_triton2.py`
    came out 1.06x "faster" on an H200), and is counted (a timing then makes its calls ready with the device alone,
    where it tunes). Identical kernels then run the choice the first made, over any of their own. Real Triton on its
    interpreter, in a process of its own (the patches are the job process's)."""
    import subprocess
    import sys

    script = tmp_path / "twins.py"
    script.write_text(AUTOTUNED_TWINS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.split("\n")
    assert lines[:3] == ["deferred 0 0 True", "untuned {'add_one': 2}", "twins True"], done.stdout


def test_two_timings_in_opposite_orders_cancel_where_the_variants_sit():
    """An A/A of µs-scale calls came out 1.05x "faster" with the reference prepared first and 0.95x "slower" the
    other way round, mirrored within 0.3%, inside the band their graphs' nodes give (on an H200): together, within
    noise. A real speedup stays one. Two orders further apart than the band disagree: only what both intervals allow
    is claimed (an A/A of `context_attn_nopad.py`, flushed calls, came out 1.143x [1.046, 1.249] then 1.000x)."""
    from geak.evaluator.results import Speedup
    from geak.evaluator.speedup import crossed

    def timed(ratio: float, half_width: float, margin: float = 0.06) -> Speedup:
        return Speedup(ratio, ratio - half_width, ratio + half_width, 6, True, "faster", margin=margin)

    both = crossed(timed(1.0505, 0.004), timed(0.9480, 0.01))
    assert both.verdict == "within noise (±6%)" and not both.significant and both.rounds == 12, both
    assert math.isclose(both.ratio, math.sqrt(1.0505 * 0.9480))
    assert crossed(timed(1.16, 0.01, 0.02), timed(1.14, 0.01, 0.02)).verdict == "faster"
    wide = crossed(timed(1.05, 0.04, 0.02), timed(1.0, 0.03, 0.02))
    assert wide.verdict.startswith("undecided") and "in two timings, each variant prepared first in one" in wide.verdict
    apart = crossed(timed(1.143, 0.1, 0.015), timed(1.000, 0.03, 0.015))
    assert apart.verdict.startswith("undecided") and not apart.significant, apart
    assert (apart.low, apart.high) == (0.97, 1.243) and "further apart than the ±1.5% band" in apart.verdict
    faster = crossed(timed(1.30, 0.02, 0.015), timed(1.20, 0.02, 0.015))  # apart, but both intervals beyond the band
    assert faster.verdict == "faster" and math.isclose(faster.low, 1.18)


def test_a_small_claimed_speedup_is_timed_again_with_the_candidate_prepared_first(tmp_path, monkeypatch):
    """The bench's second timing, the variants' order reversed, and the verdict of both (the evaluator's flow, its
    timings scripted: the device side is the GPU's)."""
    import asyncio

    from geak.evaluator.api import EvalOptions, Evaluator
    from geak.evaluator.bench_runs import BenchRuns
    from geak.evaluator.results import CallTiming, Speedup

    file = Path(__file__).parent / "fixtures" / "add_native.py"
    orders: list[bool] = []
    ratios = {False: 1.06, True: 0.95}
    signatures = {False: ["f(f32[8])", "f(f32[64])"], True: ["f(f32[8])", "f(f32[64])"]}

    async def timed(self, texts, *args, candidate_first: bool = False):
        orders.append(candidate_first)
        r = ratios[candidate_first]
        speedup = Speedup(r, r - 0.005, r + 0.005, 6, True, "faster" if r > 1 else "slower", margin=0.06)
        phases = {"prepare": 0.1, "rounds": 0.3}
        calls = tuple(CallTiming("f", sig, 1.0, 1.0, "flushed", 5, None, None, None, None, "cold")
                      for sig in signatures[candidate_first])  # fmt: skip
        return BenchResult(True, "perf", "cuda", "f", f"timed {r}", speedup=speedup, alone_s=0.5, phases_s=phases,
                           calls=calls, reference_calls=calls)  # fmt: skip

    async def runtime_info():
        return {"backend": "cuda", "device": "a GPU"}

    async def device_peaks(self, progress=None):
        return H200

    monkeypatch.setattr(BenchRuns, "timed", timed)
    monkeypatch.setattr(Evaluator, "device_peaks", device_peaks)

    async def go() -> BenchResult:
        async with Evaluator(EvalOptions(backend="interpreter", spares=0)) as ev:
            monkeypatch.setattr(ev.pool, "runtime_info", runtime_info)
            return await ev.bench(source=file.read_text(), against=file, check_first=False)

    result = asyncio.run(go())
    assert orders == [False, True]
    assert result.speedup.verdict.startswith("within noise") and result.alone_s == 1.0, result
    assert result.phases_s == {"prepare": 0.2, "rounds": 0.6}
    assert "timed again with the candidate prepared first: 0.950x" in result.message
    signatures[True] = ["f(f32[8])"]  # a candidate imported first made a call of the reference look like a helper
    rejected = asyncio.run(go())
    assert not rejected.ok and rejected.speedup is None, rejected
    assert rejected.message == ("timing rejected: timed again with the candidate prepared first, it timed other calls "
                                "(f(f32[8])) than the first timing (f(f32[8]), f(f32[64]))")  # fmt: skip
    ratios.update({False: 3.0})  # far beyond any placement: timed once
    orders.clear()
    assert asyncio.run(go()).speedup.ratio == 3.0 and orders == [False]


def test_a_graph_captured_before_the_grant_is_timed_only_where_every_variant_has_one_of_a_suiting_size():
    """A timing captures the graphs of short calls while the device is still shared, sized by the calls' least time
    there; with the device alone, each call's estimate says how many calls a graph should hold. The graphs made
    ahead are timed only where every variant has one within a factor of two of that (replays of 1-4 ms where 2 ms is
    asked), else made again; either way none is kept in the ready calls."""
    from geak.evaluator.job.bench_preparation import _made_ahead, _Ready

    def ready(*sizes: int | None) -> dict[str, _Ready]:
        return {
            f"v{i}": _Ready(None, None, {}, None if n is None else SimpleNamespace(per_graph=n))
            for i, n in enumerate(sizes)
        }

    calls = ready(100, 100)
    graphs = {label: r.graph for label, r in calls.items()}
    assert _made_ahead(calls, 120) == graphs and all(r.graph is None for r in calls.values())
    assert _made_ahead(ready(100, 100), 200) is not None and _made_ahead(ready(100, 100), 50) is not None
    assert _made_ahead(ready(100, 100), 201) is None  # the device alone says twice as many calls and more
    assert _made_ahead(ready(100, 100), 49) is None
    assert _made_ahead(ready(100, None), 100) is None  # one variant could not be captured ahead
    calls = ready(100, 100)
    assert _made_ahead(calls, None) is None and all(r.graph is None for r in calls.values())  # timed one by one


@pytest.mark.skipif(not torch.cuda.is_available(), reason="graph capture needs a GPU")
def test_a_graph_timer_counts_every_node_a_call_replays():
    """The band's placement counts the nodes of a call's graph as the runtime does: torch's kernels too, which the
    launch counter (Triton's launches only) does not see. On an H200, torch's logsumexp of a 4x64 tensor replayed
    nine kernels."""
    from geak.evaluator.job.timing import graph_timer

    x = torch.randn(4, 64, device="cuda")
    sets = InputSets(((x,), {}), 2)
    several = graph_timer(lambda t: torch.logsumexp(t, -1), sets, 4)
    one = graph_timer(lambda t: t.mul(2), sets, 4)
    assert several is not None and one is not None
    assert one.graph_nodes == 1 and several.graph_nodes > 2, (one.graph_nodes, several.graph_nodes)


def test_a_graph_replay_is_sized_by_the_sample_a_run_asks_for():
    """A batch run's samples are shorter (``eval_slots.BATCH_REP_MS``): its graph replays hold fewer calls, so that
    its five replays take about a flushed sample's time; one file's keep 2 ms replays. Always a whole number of
    input-set cycles."""
    from geak.agent.batch.eval_slots import BATCH_REP_MS
    from geak.evaluator.job.timing import GRAPH_REPLAYS, GRAPH_TARGET_MS, graph_calls

    assert graph_calls(0.01, 4) == graph_calls(0.01, 4, 25.0) == int(GRAPH_TARGET_MS / 0.01)
    batch = graph_calls(0.01, 4, BATCH_REP_MS)
    per_replay = int(BATCH_REP_MS / GRAPH_REPLAYS / 0.01)
    assert batch == per_replay - per_replay % 4 < graph_calls(0.01, 4) and batch % 4 == 0
    assert graph_calls(1.0, 3, BATCH_REP_MS) == 3  # a call longer than the replay: one cycle of the sets
