"""The loop facing a model that cannot be used, a slow one, a broken reply, and a candidate that hangs on import
(scripted server on loopback, real checks in Triton's interpreter)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from test_agent_loop import ORIGINAL, MarkedTiming, code, config, reply, run_agent

from geak.agent.checkpoint import load, paths_for
from geak.agent.config import AgentConfig
from geak.agent.evaluation import CandidateEvaluator
from geak.agent.llm import ChatModel, ModelUnusable
from geak.agent.loop import GeakAgent
from geak.evaluator.api import EvalOptions, Evaluator


def test_an_unusable_model_stops_the_run_without_the_search(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = AgentConfig(model_id="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, output_path=tmp_path,
                      search=True, search_time_s=4)  # fmt: skip
    with pytest.raises(ModelUnusable, match="cannot connect"):
        asyncio.run(run_agent(cfg))
    kept = load(paths_for(tmp_path, ORIGINAL).latest).memory
    assert not any(c.origin == "search" for c in kept.candidates)  # no fall-back to the search


def test_broken_json_is_asked_again_and_the_run_goes_on(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.9)))
    scripted_llm.raw('{"id": "x", choices: [')
    scripted_llm.reply("## Strategy\nlarger blocks")
    scripted_llm.reply(reply(code(0.5)))
    result, events = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=2)))
    _, good = result.candidates
    assert any("did not answer with a chat completion" in e.message for e in events)
    assert good.passed and result.best is good and "larger blocks" in good.strategy


def test_waiting_for_a_slow_model_is_reported(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.8)), delay_s=1.2)

    async def go():
        events = []
        cfg = config(scripted_llm, tmp_path, max_iteration=1)
        options = EvalOptions(backend="interpreter", timeout_s=60, spares=0)
        async with Evaluator(options) as evaluator, ChatModel(cfg) as model:
            agent = GeakAgent(cfg, MarkedTiming(evaluator, ORIGINAL), model, progress=events.append)
            agent.waiting_report_s = 0.3
            await agent.optimize()
        return events

    waiting = [e for e in asyncio.run(go()) if e.kind == "waiting" and "waiting for the model" in e.message]
    assert waiting and "waiting for the model (generate of c0.1)" in waiting[0].message  # the evaluator's steps aside
    assert waiting[-1].message.endswith(" s") and waiting[0].chain == 0


def test_token_counts_add_up_over_a_resumed_run(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(0.8)), usage=(100, 10))
    cfg = config(scripted_llm, tmp_path, max_iteration=1)
    first, _ = asyncio.run(run_agent(cfg))
    assert totals(first.usage) == {"prompt_tokens": 100, "completion_tokens": 10, "requests": 1,
                                   "reasoning_tokens": 0, "cached_tokens": 0}  # fmt: skip
    scripted_llm.reply("## Strategy\nfewer instructions", usage=(200, 20), reasoning_tokens=15, cached_tokens=80)
    scripted_llm.reply(reply(code(0.5)), usage=(300, 30))
    resumed, _ = asyncio.run(run_agent(cfg.model_copy(update={"max_iteration": 2}), resume=True))
    assert totals(resumed.usage) == {"prompt_tokens": 600, "completion_tokens": 60, "requests": 3,
                                     "reasoning_tokens": 15, "cached_tokens": 80}  # fmt: skip
    assert totals(resumed.usage_this_run) == {"prompt_tokens": 500, "completion_tokens": 50, "requests": 2,
                                              "reasoning_tokens": 15, "cached_tokens": 80}  # fmt: skip
    assert resumed.usage["generator.prompt_tokens"] == 400 and resumed.usage["generator.requests"] == 2
    assert resumed.usage["optimizer.reasoning_tokens"] == 15 and resumed.usage["optimizer.cached_tokens"] == 80


def totals(usage: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in usage.items() if "." not in k}


def test_a_candidate_that_hangs_while_importing_is_not_called():
    hangs = code().replace("import torch\n", "import torch\nimport time\ntime.sleep(120)\n", 1)

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=8, spares=0)) as evaluator:
            candidates = CandidateEvaluator(evaluator, ORIGINAL)
            await candidates.start()
            return await candidates.evaluate(hangs), await candidates.evaluate(code())

    hung, fine = asyncio.run(go())
    assert not hung.ok and "timed out" in hung.message and not hung.called
    assert fine.ok and fine.called
