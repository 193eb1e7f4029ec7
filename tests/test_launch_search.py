"""The LLM-free launch-configuration search, driven by a scripted stand-in for the evaluator (screening and the
full check + bench of finalists), so that its decisions can be checked without a GPU."""

import asyncio
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from geak.agent.tuning.launch_params import find_tunable_params
from geak.agent.tuning.launch_search import (
    CPU_ROUND,
    FINALISTS,
    FIRST_ROUND_FLOOR,
    NEAR_GAIN,
    SCREEN_GAIN,
    search_launch_configs,
)
from geak.agent.tuning.launch_space import Space
from geak.evaluator.results import CompiledKernelFacts, ScreenedVariant, ScreenResult

SOURCE = """\
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    for start in range(0, n, BLOCK_SIZE * tl.num_programs(0)):  # a loop: num_stages is a knob
        offs = start + tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y, out):
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
"""


def launch_values(source):
    """What a variant's launch uses, by parameter name (what a real evaluator would run)."""
    return {p.name: p.current for p in find_tunable_params(source)}


def bowl(values, best_block=4096, best_warps=8):
    """A synthetic time with its minimum at (best_block, best_warps)."""
    return (
        1.0
        + 0.3 * (math.log2(values["BLOCK_SIZE"]) - math.log2(best_block)) ** 2
        + 0.2 * (math.log2(values["num_warps"]) - math.log2(best_warps)) ** 2
    )


@dataclass
class Verdict:
    ok: bool
    message: str = ""
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_verdict: str | None = None

    @property
    def faster(self) -> bool:
        return self.speedup_verdict == "faster"


@dataclass
class Scripted:
    """Screens by `time_of(values)` (None: the variant's outputs are wrong) and confirms by `confirm_as`."""

    time_of: object = bowl
    timing: bool = True
    confirm_estimate_s: float | None = 1.0
    confirm_as: object = None  # (reference ms, candidate ms) -> Verdict; default: the screen's ratio, decided
    screens: list = field(default_factory=list)
    confirmed: list = field(default_factory=list)

    async def screen(self, baseline, variants, deadline_s, finalists):
        await asyncio.sleep(0)
        self.screens.append(variants)
        reference = self.time_of(launch_values(baseline))
        screened = []
        for i, source in enumerate(variants, 1):
            ms = self.time_of(launch_values(source))
            status = "ok" if ms is not None else "wrong"
            timed = ms if self.timing and ms is not None else None
            screened.append(ScreenedVariant(f"v{i}", status, "", timed, 1))
        return ScreenResult(True, f"{len(variants)} screened", "cuda", "fake", self.timing,
                            reference if self.timing else None, tuple(screened))  # fmt: skip

    async def confirm_estimate(self):
        return self.confirm_estimate_s

    async def confirm(self, source, note, review):
        self.confirmed.append(source)
        ratio = self.time_of(launch_values(SOURCE)) / self.time_of(launch_values(source))
        if self.confirm_as is not None:
            return self.confirm_as(ratio)
        return Verdict(True, "", ratio, ratio * 0.98, ratio * 1.02, "faster" if ratio > 1.03 else "within noise")


def run(backend, source=SOURCE, **kwargs):
    kwargs.setdefault("budget_s", 60)
    return asyncio.run(search_launch_configs(source, backend, device_backend="cuda", **kwargs))


def test_screens_wide_confirms_the_leaders_and_keeps_the_fastest_confirmed():
    backend = Scripted()
    result = run(backend)
    assert result.improved and result.best is not None
    assert {k: v for k, v in launch_values(result.best.source).items() if k != "num_stages"} == {
        "BLOCK_SIZE": 4096,
        "num_warps": 8,
    }
    assert len(backend.screens) >= 2  # a first round, then later ones (its leaders' neighbours first)
    screened = [source for screen in backend.screens for source in screen]
    assert len(screened) == len(set(screened))  # none screened twice: every round reached all it was given
    assert 1 <= len(backend.confirmed) <= FINALISTS
    assert result.best.confirmation.speedup > 1.5
    assert "BLOCK_SIZE 1024→4096" in result.summary and "faster" in result.summary
    assert result.knobs == 3  # BLOCK_SIZE, num_warps, num_stages
    assert result.screened == sum(len(s) for s in backend.screens)
    assert all(row["rung"] == 1 for row in result.configurations if row["ratio"])  # where each ratio was taken


def test_a_screening_winner_the_bench_does_not_confirm_is_never_kept():
    noise = lambda ratio: Verdict(True, "", 1.004, 0.99, 1.02, "within noise (±1%)")
    backend = Scripted(confirm_as=noise)
    result = run(backend)
    assert not result.improved and result.best is None
    assert len(backend.confirmed) == FINALISTS
    assert result.summary.startswith("no finalist was confirmed faster by the full bench")
    failing = Scripted(confirm_as=lambda ratio: Verdict(False, "output mismatch at [3]"))
    assert not run(failing).improved


def test_an_already_tuned_kernel_reports_no_gain_and_confirms_nothing():
    flat = Scripted(time_of=lambda values: 1.0 + (0.01 if values["BLOCK_SIZE"] != 1024 else 0.0))
    result = run(flat)
    assert not result.improved and flat.confirmed == []
    assert f"no configuration beat the original by more than {NEAR_GAIN:.0%} in screening" in result.summary
    assert "already suits this device" in result.summary


def test_where_none_beats_the_original_by_the_screen_gain_the_best_near_it_gets_the_one_confirmation():
    """2.5% faster in screening: under ``SCREEN_GAIN``, within the bench's reach; confirmed once, kept only if the
    bench finds it faster."""
    assert NEAR_GAIN < 0.025 < SCREEN_GAIN
    near = lambda values: 1.0 - (0.025 if values["BLOCK_SIZE"] == 2048 and values["num_warps"] == 4 else 0.0)
    faster = lambda ratio: Verdict(True, "", ratio, 1.02, 1.03, "faster")
    kept = Scripted(time_of=near, confirm_as=faster)
    result = run(kept)
    assert len(kept.confirmed) == 1 and launch_values(kept.confirmed[0])["BLOCK_SIZE"] == 2048
    assert result.improved and "BLOCK_SIZE 1024→2048" in result.summary
    noise = Scripted(time_of=near, confirm_as=lambda ratio: Verdict(True, "", ratio, 0.99, 1.04, "undecided"))
    result = run(noise)
    assert not result.improved and len(noise.confirmed) >= 1
    assert result.summary.startswith("no finalist was confirmed faster by the full bench")


@dataclass
class Late(Scripted):
    """Screens only the first `compiled` variants of a round in the time; the rest are "not run"."""

    compiled: int = 0

    async def screen(self, baseline, variants, deadline_s, finalists):
        result = await super().screen(baseline, variants, deadline_s, finalists)
        late = [ScreenedVariant(v.label, "not run", "not compiled in the time", None, 0)
                for v in result.variants[self.compiled :]]  # fmt: skip
        return replace(result, variants=(*result.variants[: self.compiled], *late))


def test_a_search_that_screened_nothing_in_the_time_says_so_and_claims_nothing_of_the_kernel():
    result = run(Late(time_of=lambda values: 1.0))
    assert not result.improved and result.screened == 0
    assert result.summary.startswith("no configuration could be screened in the time")
    assert "already suits" not in result.summary and "budget of 60 s" in result.summary


def test_a_partly_screened_search_without_a_winner_says_what_was_not_run():
    result = run(Late(time_of=lambda values: 1.0, compiled=3))
    assert not result.improved and result.screened >= 3
    assert "more were not run in the time" in result.summary and "already suits" not in result.summary


def test_what_a_round_did_not_reach_is_screened_in_a_later_round_and_can_win():
    @dataclass
    class FirstRoundLate(Late):
        """The first round reaches only its first 3 configurations; later rounds reach all."""

        async def screen(self, baseline, variants, deadline_s, finalists):
            self.compiled = 3 if not self.screens else len(variants)
            return await super().screen(baseline, variants, deadline_s, finalists)

    backend = FirstRoundLate()
    said: list[str] = []
    result = run(backend, on_event=said.append)
    missed = backend.screens[0][3:]
    assert missed and backend.screens[1:]
    later = {source for screen in backend.screens[1:] for source in screen}
    assert set(missed) <= later  # each reached once more
    assert result.improved and result.best is not None
    assert any("second round" in m for m in said) and any("third round" in m for m in said)
    assert any("first round: " in m and "the original's calls 2.4000 ms in screening" in m for m in said), said
    assert "not run" not in result.summary and result.screened == len(set(backend.screens[0]) | later)


def test_a_configuration_no_round_reaches_is_tried_twice_at_most():
    backend = Late(time_of=lambda values: 1.0, compiled=0)
    result = run(backend)
    counts: dict[str, int] = {}
    for screen in backend.screens:
        for source in screen:
            counts[source] = counts.get(source, 0) + 1
    assert counts and max(counts.values()) == 2 and len(backend.screens) > 2
    assert f"the {len(counts)} tried were not compiled or run" in result.summary


def test_wrong_outputs_are_never_finalists():
    def wrong_when_big(values):
        return None if values["BLOCK_SIZE"] >= 2048 else bowl(values)

    backend = Scripted(time_of=wrong_when_big)
    result = run(backend)
    assert all(launch_values(source)["BLOCK_SIZE"] < 2048 for source in backend.confirmed)
    if result.best is not None:
        assert launch_values(result.best.source)["BLOCK_SIZE"] < 2048


def test_without_timing_configurations_are_checked_for_correctness_only():
    backend = Scripted(timing=False)
    result = run(backend)
    assert not result.improved and backend.confirmed == []
    assert len(backend.screens) == 1 and len(backend.screens[0]) == CPU_ROUND
    assert result.summary.startswith("timing needs a GPU:")
    assert f"{CPU_ROUND} launch configuration(s)" in result.summary and "the original is kept" in result.summary


def computed_launch(source):
    """`source` with its wrapper's launch configuration computed at run time: no knob there."""
    return source.replace(
        "BLOCK_SIZE=1024)", "BLOCK_SIZE=triton.next_power_of_2(n), num_warps=n // 256, num_stages=n % 3)"
    )


def untuned(source):
    """The search's summary of `source`, which it must leave as it is without screening anything."""
    backend = Scripted()
    result = run(backend, source)
    assert not result.improved and backend.screens == []
    return result.summary


def test_nothing_to_tune():
    assert untuned(computed_launch(SOURCE)).startswith("no launch configuration to tune")


WITH_TEST = (
    SOURCE
    + "\n"
    + "#" * 146
    + """

def add_in_test(x, y, out):
    add_kernel[(1,)](x, y, out, out.numel(), BLOCK_SIZE=256, num_warps=2)


def test_add():
    add_in_test(1, 2, 3)
"""
)


def test_launches_in_the_test_section_are_left_alone_and_said():
    space = Space(WITH_TEST, "cuda")
    lines = WITH_TEST.splitlines()
    test_line = next(i for i, text in enumerate(lines, 1) if "BLOCK_SIZE=256" in text)
    assert space.set_by_test == [
        f"add_kernel: {name} (line {test_line})" for name in ("BLOCK_SIZE", "num_warps", "num_stages")
    ]
    assert {g.name for g in space.groups} == {g.name for g in Space(SOURCE, "cuda").groups}
    backend = Scripted()
    run(backend, WITH_TEST, budget_s=20)
    assert backend.screens and all("BLOCK_SIZE=256, num_warps=2" in v for screen in backend.screens for v in screen)


def test_a_file_whose_test_sets_every_launch_configuration_screens_nothing_and_says_why():
    assert untuned(computed_launch(WITH_TEST)).startswith(
        "no launch configuration to tune: the file sets its 3 launch parameter(s) in its "
        "test code, which every check keeps as the original's (add_kernel: BLOCK_SIZE"
    )


def test_a_short_budget_screens_once():
    backend = Scripted(confirm_estimate_s=100.0)  # confirming the finalists would take the whole budget
    run(backend, budget_s=30)
    assert len(backend.screens) == 1


def test_a_slow_original_still_leaves_the_first_round_its_share_of_the_budget():
    deadlines = []

    class Recording(Scripted):
        async def screen(self, baseline, variants, deadline_s, finalists):
            deadlines.append(deadline_s)
            return await super().screen(baseline, variants, deadline_s, finalists)

    result = run(Recording(confirm_estimate_s=65.0), budget_s=60)  # a confirmation alone would take the budget
    assert deadlines[0] >= FIRST_ROUND_FLOOR * 60 > 10
    assert result.improved  # and its leader is still confirmed, past the budget


def test_stop_and_resume_continue_where_the_search_was():
    states = []
    backend = Scripted()
    stop = {"now": False}

    def after_screening(state):
        states.append(state)
        stop["now"] = True  # stop as soon as the first screening is recorded

    first = run(backend, on_state=after_screening, should_stop=lambda: stop["now"])
    assert not first.improved and first.summary.startswith("stopped after screening")
    assert first.summary.endswith("(stopped early)")
    assert len(backend.screens) == 1 and backend.confirmed == []
    state = states[-1]
    assert len(state["rounds"]) == 1
    again = Scripted()
    resumed = run(again, state=state)
    assert resumed.improved
    assert again.screens and SOURCE not in again.screens[0]  # the first round is not screened again
    assert not set(backend.screens[0]) & {source for screen in again.screens for source in screen}
    assert len(state["rounds"]) == 1 + len(again.screens) and len(state["finalists"]) >= 1


def test_a_loop_free_kernel_has_no_stages_to_tune():
    loop_free = SOURCE.replace("    for start in range(0, n, BLOCK_SIZE * tl.num_programs(0)):", "    if True:")
    assert run(Scripted(timing=False), loop_free).knobs == 2


def test_kernel_focus_tunes_only_that_kernels_launches():
    two_kernels = SOURCE + (
        "\n\n@triton.jit\ndef sub_kernel(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n\n\n"
        "def sub(x, n):\n    sub_kernel[(1,)](x, n, BLOCK=256, num_warps=2)\n"
    )
    backend = Scripted(time_of=lambda values: 1.0, timing=False)
    result = run(backend, two_kernels, kernel="sub_kernel")
    assert result.knobs == 2
    before = {p.key: p.current for p in find_tunable_params(two_kernels)}
    changed = {
        p.key for source in backend.screens[0] for p in find_tunable_params(source) if before[p.key] != p.current
    }
    assert changed and all(key.startswith("sub_kernel:") for key in changed)


def test_a_finalist_left_undecided_while_ahead_is_benched_once_more_and_kept_only_if_then_faster():
    benches: list[str] = []

    def busy_then(second: str):
        def verdict(ratio):
            benches.append("bench")
            if len(benches) <= FINALISTS:
                return Verdict(True, "", 2.5, 0.8, 6.0, "undecided (the interval straddles the ±1% noise band)")
            return Verdict(True, "", 2.5, 2.4, 2.6, second)

        return verdict

    said: list[str] = []
    result = run(Scripted(confirm_as=busy_then("faster")), on_event=said.append)
    assert result.improved and len(benches) == FINALISTS + 1
    assert any("undecided" in m and "measuring it once more" in m for m in said), said
    benches.clear()
    result = run(Scripted(confirm_as=busy_then("undecided (the interval straddles the ±1% noise band)")))
    assert not result.improved and len(benches) == FINALISTS + 1  # once more only, and never kept undecided
    behind = Scripted(confirm_as=lambda r: Verdict(True, "", 0.9, 0.5, 1.6, "undecided (straddles the band)"))
    assert not run(behind).improved and len(behind.confirmed) == FINALISTS  # behind: not benched again


AUTOTUNED = """\
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 64}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK": 128}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK": 256}, num_warps=8, num_stages=2),
    ],
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK * tl.num_programs(0)):
        offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x, out):
    scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
"""


@dataclass
class AutotunedScripted(Scripted):
    """An autotuned kernel whose autotuner kept a slow config (`kept_ms`): a pinned config runs in `config_ms`."""

    config_ms: object = None
    kept_ms: float = 2.0
    compared: list = field(default_factory=list)

    def time_of_source(self, source):
        from geak.agent.tuning.autotune_configs import find_autotune_sites

        known = find_autotune_sites(source)[0].known
        return self.kept_ms if len(known) > 1 else self.config_ms(known[0])

    async def screen(self, baseline, variants, deadline_s, finalists):
        self.screens.append(variants)
        screened = [ScreenedVariant(f"v{i}", "ok", "", self.time_of_source(s), 1) for i, s in enumerate(variants, 1)]
        return ScreenResult(True, f"{len(variants)} screened", "cuda", "fake", True, self.kept_ms, tuple(screened))

    async def confirm(self, source, note, review):
        self.confirmed.append(source)
        ratio = 1.0 / self.time_of_source(source)  # the bench's original tunes afresh and finds its best, 1.0 ms
        return Verdict(True, "", ratio, ratio * 0.98, ratio * 1.02, "faster" if ratio > 1.03 else "within noise")

    async def compare(self, source, reference):
        self.compared.append(reference)
        ratio = self.time_of_source(reference) / self.time_of_source(source)
        return Verdict(True, "", ratio, ratio * 0.98, ratio * 1.02, "faster" if ratio > 1.03 else "within noise")


def test_an_autotuned_kernels_own_configs_are_the_bar_and_never_finalists():
    """Its autotuner kept a config twice as slow as its best own one: new configurations that beat only the kept
    choice are not finalists (on an H200 such screening winners were 0.906x in the bench), one that beats the best
    own config is, and is confirmed."""
    own = {64: 2.0, 128: 1.2, 256: 1.0}  # ms, by BLOCK (the kept choice is the 64 one)

    def config_ms(config):
        block = dict(config.meta)["BLOCK"]
        return own.get(block, {512: 0.99, 1024: 0.8}.get(block, 1.5))

    said = []
    backend = AutotunedScripted(config_ms=config_ms)
    result = run(backend, AUTOTUNED, on_event=said.append)
    assert sorted(dict(find_site(s).known[0].meta)["BLOCK"] for s in backend.screens[0][:3]) == [64, 128, 256]
    assert any("a finalist must beat the best of the original's own configs pinned (2.00x" in m for m in said)
    assert all(dict(find_site(s).known[0].meta)["BLOCK"] not in own for s in backend.confirmed)
    assert all(dict(find_site(s).known[0].meta)["BLOCK"] != 512 for s in backend.confirmed)  # 1% over the bar
    assert result.improved and dict(find_site(result.best.source).known[0].meta)["BLOCK"] == 1024
    (note,) = result.review  # sizes the test does not time run the pinned config too: said for the reviewer
    assert note.startswith("scale_kernel: its autotuner's 3 configs are replaced by the one timed here")
    space = Space(AUTOTUNED, "cuda")
    assert [space.describe(v) for v in space.own_configs()][2] == (
        "scale_kernel: its own config 3 of 3 pinned (BLOCK=256, num_warps=8, num_stages=2)"
    )


OWN = [(block, warps, stages) for block in (16, 32, 64, 128, 256, 512) for warps in (1, 2, 4) for stages in (2, 3)]
CONFIGS = AUTOTUNED[AUTOTUNED.index("    configs=[") : AUTOTUNED.index("    key=")]
LONG_LIST = AUTOTUNED.replace(CONFIGS, "    configs=[\n"
    + "".join(f"        triton.Config({{'BLOCK': {b}}}, num_warps={w}, num_stages={s}),\n" for b, w, s in OWN)
    + "    ],\n")  # fmt: skip


def test_every_own_config_of_a_long_autotune_list_is_the_bar_and_the_winner_is_timed_against_the_best():
    """36 own configs, the best the 35th (1.0 ms; the others 1.5 ms, the autotuner's kept choice 2.0 ms): all are
    screened, so a new configuration (num_warps 8: 0.8 ms) must beat the 35th, and the report gives its speedup over
    the file as it runs and over that best, timed against it pinned ("vs your autotune list's best")."""

    def config_ms(config):
        if config.num_warps == 8:
            return 0.8
        own = (dict(config.meta)["BLOCK"], config.num_warps, config.num_stages)
        return 1.0 if own == OWN[34] else 1.5 if own in OWN else 3.0

    backend = AutotunedScripted(config_ms=config_ms)
    result = run(backend, LONG_LIST)
    first = [find_site(s).known[0] for s in backend.screens[0]]
    assert {(dict(c.meta)["BLOCK"], c.num_warps, c.num_stages) for c in first[: len(OWN)]} == set(OWN)
    assert result.improved and find_site(result.best.source).known[0].num_warps == 8
    (reference,) = backend.compared
    (pinned,) = find_site(reference).known
    assert (dict(pinned.meta)["BLOCK"], pinned.num_warps, pinned.num_stages) == OWN[34]
    over = result.over_autotune_best
    assert over["speedup"] == pytest.approx(1.25) and over["verdict"] == "faster"
    assert over["config"] == "scale_kernel: its own config 35 of 36 pinned (BLOCK=512, num_warps=4, num_stages=2)"
    assert "1.250x [1.225, 1.275] faster than the file as it runs, 1.250x [1.225, 1.275] vs your autotune list's " \
           "best (scale_kernel: its own config 35 of 36 pinned" in result.summary  # fmt: skip


def test_a_winner_that_changes_no_autotuned_kernel_is_not_timed_again():
    backend = Scripted()
    backend.compare = None  # a plain launch has no list to be timed against
    result = run(backend)
    assert result.improved and result.over_autotune_best == {}
    assert "autotune" not in result.summary


def test_an_autotuned_kernel_whose_best_own_config_is_not_beaten_confirms_nothing():
    own = {64: 2.0, 128: 1.2, 256: 1.0}
    backend = AutotunedScripted(config_ms=lambda config: own.get(dict(config.meta)["BLOCK"], 1.5))
    result = run(backend, AUTOTUNED)
    assert not result.improved and backend.confirmed == []
    bar = "no configuration beat the best of the original's own configs pinned (2.00x its autotuner's kept choice)"
    assert bar in result.summary


def test_later_rounds_are_ranked_on_the_first_rounds_scale_where_the_originals_own_time_changed():
    """The original's time comes from its autotuner's choice, which changed between two screening jobs on an H200
    (0.180 ms, then 0.102 ms: `matmul_dequantize.py`): each later round screens the bar's own config again, and its
    ratios are put on the first round's scale, so that the fastest configuration is the first finalist whichever
    round found it (here a later one: 0.5 ms against the first round's 0.6 ms, over an original of 2.0 ms there and
    1.0 ms later)."""
    own = {64: 2.0, 128: 1.2, 256: 1.0}
    probe = AutotunedScripted(config_ms=lambda config: own.get(dict(config.meta)["BLOCK"], 0.6))
    run(probe, AUTOTUNED)
    first_round = set(probe.screens[0])

    @dataclass
    class Retuned(AutotunedScripted):
        def time_of_source(self, source):
            known = find_site(source).known
            if len(known) > 1:  # the original: its autotuner chose its best own config after the first round
                return 2.0 if not self.screens else 1.0
            block = dict(known[0].meta)["BLOCK"]
            return own.get(block, 0.6 if source in first_round else 0.5)

        async def screen(self, baseline, variants, deadline_s, finalists):
            self.kept_ms = self.time_of_source(baseline)  # before this screen counts: 2.0 ms in the first only
            return await super().screen(baseline, variants, deadline_s, finalists)

    backend = Retuned()
    result = run(backend, AUTOTUNED)
    assert len(backend.screens) >= 2 and backend.screens[0] == probe.screens[0]
    assert all(len(find_site(s[0]).known) == 1 and backend.time_of_source(s[0]) == 1.0 for s in backend.screens[1:])
    assert backend.confirmed and backend.time_of_source(backend.confirmed[0]) == 0.5
    assert result.improved and backend.time_of_source(result.best.source) == 0.5
    assert result.screened == len({s for screen in backend.screens for s in screen})  # the control counted once


def find_site(source):
    from geak.agent.tuning.autotune_configs import find_autotune_sites

    return find_autotune_sites(source)[0]


def test_a_winner_that_takes_its_kernel_onto_an_atomic_path_is_said_for_its_reviewer():
    """The test cannot show that such a winner needs zeroed memory: the result says so (``review_notes``)."""
    store = "        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)\n"
    assert store in SOURCE
    atomic = SOURCE.replace(store, (
        "        if BLOCK_SIZE > 2048:\n"
        "            tl.atomic_add(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)\n"
        "        else:\n" + "    " + store
    ))  # fmt: skip
    result = run(Scripted(), source=atomic)
    assert result.improved and launch_values(result.best.source)["BLOCK_SIZE"] == 4096
    (note,) = result.review
    assert note.startswith("add_kernel: BLOCK_SIZE 1024→4096 takes its `tl.atomic_add` path (line 12)")
    assert run(Scripted()).review == []  # the same winner on a kernel without such a path: nothing to say


def test_a_winner_whose_larger_block_steps_without_a_mask_says_the_narrower_contract():
    """Where the check's probes could not try a size the original handles and the winner does not (here, none: the
    backend is scripted), its reviewer reads what the winner now requires (``input_contracts``)."""
    unmasked = SOURCE.replace(", mask=mask)", ")")
    assert unmasked.count("mask=mask") == 0
    result = run(Scripted(), source=unmasked)
    assert result.improved and launch_values(result.best.source)["BLOCK_SIZE"] == 4096
    (note,) = result.review
    assert note.startswith("add_kernel: BLOCK_SIZE 1024→4096 narrows what it accepts: its loads or stores at line 10")
    assert "n must now be a multiple of 4096, where the original takes any multiple of 1024" in note


DEAD_BRANCH = SOURCE.replace(
    "    n = out.numel()\n", "    n = out.numel()\n    warps = 4 if n < 0 else 8  # the first branch: never taken\n"
).replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=1024, num_warps=warps)")


@dataclass
class Hashed(Scripted):
    """Reports each variant's kernels as a real screening does: one hash per distinct compiled kernel, the same for
    launches that differ only in a branch the test never takes."""

    async def screen(self, baseline, variants, deadline_s, finalists):
        result = await super().screen(baseline, variants, deadline_s, finalists)
        hashed = [replace(v, kernels=(CompiledKernelFacts("add_kernel", hash=_live(source)),))
                  for v, source in zip(result.variants, variants, strict=True)]  # fmt: skip
        return replace(result, variants=tuple(hashed))


def _live(source):
    """What the kernel compiles to: its live launch values (the last branch's warps is the one a launch takes)."""
    return repr(sorted(launch_values(source).items()))


def test_configurations_that_compile_the_same_kernels_are_one_said_by_its_smallest_diff():
    backend = Hashed(time_of=lambda values: bowl(values, best_warps=16))
    result = run(backend, DEAD_BRANCH)
    assert result.improved and result.best is not None
    confirmed = [_live(source) for source in backend.confirmed]
    assert len(confirmed) == len(set(confirmed))  # no kernel confirmed twice
    assert "4 if n < 0 else" in result.best.source  # the dead branch's knob is left as it was
    assert launch_values(result.best.source)["num_warps"] == 16


def test_a_finalist_is_proposed_without_a_change_that_screened_the_same_without_it():
    """The bowl's time does not depend on the stages: the configuration that changes them beside the tile and warps
    screens as the one that does not, and the smaller diff is what is confirmed and proposed."""
    backend = Scripted()
    result = run(backend)
    assert result.improved and result.best is not None
    assert result.best.note == "add_kernel: BLOCK_SIZE 1024→4096, num_warps 4→8", result.best.note
    assert all("num_stages" not in f.note for f in result.finalists)


def test_a_finalists_confirmation_is_estimated_by_the_references_own_run_and_the_originals_bench():
    from types import SimpleNamespace

    from geak.agent.evaluation import CandidateEvaluator
    from geak.agent.loop import CONFIRM_BENCHES, _SearchBackend

    prepared = []

    class Evaluator:
        async def prepare_reference(self, file, progress=None):
            prepared.append(Path(file).name)
            progress("running the reference")
            await asyncio.sleep(0.01)

    candidates = CandidateEvaluator(Evaluator(), Path(__file__).parent / "fixtures" / "add_native.py")
    said = []
    agent = SimpleNamespace(candidates=candidates, _emit=lambda kind, message: said.append(message))

    async def go():
        candidates.timing = False
        assert await _SearchBackend(agent, None, None).confirm_estimate() is None  # no timing: no confirmation
        candidates.timing, candidates.check_s, candidates.bench_s = True, 2.0, 1.5
        backend = _SearchBackend(agent, None, None)
        return await backend.confirm_estimate(), await backend.confirm_estimate()

    first, again = asyncio.run(go())
    assert prepared == ["add_native.py"] and said == ["running the reference"]  # run once, before the search plans
    assert first == again == 2.0 + CONFIRM_BENCHES * 1.5  # a run quicker than the original's check counts as one
