"""The check cascade on CPU (Triton's interpreter): both formats, every stage's failures, the exploits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fixture_check import check_fixture

from geak.evaluator.api import BadInput, EvalOptions, Evaluator

FIXTURES = Path(__file__).parent / "fixtures"
REF = FIXTURES / "add_native.py"
TB_REF = FIXTURES / "add_tritonbench.py"


def check(name: str, against: Path | None = None, timeout_s: float = 60, source: str | None = None):
    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=timeout_s, spares=0)) as ev:
            return await ev.check(FIXTURES / name if source is None else name, against=against, source=source)

    return asyncio.run(go())


def test_native_passes_with_interpreter_caveat():
    r = check("add_native.py")
    assert r.ok and r.stage == "exec" and r.backend == "interpreter"
    assert r.tests[0].launches == {"add_kernel": 1}
    assert "interpreter" in r.caveats[0]


def test_tritonbench_alone_only_reaches_call_and_says_so():
    r = check("add_tritonbench.py")
    assert r.ok and r.stage == "call"
    assert any("assert nothing" in c for c in r.caveats)
    assert "assert nothing" in r.summary  # said once where it is shown (the CLI, the hover): not again as a note
    assert not any("assert nothing" in c for c in r.caveats_beyond_summary())


def test_candidate_against_reference_compares_test_outputs_and_fresh_inputs():
    r = check("add_tritonbench.py", against=REF)
    assert r.ok and r.stage == "exec"
    assert r.comparison.compared_outputs == 1 and r.comparison.fresh_calls == 1


def test_syntax_error_is_a_parse_failure_at_its_line():
    r = check("syntax_error.py")
    assert not r.ok and r.stage == "parse"
    assert r.diagnostics[0].line == 11


def test_compile_error_points_at_the_kernel_line():
    r = check("compile_error.py")
    assert not r.ok and r.stage == "call"
    d = r.diagnostics[0]
    assert d.line == 10 and "power of 2" in d.message


def test_raising_test_is_a_call_failure_at_the_raise():
    r = check("raising_test.py")
    assert not r.ok and r.stage == "call" and r.tests[0].kind == "error"
    assert r.diagnostics[0].line == 20 and "unsupported size" in r.diagnostics[0].message


def test_an_assert_in_the_code_of_a_tritonbench_file_means_it_did_not_run():
    """GEAK-eval's call accuracy: a TritonBench-format test returns its outputs and checks nothing, so an exception
    of the composed file, an `assert` in the candidate's wrapper too, is a call failure, not a wrong result."""
    from geak.agent.evaluation import from_check

    kernel = TB_REF.read_text().split("#" * 146)[0]
    candidate = kernel.replace("    out = torch.empty_like(x)\n", "    assert x.numel() < 1000, 'too big'\n"
                               "    out = torch.empty_like(x)\n")  # fmt: skip
    r = check("candidate.py", against=TB_REF, source=candidate)
    assert not r.ok and r.stage == "call" and r.tests[0].kind == "error" and "too big" in r.tests[0].message
    assert not from_check(r).called


def test_wrong_output_fails_exec_at_the_assert():
    r = check("wrong_output.py")
    assert not r.ok and r.stage == "exec" and r.tests[0].kind == "assert"
    assert r.diagnostics[0].line == 29


def test_unwritten_output_is_caught_by_poisoning():
    r = check("unwritten_output.py", against=TB_REF)
    assert not r.ok and r.stage == "exec"
    assert "NaN mismatch: 7 NaN" in r.message


def test_hard_coded_output_is_caught_by_fresh_inputs():
    r = check("hardcoded.py", against=REF)
    assert r.tests[0].ok  # the given test is fooled...
    assert not r.ok and "fresh inputs" in r.message  # ...fresh inputs are not


def test_mutated_input_is_caught():
    r = check("mutates_input.py", against=TB_REF)
    assert not r.ok and r.stage == "exec"
    assert any("['args'][1]" in m.where for m in r.comparison.mismatches)


def test_torch_fallback_is_caught():
    r = check("torch_fallback.py", against=TB_REF)
    assert not r.ok and "no Triton kernel was launched" in r.message


def test_hang_is_killed_at_the_time_limit():
    r = check("hang.py", timeout_s=6)
    assert not r.ok and r.stage == "call" and r.tests[0].kind == "timeout"
    assert "timed out after 6 s" in r.message and "test_add" in r.message


def test_a_time_out_while_compiling_names_the_compile():
    said: list[str] = []
    r = check_fixture("compiling_for_ever.py", None, timeout_s=8, progress=said.append)
    assert not r.ok and r.stage == "call" and r.tests[0].kind == "timeout", r.message
    assert "timed out after 8 s" in r.message and "in test_add" in r.message, r.message
    assert ", while compiling add_kernel[num_warps=1, num_stages=3] (for " in r.message, r.message
    assert "running test_add: compiling add_kernel[num_warps=1, num_stages=3]" in said, said


def test_a_test_that_compiles_a_while_passes_with_its_compile_said():
    said: list[str] = []
    r = check_fixture("compiles_a_while.py", None, timeout_s=60, progress=said.append)
    assert r.ok, r.message
    assert "running test_add: compiling add_kernel[num_warps=1, num_stages=3]" in said, said
    assert any(m.startswith("running test_add: compiled add_kernel[num_warps=1, num_stages=3] in ") for m in said)
    assert not [m for m in said if "num_warps=4" in m], said  # too brief to be said


def test_crash_is_a_failed_verdict():
    r = check("crash.py")
    assert not r.ok and r.tests[0].kind == "crash" and "SIGSEGV" in r.message


def test_exit_zero_without_result_is_a_failure():
    r = check("exit_zero.py")
    assert not r.ok and "without reporting a result" in r.message


def test_source_text_for_an_unsaved_buffer():
    text = (FIXTURES / "wrong_output.py").read_text()
    r = check("buffer.py", source=text)
    assert not r.ok and r.file == "buffer.py" and r.diagnostics[0].line == 29


@pytest.mark.parametrize("name", ["no_kernel.py", "no_test.py", "missing.py"])
def test_bad_input(name):
    with pytest.raises(BadInput):
        check(name)


def test_reference_that_fails_its_own_test_is_bad_input():
    with pytest.raises(BadInput, match="does not pass its own test"):
        check("add_native.py", against=FIXTURES / "wrong_output.py")


def test_a_reference_run_ends_at_the_first_test_that_refuses_it(tmp_path):
    """Any failed test refuses a reference, so its run ends there and the rest are reported skipped (ROCm `gemm.py`
    on NVIDIA ran 484 raising tests, twice). With poisoning only a test that raised ends it, since a wrong result
    there does not send the reference to run again unpoisoned, and a later raise does."""
    raises = "\n\ndef test_raises():\n    raise RuntimeError('no such config')\n"
    later = "\n\ndef test_later():\n    return test_add()\n"
    wrong = "\n\ndef test_wrong():\n    assert False, 'wrong'\n"
    for name, body, ran in (
        ("raises_first.py", raises + later, ["test_add", "test_raises"]),
        ("wrong_then_raises.py", wrong + raises + later, ["test_add", "test_wrong", "test_raises"]),
    ):
        reference = tmp_path / name
        reference.write_text(REF.read_text() + body)
        with pytest.raises(BadInput, match="does not pass its own test") as caught:
            check(str(REF), against=reference)
        tests = caught.value.verdict.tests
        assert [t.name for t in tests if t.kind != "skipped"] == ran, tests
        skipped = [t for t in tests if t.kind == "skipped"]
        assert [t.name for t in skipped] == ["test_later"], tests
        assert "not run: the run ended at test_raises, which failed (error)" in skipped[0].message


def test_a_reference_whose_kernel_does_not_compile_is_refused_without_running_again_unpoisoned(tmp_path):
    """A reference's test that raises runs again without poisoned allocations, unless what it raised is Triton's
    for a kernel that does not compile for the device: poisoning cannot cause that (TritonBench-revised
    `triton_linear_activation.py` on an H200 failed in ptxas for 88 configs, about 100 s a run, and ran twice)."""
    runs = {}
    for name, error in (("ptxas.py", "triton.runtime.errors.PTXASError('ptxas fatal')"), ("other.py", "KeyError('x')")):
        reference = tmp_path / name
        reference.write_text(REF.read_text() + f"\n\ndef test_raises():\n    import triton\n    raise {error}\n")
        said: list[str] = []

        async def go(reference=reference, said=said):
            async with Evaluator(EvalOptions(backend="interpreter", timeout_s=60, spares=0)) as ev:
                await ev.check(REF, against=reference, progress=said.append)

        with pytest.raises(BadInput, match="does not pass its own test"):
            asyncio.run(go())
        runs[name] = sum(m.startswith("running the reference") for m in said)
    assert runs == {"ptxas.py": 1, "other.py": 2}, runs


def test_a_pytest_style_reference_run_ends_at_its_first_raising_case(tmp_path):
    reference = tmp_path / "pytest_raises.py"
    text = (FIXTURES / "pytest_style.py").read_text()
    raising = "    x, y = inputs\n    raise KeyError('waves_per_eu')\n"
    reference.write_text(text.replace("    x, y = inputs\n", raising, 1))
    with pytest.raises(BadInput, match="does not pass its own test") as caught:
        check(str(FIXTURES / "pytest_style.py"), against=reference)
    tests = caught.value.verdict.tests
    failed = [t for t in tests if t.kind not in ("skipped", "pass")]
    assert len(failed) == 1 and failed[0].name.startswith("test_add["), tests
    assert sum(t.kind == "skipped" and "the run ended at test_add[" in t.message for t in tests) >= 6, tests


def test_bench_needs_a_gpu():
    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", spares=0)) as ev:
            return await ev.bench(REF)

    r = asyncio.run(go())
    assert not r.ok and "timing needs a GPU" in r.message and r.check.ok


def test_outputs_are_weighed_side_by_side_and_said_in_the_tests_order(tmp_path, monkeypatch):
    """The caller weighs several outputs at once (``compare.side_by_side``); the verdict lists what differs in the
    order of the tests, then the probes, as one after the other would."""
    import threading
    import time

    from geak.evaluator import check as check_module

    tests = "".join(
        f"\n\ndef test_add_{n}():\n    torch.manual_seed({n})\n    x = torch.randn({n}, device='cuda')\n"
        f"    return add(x, x)\n"
        for n in (300, 1300, 2300, 3300)
    )
    kernel = REF.read_text().split("\ndef test_add():")[0]
    reference = tmp_path / "reference.py"
    reference.write_text(kernel + tests)
    wrong = kernel.replace("tl.store(out_ptr + offs, x + y", "tl.store(out_ptr + offs, x + y + (offs >= 1000)")
    active, most = [0], [0]
    lock = threading.Lock()
    real_load = check_module.load_output

    def slow_load(path):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.2)
        with lock:
            active[0] -= 1
        return real_load(path)

    monkeypatch.setattr(check_module, "load_output", slow_load)
    r = check(str(tmp_path / "candidate.py"), against=reference, source=wrong + tests)
    assert not r.ok and r.stage == "exec"
    tests_said = [m.where.split(" → ")[0] for m in r.comparison.mismatches if " → " in m.where]
    assert tests_said == ["test_add_1300", "test_add_2300", "test_add_3300"]
    last_test = max(i for i, m in enumerate(r.comparison.mismatches) if " → " in m.where)
    assert all(" → " not in m.where for m in r.comparison.mismatches[last_test + 1 :])
    assert len(r.comparison.mismatches) > 3  # the probes at other inputs differ too
    assert most[0] > 1
