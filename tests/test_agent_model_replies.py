"""What the loop makes of a real model's replies and what it tells the model (scripted server on loopback, the real
openai client, real checks in Triton's interpreter; timing from `MarkedTiming`'s markers)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_agent_loop import ORIGINAL, MarkedTiming, code, config, reply, run_agent

from geak.agent.llm import ChatModel
from geak.agent.loop import GeakAgent
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.results import CallCost


def prompts_sent(llm) -> list[str]:
    return [r["messages"][-1]["content"] for r in llm.requests]


def test_the_strategy_after_a_long_analysis_reaches_the_implementer(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.8)))
    analysis = "## Analysis\n" + "The loads are coalesced but the grid is small. " * 60  # ~2,800 characters
    scripted_llm.reply(f"{analysis}\n\n## Strategy\n1. Give each program 4096 elements (FUSE-MARK).\n")
    scripted_llm.reply(reply(code(0.5)))
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=2)))
    implemented = result.candidates[-1]
    assert implemented.origin == "optimize" and "FUSE-MARK" in implemented.strategy
    assert "FUSE-MARK" in prompts_sent(scripted_llm)[2]


def test_a_reply_cut_inside_thinking_is_no_candidate(scripted_llm, tmp_path):
    draft = f"<think>\nA first draft:\n```python\n{code(0.5)}```\nNow check the masks and"
    scripted_llm.reply(draft, finish_reason="length")
    scripted_llm.reply(draft, finish_reason="length")  # asked again with a larger budget, cut again
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=1)))
    [cut] = result.candidates
    assert not cut.passed and cut.evaluation.stage == "reply" and not cut.code
    assert "truncated" in cut.note


def test_a_reply_without_code_is_reflected_on_with_the_task_and_the_original(scripted_llm, tmp_path):
    scripted_llm.reply("I would tile the loop.")  # no code
    scripted_llm.reply(reply(code(0.7)))
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=2)))
    assert [c.origin for c in result.candidates] == ["generate", "reflect"] and result.candidates[1].passed
    second = prompts_sent(scripted_llm)[1]
    assert "## Task\nRewrite this Triton code" in second and "no Python code block" in second
    assert "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):" in second  # the original to start from
    assert "```python\n\n```" not in second


def test_a_failed_request_is_asked_again_and_is_no_attempt(scripted_llm, tmp_path):
    for _ in range(2):  # HTTP 500, the client's one retry too: one failed request
        scripted_llm.reply("overloaded", status=500, headers={"retry-after-ms": "5"})
    scripted_llm.reply(reply(code(0.7)))
    result, events = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=1, max_perf_debug_num=1)))
    [good] = result.candidates
    assert good.origin == "generate" and good.passed and result.best is good
    assert any("asking the model again" in e.message for e in events)
    assert not any("debugging trap" in e.message for e in events)


TEST_LAUNCHED = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def _scale(x, factor):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 128),)](x, out, x.numel(), factor, BLOCK=128)
    return out


def test_scale():
    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    scale_kernel[(8,)](x, out, x.numel(), 2.0, BLOCK=128)
    return out, _scale(x, 3.0)
'''


def test_the_contract_names_private_wrappers_and_the_kernels_the_test_launches(scripted_llm, tmp_path):
    original = tmp_path / "scale.py"
    original.write_text(TEST_LAUNCHED)
    without_wrapper = TEST_LAUNCHED.split("def _scale")[0]
    scripted_llm.reply(reply(without_wrapper))
    result, _ = asyncio.run(_run_on(original, config(scripted_llm, tmp_path, max_iteration=1)))
    [attempt] = result.candidates
    assert attempt.evaluation.stage == "reply" and "`_scale`" in attempt.note  # required at extraction
    system = scripted_llm.requests[0]["messages"][0]["content"]
    assert "`def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):`  (kernel launched by the test" in system
    assert "`def _scale(x, factor):`  (called by the test)" in system


async def _run_on(original: Path, cfg, timing=MarkedTiming, *, stop_before_search=False):
    options = EvalOptions(backend="interpreter", timeout_s=60, spares=0)
    async with Evaluator(options) as evaluator, ChatModel(cfg) as model:
        agent = GeakAgent(cfg, timing(evaluator, original), model)
        if stop_before_search:  # the model's rounds only: stopped once its last candidate is in
            agent.progress = lambda event: event.kind == "candidate" and agent.stop()
        return await agent.optimize(), None


def test_a_cut_reply_is_asked_again_with_a_larger_budget_before_it_counts(scripted_llm, tmp_path):
    scripted_llm.reply(f"<think>\nThe loads are coalesced; maybe {code(0.5)[:300]}", finish_reason="length")
    scripted_llm.reply(reply(code(0.6)), reasoning_tokens=900)
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=1, max_tokens=4000)))
    [candidate] = result.candidates
    assert candidate.passed and result.best is candidate
    assert [r["max_tokens"] for r in scripted_llm.requests] == [4000, 8000]
    assert result.usage["generator.requests"] == 2 and result.usage["generator.reasoning_tokens"] == 900


def test_a_slower_candidate_never_becomes_the_base(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(1.25)))  # correct but slower than the original
    scripted_llm.reply("## Strategy\n1. Process two elements per lane.")
    scripted_llm.reply(reply(code(0.5)))
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=2)))
    _, implemented = result.candidates
    optimizer, implement = prompts_sent(scripted_llm)[1:]
    assert "### Candidate original (original): 1.0000 ms, speedup 1.00x over the original" in optimizer
    assert implemented.parent is None and "# latency: 1.25" not in implement  # built on the original
    assert implemented.passed and result.best is implemented


def test_the_ledger_reaches_the_reflector_and_the_optimizer(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(wrong=True)))
    scripted_llm.reply(reply(code(wrong=True), "## Reflection\nThe mask was off by one (MARK-1)."))
    scripted_llm.reply(reply(code(0.8), "## Reflection\nThe sign was wrong."))
    scripted_llm.reply("## Strategy\n1. Wider loads.")
    scripted_llm.reply(reply(code(0.6)))
    asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=4)))
    _, first_fix, second_fix, optimizer, _ = prompts_sent(scripted_llm)
    assert "Fixes already tried" not in first_fix
    assert "## Fixes already tried on this line of attack" in second_fix
    assert "- c0.2 (reflect from c0.1); failed at the exec stage" in second_fix and "MARK-1" in second_fix
    assert "1| " in second_fix and "do not copy them" in second_fix  # the failing code with line numbers
    reference = "## The reference, whose outputs yours must match\n```python\n"
    assert reference in first_fix and "x + y, mask=mask)" in first_fix.split(reference)[1]  # on wrong outputs
    assert "## Every attempt so far, oldest first" in optimizer
    assert "- c0.1 (generate); failed at the exec stage" in optimizer
    assert "- c0.3 (reflect from c0.2); correct, 1.25x the original's speed, faster" in optimizer


class TimedCalls(MarkedTiming):
    """`MarkedTiming` with the original's timed calls as a GPU's bench reports them."""

    COSTS = (CallCost("add(x=f32[16777216], y=f32[16777216])", 201326592, None, None, 1.0, 62.0, None, "memory", ""),)

    async def start(self, progress=None, profile=False):
        ev = await super().start()
        self.baseline_costs = self.COSTS
        return ev


def test_the_generate_and_implement_prompts_state_what_is_measured(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.8)))
    scripted_llm.reply("## Strategy\n1. Wider loads.")
    scripted_llm.reply(reply(code(0.6)))
    asyncio.run(_run_on(ORIGINAL, config(scripted_llm, tmp_path, max_iteration=2), TimedCalls))
    generate, _, implement = prompts_sent(scripted_llm)
    for prompt in (generate, implement):
        assert "- Objective: the total time of all calls that `bench_add` makes; the original takes 1.0000 ms" in prompt
        assert "`add(x=f32[16777216], y=f32[16777216])`: 1.0000 ms, memory-bound" in prompt
        assert "on fresh random values, at other sizes and on other value ranges" in prompt
        assert "tuned by measurement after you" not in prompt  # no search configured


def test_the_prompts_say_what_the_search_tunes_afterwards(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.8)))
    cfg = config(scripted_llm, tmp_path, max_iteration=1, search=True, search_time_s=1)
    asyncio.run(_run_on(ORIGINAL, cfg, TimedCalls, stop_before_search=True))
    assert "Block sizes, num_warps and num_stages are tuned by measurement after you" in prompts_sent(scripted_llm)[0]


def test_parallel_chains_are_independent(scripted_llm, tmp_path):
    either = f"## Strategy\n1. Wider loads.\n\n```python\n{code(0.7)}```\n"  # a strategy and a module: any order
    scripted_llm.reply(reply(code(0.8)))
    scripted_llm.reply(reply(code(0.9)))
    for _ in range(8):
        scripted_llm.reply(either)
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=3, parallel=2)))
    optimizers = [p for p in prompts_sent(scripted_llm) if p.startswith("## Measured candidates")]
    assert len(optimizers) == 4
    for prompt in optimizers:  # a chain's own candidates and attempts, never the other's
        assert ("### Candidate c0." in prompt) != ("### Candidate c1." in prompt)
        assert ("- c0.1 (generate)" in prompt) != ("- c1.1 (generate)" in prompt)
    assert all(c.parent.startswith(f"c{c.chain}.") for c in result.candidates if c.origin == "optimize")
