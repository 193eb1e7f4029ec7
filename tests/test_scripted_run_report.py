"""`benchmarks/scripted_run_report.py` on three small suite files in Triton's interpreter: `geak run` with a scripted
model whose replies are built from the files (right, wrong, slower, cut; whole modules and SEARCH/REPLACE blocks),
checked from the run's records. The GPU run of ten files is the lead's (the script's docstring)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from geak.evaluator import parse_triton_file

ROOT = Path(__file__).resolve().parent.parent
SUITE = next((d / "suites" / "tritonbench_revised" for d in (ROOT / "shared", ROOT.parent / "shared") if d.is_dir()),
             ROOT / "shared" / "suites" / "tritonbench_revised")  # fmt: skip


@pytest.mark.skipif(not SUITE.is_dir(), reason="the shared suites are not beside the checkout")
def test_a_scripted_run_over_three_files_keeps_its_records_and_chooses_right(tmp_path):
    script = ROOT / "benchmarks" / "scripted_run_report.py"
    command = [sys.executable, str(script), "--backend", "interpreter", "--files", "3", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "scripted_run.json").read_text())
    assert report["ok"] and report["unknown_requests"] == 0 and len(report["files"]) == 3
    rows = {r["file"]: r for r in report["files"]}
    assert all(not r["failures"] and r["candidates"] == len(r["plan"]) for r in rows.values())
    assert {r["diff_mode"] for r in rows.values()} == {True, False}  # whole modules and edit blocks
    seen = [s for r in rows.values() for s in r["candidates_seen"]]
    assert any(":wrong:exec" in s for s in seen) and any(":slower:ok" in s for s in seen)
    assert any(r["plan"][0] == "cut" for r in rows.values())  # a cut reply, asked again, became a candidate
    assert "ALL CHECKS PASS" in done.stdout


@pytest.mark.parametrize("diff_mode", [False, True])
def test_the_scripted_model_tells_the_roles_apart_and_strategies_reach_the_implementer(
    scripted_llm, tmp_path, diff_mode
):
    """The report's model on the loop's current prompts, with timing (so the optimizer is asked): each request is told
    apart, and each strategy token is found in the implementer's request that follows."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from scripted_run_report import FileState, ScriptedModel, fingerprints
    from test_agent_loop import ORIGINAL, config, run_agent

    kernel = parse_triton_file(ORIGINAL.read_text(), str(ORIGINAL)).kernel_section
    states = {ORIGINAL.stem: FileState(ORIGINAL.stem, kernel, ("right", "slower", "wrong"))}
    fingerprints(states, [ORIGINAL])
    scripted_llm.answer_with(ScriptedModel(states))
    cfg = config(scripted_llm, tmp_path, max_iteration=3, one_shot=False, diff_mode_min_chars=0 if diff_mode else None)
    result, _ = asyncio.run(run_agent(cfg))
    served = states[ORIGINAL.stem].served
    assert [e["kind"] for e in served] == ["right", "optimizer", "slower", "optimizer", "wrong"]
    assert all(e["diff_mode"] == diff_mode for e in served if "reply" in e)
    tokens = [e["token"] for e in served if e["kind"] == "optimizer"]
    assert [e["tokens_seen"] for e in served[2::2]] == [[tokens[0]], [tokens[1]]]
    assert [c.passed for c in result.candidates] == [True, True, False]
