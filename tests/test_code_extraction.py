"""Extracting the Triton module (and the model's strategy) from LLM replies."""

import ast

from geak.agent.code_extraction import (
    MAX_STRATEGY_CHARS,
    NO_KERNEL,
    Extraction,
    extract_code,
    extract_strategy,
    strip_test_code,
)
from geak.evaluator.triton_file import SEPARATOR

IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n"

KERNEL = """@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

WRAPPER = """def add(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
"""

MODULE = f"{IMPORTS}\n\n{KERNEL}\n\n{WRAPPER}"


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def assert_code(result: Extraction, expected: str) -> None:
    assert result.reason is None, result.reason
    assert result.code is not None
    assert result.code.strip() == expected.strip()
    ast.parse(result.code)


def test_fenced_block_with_prose_around() -> None:
    reply = (
        "## Analysis\nThe kernel is memory bound; use 1024-element blocks.\n\n"
        f"{fenced(MODULE)}\n\nThis should reach peak bandwidth."
    )
    result = extract_code(reply, required_names=["add"], finish_reason="stop")
    assert_code(result, MODULE)
    assert not result.truncated
    assert result.prose.startswith("## Analysis\nThe kernel is memory bound")
    assert result.prose.endswith("This should reach peak bandwidth.")
    assert "tl.load" not in result.prose
    assert extract_strategy(reply) == "## Analysis\nThe kernel is memory bound; use 1024-element blocks."


def test_kernel_and_wrapper_split_over_blocks_are_joined_in_order() -> None:
    usage = fenced("x = torch.randn(10)\nprint(add(x, x))")
    reply = (
        f"Imports:\n{fenced(IMPORTS)}\nThe kernel:\n{fenced(KERNEL)}\n"
        f"And the wrapper:\n{fenced(WRAPPER, 'py')}\nUsage:\n{usage}\n{fenced('pip install triton', 'bash')}"
    )
    result = extract_code(reply, required_names=["add"])
    assert_code(result, f"{IMPORTS.strip()}\n\n{KERNEL.strip()}\n\n{WRAPPER.strip()}")
    assert result.prose == "Imports:\nThe kernel:\nAnd the wrapper:\nUsage:"


def test_split_blocks_are_joined_without_required_names() -> None:
    reply = f"{fenced(IMPORTS + KERNEL)}\nNow the launcher:\n{fenced(WRAPPER)}"
    assert_code(extract_code(reply), f"{IMPORTS}{KERNEL.strip()}\n\n{WRAPPER}")


def test_the_last_complete_version_wins() -> None:
    draft = MODULE.replace("BLOCK=1024", "BLOCK=256")
    reply = f"First try:\n{fenced(draft)}\nBetter:\n{fenced(MODULE)}"
    assert_code(extract_code(reply, required_names=["add"]), MODULE)


def test_a_later_kernel_only_block_supersedes_the_earlier_kernel() -> None:
    faster = KERNEL.replace("offs < n", "offs < n  # faster")
    reply = f"{fenced(MODULE)}\nActually, a better kernel:\n{fenced(faster)}"
    code = extract_code(reply, required_names=["add"]).code
    assert code is not None
    assert code.index("def add(") < code.index("# faster")


def test_untagged_fence() -> None:
    assert_code(extract_code(f"Here:\n{fenced(MODULE, '')}\n", required_names=["add"]), MODULE)


def test_tilde_fence_and_tag_with_attributes() -> None:
    reply = f"~~~python title=add.py\n{MODULE}~~~\n"
    assert_code(extract_code(reply), MODULE)


def test_non_python_blocks_are_ignored() -> None:
    reply = f"{fenced(MODULE, 'cpp')}\n{fenced('echo hi', 'bash')}"
    result = extract_code(reply)
    assert result.code is None
    assert result.reason == NO_KERNEL


def test_no_fence_but_whole_reply_is_python() -> None:
    result = extract_code(MODULE, required_names=["add", "add_kernel"])
    assert_code(result, MODULE)
    assert result.prose == ""
    assert extract_strategy(MODULE) == ""


def test_truncated_reply_with_unclosed_fence() -> None:
    cut = MODULE[: MODULE.index("    n = out.numel()")] + "    n = out.numel(\n"
    reply = f"Plan: fuse everything.\n```python\n{cut}"
    result = extract_code(reply, required_names=["add"], finish_reason="length")
    assert result.code is None
    assert result.truncated
    assert "truncated" in result.reason and "finish_reason=length" in result.reason
    assert result.prose == "Plan: fuse everything."


def test_unclosed_fence_alone_is_reported_as_truncated() -> None:
    reply = "```python\n" + MODULE + "def helper(x:\n"
    result = extract_code(reply, finish_reason="stop")
    assert result.code is None and result.truncated
    assert "never closes" in result.reason


def test_unclosed_fence_with_complete_code_is_accepted() -> None:
    result = extract_code("```python\n" + MODULE, required_names=["add"], finish_reason="stop")
    assert_code(result, MODULE)
    assert result.truncated


def test_truncated_before_the_wrapper_names_the_missing_function() -> None:
    reply = "```python\n" + IMPORTS + KERNEL
    result = extract_code(reply, required_names=["add"], finish_reason="length")
    assert result.code is None
    assert result.reason == "the code does not define the required `add` (the reply was truncated)"


def test_garbage() -> None:
    for reply in ("I cannot help with that.", "", "```\nnot python at all {{{\n```", fenced("x = 1")):
        result = extract_code(reply)
        assert result.code is None
        assert result.reason == NO_KERNEL


def test_syntax_error_in_complete_block() -> None:
    broken = MODULE.replace("return out", "return out)")
    result = extract_code(fenced(broken), finish_reason="stop")
    assert result.code is None and not result.truncated
    assert result.reason.startswith("the code does not parse:") and "line" in result.reason


def test_required_names_missing() -> None:
    result = extract_code(fenced(MODULE), required_names=["add", "add_backward", "Add"])
    assert result.code is None
    assert result.reason == "the code does not define the required `add_backward`, `Add`"
    assert not result.truncated


def test_tritonbench_separator_and_test_are_stripped() -> None:
    test = (
        "def test_add():\n    x = torch.randn(8)\n    return {'test_case_1': add(x, x)}\n\n\n"
        "result_gold = test_add()\n"
    )
    reply = fenced(f"{MODULE}\n{SEPARATOR}##\n{test}")
    assert_code(extract_code(reply, required_names=["add"]), MODULE)


def test_separator_ends_only_its_own_block() -> None:
    kernel_with_test = f"{IMPORTS}{KERNEL}\n{SEPARATOR}\ndef test_kernel():\n    pass\n"
    reply = f"{fenced(kernel_with_test)}\nWrapper:\n{fenced(WRAPPER)}"
    assert_code(extract_code(reply, required_names=["add"]), f"{IMPORTS}{KERNEL.strip()}\n\n{WRAPPER}")


def test_test_functions_calls_and_main_guard_are_stripped_keeping_other_lines() -> None:
    code = (
        f"{MODULE}\n\n"
        "@torch.no_grad()\ndef test_add():\n    x = torch.randn(8)\n"
        "    assert torch.allclose(add(x, x), 2 * x)\n\n\n"
        "def bench_add():\n    add(torch.randn(1 << 26), torch.randn(1 << 26))\n\n\n"
        "def helper_scale(x):  # kept\n    return 2 * x\n\n\n"
        "test_add()\nif __name__ == '__main__':\n    bench_add()\n"
    )
    expected = (
        MODULE + "\n" * 6 + "def helper_scale(x):  # kept\n    return 2 * x\n"
    )  # other lines as written
    assert strip_test_code(code) == expected
    result = extract_code(fenced(code), required_names=["add"])
    assert result.code == expected


def test_thinking_section_is_ignored() -> None:
    draft = fenced(MODULE.replace("BLOCK=1024", "BLOCK=64"))
    reply = (
        f"<think>\nLet me draft:\n{draft}\nHmm, bigger blocks.\n</think>\nUse 1024 blocks.\n{fenced(MODULE)}"
    )
    result = extract_code(reply)
    assert_code(result, MODULE)
    assert result.prose == "Use 1024 blocks."
    assert extract_strategy(reply) == "Use 1024 blocks."


def test_strategy_is_trimmed_and_bounded() -> None:
    long_text = "  Tile the reduction. " + "word " * 1000
    strategy = extract_strategy(long_text + "\n" + fenced(MODULE))
    assert strategy.startswith("Tile the reduction.")
    assert len(strategy) <= MAX_STRATEGY_CHARS + 4
    assert strategy.endswith(" ...")
    assert extract_strategy("Just prose, no code.\n\n\n\n\nMore.") == "Just prose, no code.\n\n\nMore."
    assert extract_strategy(fenced(MODULE)) == ""


def test_the_strategy_section_is_kept_whole_wherever_it_sits() -> None:
    analysis = "## Analysis\n" + "The grid is small. " * 200
    steps = "\n".join(f"{i}. Step {i} of the plan, with its reason." for i in range(1, 80))
    reply = f"{analysis}\n\n## Strategy\n{steps}\n\n## Risks\nNone."
    assert extract_strategy(reply) == f"## Strategy\n{steps}"
    assert extract_strategy(f"## Strategy\n1. Fuse.\n\n{fenced(MODULE)}") == "## Strategy\n1. Fuse."


def test_a_reply_cut_inside_thinking_keeps_nothing_of_it() -> None:
    cut = f"<think>\nA draft:\n{fenced(MODULE)}\nand then"
    result = extract_code(cut, finish_reason="length")
    assert result.code is None and result.truncated and "before any code" in result.reason
    assert extract_strategy(cut) == ""
    opened_in_the_prompt = f"A draft:\n{fenced(MODULE.replace('1024', '64'))}\n</think>\n{fenced(MODULE)}"
    assert_code(extract_code(opened_in_the_prompt), MODULE)
