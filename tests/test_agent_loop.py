"""The GEAK loop against a scripted OpenAI-compatible server on loopback, with the real `openai` client and real
correctness checks in Triton's interpreter.

CI has no GPU, so GPU timing is the one thing replaced here: `MarkedTiming` reads a `# latency: X` marker in the
candidate's code (the original runs at 1.0 ms). The same scenario runs with real timing on a GPU in
`benchmarks/gpu_agent_report.py`.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from geak.agent import checkpoint
from geak.agent.config import AgentConfig
from geak.agent.evaluation import CandidateEvaluator
from geak.agent.llm import ChatModel, LLMError
from geak.agent.loop import GeakAgent
from geak.agent.memory import Evaluation
from geak.agent.retrieval import KernelCorpus
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.results import DEFAULT_NOISE_MARGIN
from geak.evaluator.shared.sequential import judge

FIXTURES = Path(__file__).parent / "fixtures"
ORIGINAL = FIXTURES / "add_native.py"
KERNEL_CODE = ORIGINAL.read_text().split("def test_add")[0]


def code(latency: float | None = None, *, broken: bool = False, wrong: bool = False) -> str:
    text = KERNEL_CODE
    if broken:
        text = text.replace("tl.arange(0, BLOCK)", "tl.arange(0, 3)")
    if wrong:
        text = text.replace("x + y, mask=mask)", "x - y, mask=mask)")
    if latency is not None:
        text = text.replace("def add(", f"# latency: {latency}\ndef add(")
    return text


def reply(body: str, prose: str = "Analysis: the kernel is memory bound.") -> str:
    return f"{prose}\n\n```python\n{body}```\n"


class MarkedTiming(CandidateEvaluator):
    """Real checks; 'timing' from a `# latency: X` marker (no GPU in CI)."""

    async def start(self, progress=None, profile=False) -> Evaluation:
        ev = await super().start()
        self.timing = True
        self.runtime = {**self.runtime, "device": "scripted GPU"}
        self.baseline_ms = 1.0
        ev.timed, ev.latency_ms, ev.speedup = True, 1.0, 1.0
        return ev

    async def evaluate(self, code: str, *, rounds=None, progress=None) -> Evaluation:
        self.timing = False  # the real evaluator: check only
        ev = await super().evaluate(code, progress=progress)
        self.timing = True
        if ev.ok:
            match = re.search(r"# latency: ([0-9.]+)", code)
            latency = float(match.group(1)) if match else 1.0
            ev.timed, ev.latency_ms, ev.stage = True, latency, "perf"
            ev.speedup = 1.0 / latency
            ev.speedup_low, ev.speedup_high = ev.speedup * 0.98, ev.speedup * 1.02
            ev.speedup_verdict = judge(ev.speedup_low, ev.speedup_high, DEFAULT_NOISE_MARGIN)
        return ev


def config(llm, tmp_path: Path, **overrides) -> AgentConfig:
    values = dict(model_id="scripted-model", base_url=llm.base_url, max_iteration=3, search=False,
                  output_path=tmp_path / "runs", max_retries=1, timeout_s=5.0)  # fmt: skip
    values.update(overrides)
    return AgentConfig(**values)


async def run_agent(cfg: AgentConfig, resume: bool = False, corpus: KernelCorpus | None = None):
    events = []
    options = EvalOptions(backend="interpreter", timeout_s=60, spares=0)
    async with Evaluator(options) as evaluator, ChatModel(cfg) as model:
        agent = GeakAgent(cfg, MarkedTiming(evaluator, ORIGINAL), model, corpus, progress=events.append)
        result = await agent.optimize(resume=resume)
    return result, events


def test_compile_error_then_reflection_then_faster(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(broken=True)))  # round 1: generate → does not compile
    scripted_llm.reply(reply(code(0.8), "## Reflection\ntl.arange needs a power of two."))  # round 2: reflect
    scripted_llm.reply("Candidates show... \n## Strategy\n1. Use larger blocks.")  # round 3: optimizer
    scripted_llm.reply(reply(code(0.5)))  # round 3: generator implements the strategy
    corpus = KernelCorpus.load()
    result, events = asyncio.run(run_agent(config(scripted_llm, tmp_path), corpus=corpus))

    first, fixed, faster = result.candidates
    assert not first.passed and first.evaluation.stage == "call"
    assert "power of 2" in first.evaluation.message
    assert fixed.origin == "reflect" and fixed.passed and "power of two" in fixed.reflection
    assert faster.origin == "optimize" and faster.passed and "larger blocks" in faster.strategy
    assert result.best is faster and result.improved
    assert abs(result.best.evaluation.speedup - 2.0) < 1e-9
    assert "-# latency" not in result.diff and "+# latency: 0.5" in result.diff
    assert result.pass_at_k == {1: 1.0}
    assert result.usage["requests"] == 4

    prompts = [r["messages"][-1]["content"] for r in scripted_llm.requests]
    assert "## A related, well-written Triton kernel" in prompts[0]  # one-shot retrieval from the corpus
    assert "power of 2" in prompts[1] and "## Reflection" in prompts[1]  # the error trace reaches the reflector
    assert "## What the check noted\n- checked with Triton's CPU interpreter" in prompts[1]  # and the check's caveats
    assert "1.0000 ms" in prompts[2] and "0.8000 ms" in prompts[2]  # the optimizer sees (code, latency) pairs
    assert "Use larger blocks" in prompts[3]  # the generator implements the strategy
    assert any(e.kind == "candidate" for e in events)


def test_garbage_is_a_failed_attempt_and_a_server_error_is_asked_again(scripted_llm, tmp_path):
    scripted_llm.reply("I cannot help with that.")  # round 1: no code
    scripted_llm.reply("overloaded", status=500, headers={"retry-after-ms": "5"})  # round 2: 500, retried once...
    scripted_llm.reply("overloaded", status=500, headers={"retry-after-ms": "5"})  # ...fails again: asked again
    scripted_llm.reply(reply(code(0.7)))
    result, _ = asyncio.run(run_agent(config(scripted_llm, tmp_path, max_iteration=2)))
    garbage, good = result.candidates
    assert garbage.evaluation.stage == "reply" and "no Python code block" in garbage.note
    assert good.origin == "reflect" and good.passed and result.best is good


def test_timeout_then_recovery(scripted_llm, tmp_path):
    # Times out (timeout_s=3, no retries): asked again at once. The loopback server answers one request at a time, so
    # the second waits out the rest of the first's delay (0.5 s), well within its own time-out.
    scripted_llm.reply(reply(code(0.9)), delay_s=3.5)
    scripted_llm.reply(reply(code(0.6)))
    cfg = config(scripted_llm, tmp_path, max_iteration=1, timeout_s=3.0, max_retries=0)
    result, events = asyncio.run(run_agent(cfg))
    assert any("timed out" in e.message and "asking the model again" in e.message for e in events)
    assert [c.id for c in result.candidates] == ["c0.1"] and result.best is result.candidates[0]


def test_debugging_trap_restarts_from_scratch(scripted_llm, tmp_path):
    scripted_llm.reply(reply(code(wrong=True)))  # generate: wrong output
    scripted_llm.reply(reply(code(wrong=True)))  # fix 1 fails
    scripted_llm.reply(reply(code(wrong=True)))  # fix 2 fails → trap (max_perf_debug_num=2)
    scripted_llm.reply(reply(code(0.9)))  # fresh start from the original
    cfg = config(scripted_llm, tmp_path, max_iteration=4, max_perf_debug_num=2)
    result, events = asyncio.run(run_agent(cfg))
    assert [c.origin for c in result.candidates] == ["generate", "reflect", "reflect", "generate"]
    assert any("debugging trap" in e.message for e in events)
    assert "abandoned" in scripted_llm.requests[3]["messages"][-1]["content"]
    assert result.best is result.candidates[3]


def test_checkpoint_resume_and_no_secrets(scripted_llm, tmp_path, monkeypatch):
    monkeypatch.setenv("GEAK_TEST_KEY", "sk-very-secret")
    scripted_llm.reply(reply(code(0.8)))
    cfg = config(scripted_llm, tmp_path, max_iteration=1, api_key_env="GEAK_TEST_KEY")
    first, _ = asyncio.run(run_agent(cfg))
    assert first.best is first.candidates[0]
    paths = checkpoint.paths_for(tmp_path / "runs", ORIGINAL)
    assert paths.latest.exists() and paths.memory(0).exists() and paths.results(0).exists()
    for f in paths.root.iterdir():
        assert "sk-very-secret" not in f.read_text()
    line = json.loads(paths.results(0).read_text().splitlines()[0])
    assert line["exe_pass"] and abs(line["speedup"] - 1.25) < 1e-9

    scripted_llm.reply("## Strategy\nfewer instructions")
    scripted_llm.reply(reply(code(0.4)))
    # GEAK's way: result_path names the round's results; its memory snapshot beside it is loaded
    resumed, _ = asyncio.run(run_agent(cfg.model_copy(update={"max_iteration": 2, "result_path": paths.results(0)})))
    assert [c.id for c in resumed.candidates] == ["c0.1", "c0.2"]  # the first round's work was kept
    assert resumed.best.id == "c0.2"


def test_fatal_model_errors_stop_the_run(scripted_llm, tmp_path):
    scripted_llm.reply("bad key", status=401)
    with pytest.raises(LLMError) as info:
        asyncio.run(run_agent(config(scripted_llm, tmp_path)))
    assert info.value.kind == "auth"
    assert checkpoint.paths_for(tmp_path / "runs", ORIGINAL).latest.exists()  # the checkpoint is still written


def test_session_refuses_a_kernel_the_file_does_not_have(tmp_path):
    from geak.agent.session import OptimizeSession
    from geak.evaluator.api import BadInput

    session = OptimizeSession(ORIGINAL, AgentConfig(output_path=tmp_path), backend="interpreter", kernel="nope")
    with pytest.raises(BadInput, match=r"no @triton\.jit kernel named 'nope'"):
        asyncio.run(session.run())


def test_a_session_on_a_shared_evaluator_forgets_its_original_as_a_reference(tmp_path, scripted_llm):
    """The editor's server keeps one evaluator for every Optimize: a session run on it leaves none of its original's
    reference outputs behind (a later session runs the reference again)."""
    from geak.agent.session import OptimizeSession
    from geak.evaluator.api import EvalOptions, Evaluator

    scripted_llm.reply(reply(code(0.8)))

    async def go() -> tuple[list[str], list]:
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=60, spares=0)) as ev:
            session = OptimizeSession(ORIGINAL, config(scripted_llm, tmp_path, max_iteration=1), evaluator=ev)
            result = await session.run()
            return [c.evaluation.message for c in result.candidates], list(ev._scratch.iterdir())

    checked, left = asyncio.run(go())
    assert len(checked) == 1 and "outputs match the reference" in checked[0], checked  # the original ran as one
    assert left == [], left
