"""Liger-Kernel's op modules judged by Liger's own tests, as `geak check MODULE --against-self` judges them, on
Triton's CPU interpreter: the tests are found through the imports, and two cases of each module's own test file
(one fp32, one bf16; the whole files take minutes each on the interpreter) pass against the module itself, its
captured kernel calls replayed on fresh and probe inputs; a wrong softmax in the module's place fails them. Needs
the shared copy (`../shared/repos/liger-kernel`, or GEAK_LIGER) and the `repos` extra (transformers: Liger's
test/utils.py and conftest import it)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geak.evaluator import CheckResult, EvalOptions, Evaluator, module_tests

LIGER = Path(os.environ.get("GEAK_LIGER", Path(__file__).resolve().parents[2] / "shared" / "repos" / "liger-kernel"))
OPS = LIGER / "src" / "liger_kernel" / "ops"

pytestmark = [
    pytest.mark.skipif(not OPS.is_dir(), reason=f"needs Liger-Kernel at {LIGER} (or GEAK_LIGER)"),
    pytest.mark.skipif(
        importlib.util.find_spec("transformers") is None,
        reason="Liger's tests import transformers: pip install -e '.[repos]' (scripts/setup.sh does)",
    ),
]

# module -> (its own test file, the cases run here: fp32 and bf16 at the file's smallest size)
CASES = {
    "rms_norm": (
        "test/transformers/test_rms_norm.py",
        ("test_correctness_functional[True-LlamaRMSNorm-0.0-llama-dtype0-0.0001-1e-06-2-2-8]",
         "test_correctness_functional[True-GemmaRMSNorm-1.0-gemma-dtype1-0.2-0.02-2-2-8]"),
    ),
    "swiglu": (
        "test/transformers/test_swiglu.py",
        ("test_correctness_functional[dtype0-1.0-1e-05-2-8-8]",
         "test_correctness_silumul_with_multipliers[dtype1-0.1-0.01-0.7-1.3-2-8-8]"),
    ),
    "softmax": (
        "test/transformers/test_softmax.py",
        ("test_liger_softmax[dtype0-1e-05-1e-05-shape0]", "test_liger_softmax_functional[dtype1-0.05-0.05-shape3]"),
    ),
    "layer_norm": (
        "test/transformers/test_layer_norm.py",
        ("test_liger_layer_norm[dtype0-1e-05-1e-05-2-8-64]",
         "test_liger_layer_norm_functional[dtype1-0.02-0.02-2-8-64]"),
    ),
    "geglu": (
        "test/transformers/test_geglu.py",
        ("test_correctness_functional[dtype0-1e-05-1e-05-2-2-8]",
         "test_correctness_functional[dtype1-0.01-0.01-2-2-8]"),
    ),
}  # fmt: skip
RIGHT, WRONG = "    y = e / d\n", "    y = e / (d + 1e-2)\n"  # softmax.py's single-block forward, off by up to 1%


def _target(name: str):
    file, cases = CASES[name]
    return module_tests(OPS / f"{name}.py", [f"{LIGER / file}::{case}" for case in cases])


@pytest.fixture(scope="module")
def verdicts() -> dict[str, CheckResult]:
    """Each module against itself with its two cases, and the wrong softmax against the module, by one evaluator
    (two warm workers) that may read Liger."""

    async def go() -> dict[str, CheckResult]:
        options = EvalOptions(backend="interpreter", spares=0, max_concurrent=2, compile_cache=None, timeout_s=280)
        softmax = (OPS / "softmax.py").read_text()
        assert softmax.count(RIGHT) == 1, "softmax.py changed: choose another line to get wrong"
        async with Evaluator(options, readable=(str(LIGER),)) as evaluator:
            checks = {name: evaluator.check_module(_target(name), against=OPS / f"{name}.py") for name in CASES}
            checks["wrong softmax"] = evaluator.check_module(
                _target("softmax"), source=softmax.replace(RIGHT, WRONG), against=OPS / "softmax.py"
            )
            found = await asyncio.gather(*checks.values())
            return dict(zip(checks, found, strict=True))

    return asyncio.run(go())


@pytest.mark.parametrize("name", CASES)
def test_the_module_s_own_tests_are_found_through_its_imports(name):
    file, _ = CASES[name]
    found = module_tests(OPS / f"{name}.py")
    assert found.source == "imports" and found.module == f"liger_kernel.ops.{name}"
    own = [t for t in found.tests if t.node.startswith(f"{file}::")]
    assert own and all(f"liger_kernel.ops.{name}" in t.why for t in own), found.describe()


@pytest.mark.parametrize("name", CASES)
def test_the_module_passes_its_own_tests_against_itself(verdicts, name):
    result = verdicts[name]
    assert result.ok and result.not_checkable is None, result.message + "\n" + result.output_tail
    file, cases = CASES[name]
    assert sorted(t.name for t in result.tests) == sorted(f"{file}::{case}" for case in cases)
    assert all(t.ok and sum(t.launches.values()) > 0 for t in result.tests), result.tests  # its kernels ran
    assert result.comparison is not None and result.comparison.ok and result.comparison.fresh_calls > 0


def test_a_wrong_softmax_fails_liger_s_tests(verdicts):
    result = verdicts["wrong softmax"]
    assert not result.ok and result.not_checkable is None, result.message
    failed = [t.name for t in result.tests if not t.ok]
    assert "test/transformers/test_softmax.py::test_liger_softmax[dtype0-1e-05-1e-05-shape0]" in failed, result.message


def test_geak_check_run_inside_liger_with_relative_paths():
    """`cd liger-kernel && geak check src/...`: the repository is the working directory, which jobs still read."""
    case = "test/transformers/test_softmax.py::test_liger_softmax[dtype0-1e-05-1e-05-shape0]"
    p = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "check", "src/liger_kernel/ops/softmax.py", "--tests", case,
         "--against-self", "--backend", "interpreter", "--json"],
        capture_output=True, text=True, timeout=280, cwd=LIGER,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr + p.stdout
    assert [t["name"] for t in json.loads(p.stdout)["tests"]] == [case]
