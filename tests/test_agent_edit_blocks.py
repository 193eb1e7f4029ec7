"""Diff mode: the model edits a large file with SEARCH/REPLACE blocks (scripted server on loopback, the real openai
client, real checks in Triton's interpreter), and how blocks are applied."""

from __future__ import annotations

import asyncio

import pytest
from test_agent_loop import ORIGINAL, config, run_agent
from test_agent_model_replies import _run_on, prompts_sent

from geak.agent.edit_blocks import EditBlock, EditError, apply_blocks, extract_edited
from geak.agent.prompts import Context, generate
from geak.evaluator import parse_triton_file

KERNEL = ORIGINAL.read_text().split("def test_add")[0]


def edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def diff_config(llm, tmp_path, **overrides):
    return config(llm, tmp_path, diff_mode_min_chars=0, **overrides)


LATENCY = edit("def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:",
               "# latency: 0.5\ndef add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:")  # fmt: skip
WIDER = edit(
    "    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)",
    "    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)",
)


def test_a_multi_block_edit_is_applied_and_checked(scripted_llm, tmp_path):
    scripted_llm.reply(f"Wider blocks, fewer programs.\n\n```\n{WIDER}```\n\n```\n{LATENCY}```\n")
    result, _ = asyncio.run(run_agent(diff_config(scripted_llm, tmp_path, max_iteration=1)))
    [candidate] = result.candidates
    assert candidate.passed and result.best is candidate
    assert "BLOCK=1024)" in candidate.code and "# latency: 0.5\ndef add(" in candidate.code
    assert candidate.code.replace("1024", "256").replace("# latency: 0.5\n", "") == KERNEL.rstrip() + "\n"
    system, user = (m["content"] for m in scripted_llm.requests[0]["messages"])
    assert "## Reply format\nReply with edits to the code you were given, as SEARCH/REPLACE blocks" in system
    assert "Write ONE complete" not in system and user.endswith("then your edits as SEARCH/REPLACE blocks.")


def test_a_block_that_matches_nowhere_is_told_to_the_model_and_nothing_is_applied(scripted_llm, tmp_path):
    stale = edit("    y = tl.load(y_ptr + offs)\n    tl.store(out_ptr + offs, x + y)", "    pass")
    scripted_llm.reply(f"{WIDER}\n{stale}")
    scripted_llm.reply(f"Now against the code as it is.\n{WIDER}\n{LATENCY}")
    result, _ = asyncio.run(run_agent(diff_config(scripted_llm, tmp_path, max_iteration=2)))
    failed, fixed = result.candidates
    why = "edit block 2 of 2: its SEARCH section matches nowhere in the code as block 1 left it: its line 1"
    assert not failed.passed and failed.evaluation.stage == "reply" and not failed.code
    assert failed.note.startswith(why) and "`y = tl.load(y_ptr + offs)`" in failed.note
    second = prompts_sent(scripted_llm)[1]
    assert why in second and "## The code to start from" in second and "BLOCK=256)" in second  # the unedited code
    assert fixed.origin == "reflect" and fixed.passed and "BLOCK=1024)" in fixed.code


TWO_KERNELS = """import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def sub_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) - tl.load(y_ptr + offs, mask=mask), mask=mask)


def add_sub(x, y):
    a, s = torch.empty_like(x), torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 128),)
    add_kernel[grid](x, y, a, x.numel(), BLOCK=128)
    sub_kernel[grid](x, y, s, x.numel(), BLOCK=128)
    return a, s


def test_add_sub():
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    a, s = add_sub(x, y)
    torch.testing.assert_close(a, x + y)
    torch.testing.assert_close(s, x - y)
"""


def test_an_ambiguous_block_is_told_to_the_model(scripted_llm, tmp_path):
    original = tmp_path / "add_sub.py"
    original.write_text(TWO_KERNELS)
    both = "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n"
    scripted_llm.reply(edit(both, both + "  # bounds"))
    header = "def sub_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    scripted_llm.reply(edit(header + both, header + both + "  # bounds"))
    result, _ = asyncio.run(_run_on(original, diff_config(scripted_llm, tmp_path, max_iteration=2)))
    ambiguous, fixed = result.candidates
    why = "edit block 1 of 1: its SEARCH section matches 2 places (line 8, line 15); copy more unchanged lines"
    assert ambiguous.evaluation.stage == "reply" and ambiguous.note.startswith(why)
    assert why in prompts_sent(scripted_llm)[1]
    assert fixed.passed and fixed.code.count("  # bounds") == 1
    assert fixed.code.index("  # bounds") > fixed.code.index("def sub_kernel")


def test_a_truncated_edit_reply_is_asked_again_and_one_cut_twice_is_reported(scripted_llm, tmp_path):
    cut = f"{WIDER}<<<<<<< SEARCH\ndef add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n=======\n# lat"
    scripted_llm.reply(cut, finish_reason="length")
    scripted_llm.reply(f"{WIDER}{LATENCY}")  # asked again with twice the budget
    scripted_llm.reply("## Strategy\n1. Fewer programs.")
    scripted_llm.reply(cut, finish_reason="stop")  # cut without saying so: the block never ends
    result, _ = asyncio.run(run_agent(diff_config(scripted_llm, tmp_path, max_iteration=2, max_tokens=4000)))
    good, cut_short = result.candidates
    assert good.passed and result.best is good
    assert [r["max_tokens"] for r in scripted_llm.requests] == [4000, 8000, 4000, 4000]
    assert cut_short.origin == "optimize" and cut_short.evaluation.stage == "reply"
    assert cut_short.note == (
        "the reply was truncated inside the REPLACE section of edit block 2 (it never ends with `>>>>>>> REPLACE`), "
        "so its edits are incomplete"
    )


def test_small_files_get_whole_modules_by_default(scripted_llm, tmp_path):
    ctx = Context(parse_triton_file(ORIGINAL.read_text(), str(ORIGINAL)), "a GPU", "", False)
    assert "SEARCH/REPLACE" not in "".join(m["content"] for m in generate(ctx, KERNEL, None))
    assert not config(scripted_llm, tmp_path).diff_mode_applies(len(KERNEL))
    assert config(scripted_llm, tmp_path).diff_mode_applies(8000)
    assert not config(scripted_llm, tmp_path, diff_mode_min_chars=None).diff_mode_applies(10**6)


F = "def f(x):\n    if x:\n        return 1\n    return 2\n"
CODE = F + "\n\ndef g(x):\n    if x:\n        return 1\n    return 3\n"


@pytest.mark.parametrize(
    ("search", "replace", "expected_g"),
    [
        ("def g(x):\n    if x:\n        return 1", "def g(x):\n    if x:\n        return 10", "return 10"),
        ("def g(x):   \n    if x:\t\n", "def g(y):\n    if y:", "def g(y):\n    if y:\n"),  # trailing blanks
        ("\n\ndef g(x):", "\n\n# g\ndef g(x):", "    return 2\n\n\n# g\ndef g(x):"),  # blank lines around
        ("if x:\n    return 1\nreturn 3", "if x:\n    return 5\nreturn 3", "        return 5\n    return 3"),  # indent
        (" 8|     if x:\n 9|         return 1", " 8|     if x:\n 9|         return 7", "    if x:\n        return 7\n"),
    ],
)
def test_blocks_match_exactly_then_tolerantly(search, replace, expected_g):
    edited = apply_blocks(CODE, [EditBlock(1, search.split("\n"), replace.split("\n"))])
    assert edited.startswith(F) and expected_g in edited  # f untouched


def test_blocks_that_cannot_apply_name_the_block_and_why():
    with pytest.raises(EditError, match=r"edit block 1 of 2: its SEARCH section matches 2 places \(line 2, line 8\)"):
        apply_blocks(CODE, [EditBlock(1, ["    if x:"], ["    if y:"]), EditBlock(2, ["x"], ["y"])])
    with pytest.raises(EditError, match="not one after another as written"):
        apply_blocks(CODE, [EditBlock(1, ["    return 2", "    return 3"], [])])
    with pytest.raises(EditError, match="its SEARCH section is empty"):
        apply_blocks(CODE, [EditBlock(1, ["", "  "], ["x = 1"])])


def test_a_reply_without_blocks_is_read_as_a_whole_module_and_a_broken_edit_is_no_candidate():
    whole = extract_edited(f"```python\n{KERNEL}```", "unused", required_names=["add"])
    assert whole.code is not None and "def add(" in whole.code
    broken = extract_edited(edit("    return out", "    return out +"), KERNEL, required_names=["add"])
    assert broken.code is None and broken.reason.startswith("the code after the edits does not parse")
    renamed = extract_edited(edit("def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:", "def plus(x, y):"),
                             KERNEL, required_names=["add"])  # fmt: skip
    assert renamed.reason == "the code after the edits does not define the required `add`"
