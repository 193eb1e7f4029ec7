"""A compile that lasts is said (``job.compile.watch``): in the job's progress, in a time-out's message, and it holds
a probe's silence limit (those end to end: ``test_evaluator_check``, ``test_probes``; here the watch itself, and a
real compile on a GPU)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from triton.runtime.jit import JITFunction

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.check import compile_at_end
from geak.evaluator.job.compile import watch

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_compile_that_lasts_is_said_with_its_end_and_a_short_or_nested_one_is_not():
    said: list[dict] = []
    spoken = threading.Event()

    def say(message: dict) -> None:
        said.append(message)
        spoken.set()

    with watch.reporting(say):
        with watch.compiling("quick[num_warps=4, num_stages=3]"):
            pass
        with (
            watch.compiling("outer[num_warps=1, num_stages=2]"),
            watch.compiling("inner[num_warps=1, num_stages=2]"),
        ):
            assert spoken.wait(60), said  # the compile lasts until the watch has said it, however late its look
    assert [m.get("compiling") or m.get("compiled") for m in said] == ["outer[num_warps=1, num_stages=2]"] * 2, said
    assert said[0]["begun"] <= time.time() and said[1]["compile_s"] >= watch.SAY_AFTER_S, said
    with watch.compiling("after[num_warps=4, num_stages=3]"):  # no longer reporting: nothing is said
        time.sleep(watch.SAY_AFTER_S + 0.3)
    assert len(said) == 2, said


def test_the_watch_wraps_tritons_compile_only_while_it_reports():
    original = JITFunction._do_compile
    with watch.reporting(lambda _: None):
        assert JITFunction._do_compile is not original
    assert JITFunction._do_compile is original


def test_a_compile_is_described_by_its_kernel_and_launch_options():
    jit = SimpleNamespace(fn=SimpleNamespace(__qualname__="chunk_retention_bwd_kernel_dqkv"))
    options = SimpleNamespace(num_warps=1, num_stages=2, num_ctas=1)
    assert watch.described(jit, ("key", {}, options, False)) == (
        "chunk_retention_bwd_kernel_dqkv[num_warps=1, num_stages=2]"
    )
    clustered = SimpleNamespace(num_warps=8, num_stages=3, num_ctas=2)
    described = watch.described(jit, (clustered,))
    assert described == "chunk_retention_bwd_kernel_dqkv[num_warps=8, num_stages=3, num_ctas=2]"
    assert watch.described(jit, ()) == "chunk_retention_bwd_kernel_dqkv"


def test_a_time_outs_words_name_only_a_compile_the_job_said_was_running():
    begun = time.time() - 183
    assert compile_at_end({"test": "t", "compiling": "k[num_warps=1, num_stages=2]", "begun": begun}) == (
        ", while compiling k[num_warps=1, num_stages=2] (for 183 s by then)"
    )
    assert compile_at_end({"test": "t", "compiled": "k", "compile_s": 3.0}) == ""  # it had ended
    assert compile_at_end({"test": "t", "compiling": "k", "begun": "soon"}) == ", while compiling k"
    assert compile_at_end({"test": "t", "compiling": ["forged"]}) == ""
    assert compile_at_end(None) == ""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiling for a GPU needs one")
def test_on_a_gpu_a_check_out_of_time_while_compiling_names_the_kernel_and_its_options():
    said: list[str] = []

    async def go():
        async with Evaluator(EvalOptions(backend="gpu", timeout_s=20, spares=0)) as ev:
            return await ev.check(FIXTURES / "compiles_for_minutes.py", progress=said.append)

    r = asyncio.run(go())
    assert not r.ok and r.tests and r.tests[0].kind == "timeout", r.message
    assert "timed out after 20 s" in r.message and "in test_square_twice" in r.message, r.message
    assert ", while compiling slow_dot[num_warps=1, num_stages=" in r.message, r.message
    assert any(m.startswith("running test_square_twice: compiling slow_dot[num_warps=1") for m in said), said
