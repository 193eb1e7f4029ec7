"""Agent figures on a GPU: the LLM-free search on corpus kernels, and one scripted-LLM run end to end.

``python benchmarks/gpu_agent_report.py [--budget N] [--out DIR] KERNEL.py ...``. The scripted run serves canned
replies from an OpenAI-compatible server on loopback (the real `openai` client, real checks, real GPU timing):
a candidate that does not compile, a reflection that fixes it, a strategy, and a faster candidate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from pytest_httpserver import HTTPServer

from geak.agent.config import AgentConfig
from geak.agent.evaluation import CandidateEvaluator
from geak.agent.llm import ChatModel
from geak.agent.loop import GeakAgent
from geak.agent.retrieval import KernelCorpus
from geak.evaluator.api import EvalOptions, Evaluator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from scripted_llm import ScriptedLLM  # noqa: E402

SLOW = ROOT / "tests" / "fixtures" / "add_slow.py"


def summarize(result) -> dict:
    best = result.best
    ev = best.evaluation if best else None
    tried = [c for c in result.candidates if c.evaluation]
    return {
        "file": Path(result.file).name,
        "improved": result.improved,
        "message": result.message,
        "baseline_ms": result.baseline_ms,
        "best": best.id if best else None,
        "best_note": best.note if best else None,
        "speedup": [ev.speedup, ev.speedup_low, ev.speedup_high] if ev else None,
        "pct_peak_bw": ev.pct_peak_bw if ev else None,
        "pct_peak_flops": ev.pct_peak_flops if ev else None,
        "candidates": len(tried),
        "passing": sum(c.passed for c in tried),
        "usage": result.usage,
    }


async def search(files: list[str], budget: int, out: Path) -> list[dict]:
    rows = []
    async with Evaluator(EvalOptions(timeout_s=300)) as evaluator:
        for f in files:
            cfg = AgentConfig(search_time_s=budget, output_path=out / "runs")
            agent = GeakAgent(cfg, CandidateEvaluator(evaluator, f), None, None,
                              progress=lambda e: print("   ", e.message, flush=True))
            result = await agent.optimize()
            rows.append(summarize(result))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def variant(block: int, warps: int, broken: bool = False) -> str:
    code = SLOW.read_text().split("def test_add")[0]
    code = code.replace("BLOCK=32, num_warps=1)", f"BLOCK={block}, num_warps={warps})")
    code = code.replace("triton.cdiv(n, 32)", f"triton.cdiv(n, {block})")
    if broken:
        code = code.replace("tl.arange(0, BLOCK)", "tl.arange(0, 3)")
    return code


async def scripted(out: Path) -> dict:
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        llm = ScriptedLLM(server)
        llm.reply(f"Plan: bigger blocks.\n```python\n{variant(64, 2, broken=True)}```")
        llm.reply(f"## Reflection\ntl.arange needs a power of two.\n```python\n{variant(64, 2)}```")
        llm.reply("It is memory bound and launches far too many tiny programs.\n## Strategy\n1. 1024-wide blocks")
        llm.reply(f"Use 1024-element blocks.\n```python\n{variant(1024, 4)}```")
        cfg = AgentConfig(model_id="scripted-model", base_url=llm.base_url, max_iteration=3, search=False,
                          output_path=out / "runs")
        async with Evaluator(EvalOptions(timeout_s=300)) as evaluator, ChatModel(cfg) as model:
            agent = GeakAgent(cfg, CandidateEvaluator(evaluator, SLOW), model, KernelCorpus.load(),
                              progress=lambda e: print("   ", e.message, flush=True))
            result = await agent.optimize()
        row = summarize(result)
        row["origins"] = [(c.id, c.origin, c.passed) for c in result.candidates]
        row["requests"] = len(llm.requests)
        print(json.dumps(row), flush=True)
        return row
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=float, default=60, help="search seconds per kernel")
    parser.add_argument("--out", default=".")
    parser.add_argument("--skip-scripted", action="store_true")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="geak-agent-report-"))
    report = {"search": asyncio.run(search(args.files, args.budget, out)) if args.files else []}
    if not args.skip_scripted:
        report["scripted"] = asyncio.run(scripted(out))
    Path(args.out, "agent_report.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
