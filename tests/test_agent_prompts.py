"""What the loop's prompts and requests carry, against a scripted OpenAI-compatible server on loopback (the real openai
client, real checks in Triton's interpreter, timing from `MarkedTiming`'s markers): the comparison's tolerances as
the evaluator applies them, a lower temperature for fixes, different aims for parallel chains, and a prompt within
``prompts.PROMPT_CHARS`` however long the file's test."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_agent_loop import ORIGINAL, code, config, reply
from test_agent_model_replies import TimedCalls

from geak.agent import prompts
from geak.agent.chain_aims import MEMORY, ranked_aims
from geak.agent.llm import ChatModel
from geak.agent.loop import GeakAgent
from geak.evaluator import DEFAULT_TOLERANCES, parse_tolerance_overrides
from geak.evaluator.api import EvalOptions, Evaluator


async def run_on(original: Path, cfg, timing=TimedCalls, tolerances: tuple[str, ...] = ()):
    overrides = parse_tolerance_overrides(list(tolerances))
    options = EvalOptions(backend="interpreter", timeout_s=60, spares=0, tolerances=overrides)
    async with Evaluator(options) as evaluator, ChatModel(cfg) as model:
        return await GeakAgent(cfg, timing(evaluator, original), model).optimize()


def test_fixes_ask_at_the_fix_temperature_and_every_prompt_states_the_tolerances(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(wrong=True)))  # generate: wrong outputs
    scripted_llm.reply(reply(code(0.8), "## Reflection\nIt subtracts."))  # reflect: fixed
    cfg = config(scripted_llm, tmp_path, max_iteration=2, temperature=0.9, fix_temperature=0.3)
    result = asyncio.run(run_on(ORIGINAL, cfg, tolerances=("float32=1e-4,2e-4",)))
    assert [c.origin for c in result.candidates] == ["generate", "reflect"] and result.candidates[1].passed
    assert [r["temperature"] for r in scripted_llm.requests] == [0.9, 0.3]

    generate, fix = (r["messages"][-1]["content"] for r in scripted_llm.requests)
    assert "float32 rtol 0.0001, atol 0.0002" in generate  # this run's override
    half = DEFAULT_TOLERANCES["bfloat16"]
    assert f"bfloat16 rtol {half.rtol:g}, atol {half.atol:g}" in generate  # the evaluator's default
    assert "|yours - original| <= atol * RMS(original output) + rtol * |original|" in generate
    assert "at other sizes and on other value ranges" in generate
    assert "## How outputs are compared\nTolerances, per output element" in fix  # wrong outputs: said again
    assert "float32 rtol 0.0001, atol 0.0002" in fix


def test_the_default_fix_temperature_is_lower_than_generation(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(broken=True)))
    scripted_llm.reply(reply(code(0.8)))
    asyncio.run(run_on(ORIGINAL, config(scripted_llm, tmp_path, max_iteration=2)))
    generation, fix = (r["temperature"] for r in scripted_llm.requests)
    assert (generation, fix) == (1.0, 0.2)


def test_parallel_chains_are_aimed_at_different_bottlenecks(scripted_llm, tmp_path):
    either = f"## Strategy\n1. Wider loads.\n\n```python\n{code(0.7)}```\n"  # a strategy and a module: any order
    for _ in range(6):  # two chains: a generate each, then an optimizer and an implementer each
        scripted_llm.reply(either)
    asyncio.run(run_on(ORIGINAL, config(scripted_llm, tmp_path, max_iteration=2, parallel=2)))
    sent = [r["messages"][-1]["content"] for r in scripted_llm.requests]
    first, second = ranked_aims(TimedCalls.COSTS, ORIGINAL.read_text())[:2]
    assert first == MEMORY  # the original's only timed call is memory-bound
    generates = [p for p in sent if p.startswith("## Task\nRewrite")]
    assert sorted(p.count(f"## This attempt's aim: {first.name}") for p in generates) == [0, 1]
    assert sorted(p.count(f"## This attempt's aim: {second.name}") for p in generates) == [0, 1]
    optimizers = [p for p in sent if p.startswith("## Measured candidates")]
    assert len(optimizers) == 2
    for prompt in optimizers:
        aim = first if "### Candidate c0." in prompt else second
        assert f"## This attempt's aim: {aim.name}\n" in prompt and f"must be aimed at {aim.name}" in prompt
    implements = [p for p in sent if p.startswith("## Task\nImplement")]
    assert {first.name, second.name} == {a.name for a in (first, second) for p in implements if a.name in p}


def test_a_lone_chain_has_no_aim(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.8)))
    asyncio.run(run_on(ORIGINAL, config(scripted_llm, tmp_path, max_iteration=1)))
    assert "This attempt's aim" not in scripted_llm.requests[0]["messages"][-1]["content"]


def test_a_long_test_section_gives_way_within_the_prompt_budget(scripted_llm, tmp_path):
    sizes = ", ".join(str(1000 + i) for i in range(4000))  # an input helper of about 24 k characters
    long = ORIGINAL.read_text().replace(
        "def bench_add():",
        f"def make_inputs(n):\n    sizes = [{sizes}]\n    return torch.randn(min(n, len(sizes)), device='cuda')\n\n\n"
        "def test_add_made():\n    x = make_inputs(3000)\n    torch.testing.assert_close(add(x, x), 2 * x)\n\n\n"
        "def bench_add():",
    )
    original = tmp_path / "add_long.py"
    original.write_text(long)
    scripted_llm.reply(reply(code(0.8)))
    result = asyncio.run(run_on(original, config(scripted_llm, tmp_path, max_iteration=1)))
    assert result.candidates[0].passed
    messages = scripted_llm.requests[0]["messages"]
    system, user = (m["content"] for m in messages)
    assert prompts.size(messages) <= prompts.PROMPT_CHARS < len(long)
    assert "def make_inputs(n):\n    ...  # 2 lines of input preparation" in user and "1999" not in user
    assert "def test_add_made():\n    x = make_inputs(3000)" in user  # the tests whole
    assert "`def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:`" in system  # the contract
    assert "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):" in user  # the code
    assert "`add(x=f32[16777216], y=f32[16777216])`: 1.0000 ms" in user  # the timed calls with their shapes
