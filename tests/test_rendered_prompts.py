"""The rendered prompts in docs/agent.md are generated, never hand-edited: they are what
`benchmarks/render_prompts.py` renders from the suite file with the prompts as they are now."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "render_prompts.py"


def _script():
    spec = importlib.util.spec_from_file_location("render_prompts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_agent_md_shows_the_prompts_the_script_renders():
    script = _script()
    if not (script.DEFAULT_SUITES / script.SUITE_FILE).is_file():
        pytest.skip(f"the suites are not at {script.DEFAULT_SUITES}")
    doc = (ROOT / "docs" / "agent.md").read_text()
    assert doc.count(script.BEGIN) == 1 and doc.count(script.END) == 1
    assert doc == script.with_rendered(doc, script.rendered(script.DEFAULT_SUITES)), (
        "docs/agent.md's rendered prompts are stale: run .venv/bin/python benchmarks/render_prompts.py --write "
        "docs/agent.md"
    )


def test_every_kind_is_shown_and_long_parts_are_marked():
    script = _script()
    if not (script.DEFAULT_SUITES / script.SUITE_FILE).is_file():
        pytest.skip(f"the suites are not at {script.DEFAULT_SUITES}")
    block = script.rendered(script.DEFAULT_SUITES)
    for kind in ("#### generate", "#### optimizer", "#### implement", "#### reflect", "#### a reply without usable"):
        assert kind in block
    assert "[... " in block and " characters of the test ...]" in block and " characters of knowledge ...]" in block


def test_a_short_block_is_left_whole_and_a_long_one_cut_with_its_size():
    script = _script()
    short = "## Current code\n```python\nx = 1\n```"
    assert script.shortened(short) == short
    long_test = "## The unit test\n```python\n" + "\n".join(f"x{i} = {i}" for i in range(400)) + "\n```"
    cut = script.shortened(long_test)
    body = long_test.split("\n", 2)[2].rsplit("\n", 1)[0]
    shown = cut.split("\n", 2)[2].split("\n[... ")[0]
    assert body.startswith(shown) and f"[... {len(body) - len(shown)} characters of the test ...]\n```" in cut
