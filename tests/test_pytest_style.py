"""Pytest-style tests run by pytest inside the worker (CPU, Triton's interpreter): parametrize, fixtures, marks and
classes; the ROCm benchmark's `result_gold` outputs; the `geak_eval` benchmark shim; test_performance cases as
bench calls; real ROCm-benchmark files."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.job import rocm_bench
from geak.evaluator.shared.test_ids import sanitized_test_id
from geak.evaluator.triton_file import parse_triton_file, read_triton_file

FIXTURES = Path(__file__).parent / "fixtures"
PYTEST_STYLE = FIXTURES / "pytest_style.py"
ROCM = FIXTURES / "rocm_scale_add.py"
ROCM_OFF = FIXTURES / "rocm_scale_add_off.py"
ROCM_SUITE = Path(__file__).resolve().parents[1] / ".." / "shared" / "suites" / "rocm" / "ROCm_v1"


def checks(*runs: tuple[Path, Path | None] | tuple[Path, Path | None, str]):
    """Check (file, against[, source]) runs in one Evaluator (the reference runs once)."""

    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0)) as ev:
            results = []
            for path, against, *source in runs:
                text = source[0] if source else None
                results.append(await ev.check(path if text is None else "<candidate>", against=against, source=text))
            return results

    return asyncio.run(go())


def check(path: Path, against: Path | None = None):
    return checks((path, against))[0]


@pytest.fixture(scope="module")
def pytest_style_runs():
    broken = PYTEST_STYLE.read_text().replace("tl.store(out_ptr + offs, x + y", "tl.store(out_ptr + offs, x - y")
    runs = checks((PYTEST_STYLE, None), (PYTEST_STYLE, PYTEST_STYLE), (PYTEST_STYLE, PYTEST_STYLE, broken))
    alone, itself, wrong = runs
    return {"alone": alone, "itself": itself, "wrong": wrong}


@pytest.fixture(scope="module")
def rocm_runs():
    itself, off_alone, off = checks((ROCM, ROCM), (ROCM_OFF, None), (ROCM_OFF, ROCM))
    return {"itself": itself, "off_alone": off_alone, "off": off}


# ----------------------------------------------------------------------------------------- the file contract


def test_which_files_run_under_pytest():
    t = read_triton_file(PYTEST_STYLE)
    assert t.test_style == "pytest" and t.output_source == "return"
    assert "TestAddClass::test_sizes" in t.tests and "test_add" in t.tests
    assert t.wrappers == ("add",)  # fixtures are test code, never kernel code a candidate may rewrite
    assert "def shared_ones" in t.test_section and "def shared_ones" not in t.kernel_section
    assert "class TestAddClass" in t.test_section
    rocm = read_triton_file(ROCM)
    assert rocm.format == "tritonbench" and rocm.test_style == "pytest" and rocm.output_source == "result_gold"
    assert rocm.tests == ("test_scale_add",)  # GEAK-eval's result-saving hooks are not tests
    assert rocm.benches == ("test_performance",) and rocm.runs_under_pytest("test_performance")
    native = read_triton_file(FIXTURES / "add_native.py")
    assert native.test_style == "call" and not native.runs_under_pytest("bench_add")


def test_parameters_with_defaults_keep_the_direct_call():
    kernel = "import triton\n@triton.jit\ndef k(x):\n    pass\n"
    assert parse_triton_file(kernel + "def test_a(M=32, N=64):\n    return M\n").test_style == "call"
    assert parse_triton_file(kernel + "def test_a(M, N=64):\n    return M\n").test_style == "pytest"
    tritonbench = kernel + "#" * 146 + "\n"
    assert parse_triton_file(tritonbench + "def test_a():\n    return 1\n").test_style == "call"
    assert parse_triton_file(tritonbench + "import pytest\ndef test_a():\n    return 1\n").test_style == "pytest"


def test_sanitized_ids_match_the_rocm_benchmark():
    assert sanitized_test_id("test_softmax[1823-781]") == "test_softmax_1823_781"
    assert sanitized_test_id("TestK::test_y[a-b]") == "TestK_test_y_a_b"


# ----------------------------------------------------------------------------------------- pytest features


def test_parametrize_fixtures_marks_and_classes(pytest_style_runs):
    r = pytest_style_runs["alone"]
    kinds = {t.name: t.kind for t in r.tests}
    assert r.ok and r.stage == "exec", r.message
    assert kinds == {
        "test_add[1.0-100]": "pass",
        "test_add[1.0-1000]": "pass",
        "test_add[2.0-100]": "pass",
        "test_add[2.0-1000]": "pass",
        "test_module_fixture_is_shared": "pass",
        "test_module_fixture_set_up_once": "pass",  # the module-scoped fixture ran once for both tests
        "test_tmp_path_and_monkeypatch": "pass",
        "test_skipped": "skipped",
        "test_skipif": "skipped",
        "test_expected_failure": "xfail",
        "TestAddClass::test_sizes[7]": "pass",
        "TestAddClass::test_sizes[129]": "pass",
    }
    by_name = {t.name: t for t in r.tests}
    assert by_name["test_add[2.0-100]"].launches == {"add_kernel": 1}
    assert by_name["test_skipif"].message == "skipped: condition holds" and by_name["test_skipif"].ok
    assert "known bug" in by_name["test_expected_failure"].message
    assert r.message.startswith("9 test(s) (2 skipped, 1 xfail) passed")


def test_against_itself_compares_each_case_by_its_id(pytest_style_runs):
    r = pytest_style_runs["itself"]
    assert r.ok, r.message
    assert r.comparison.compared_outputs == 9  # every case that ran; skipped and xfail ones have no output
    assert r.comparison.fresh_calls >= 3


def test_a_failing_case_fails_with_its_id_and_line(pytest_style_runs):
    r = pytest_style_runs["wrong"]
    failed = [t for t in r.tests if not t.ok]
    assert not r.ok and r.stage == "exec"
    assert failed[0].name == "test_add[1.0-100]" and failed[0].kind == "assert"
    test_add_line = PYTEST_STYLE.read_text().splitlines().index("def test_add(inputs, scale, request):") + 1
    assert any(d.line in range(test_add_line, test_add_line + 5) for d in r.diagnostics)


def test_all_cases_skipped_is_not_a_pass(tmp_path):
    path = tmp_path / "all_skipped.py"
    kernel = PYTEST_STYLE.read_text().split("SETUPS = []")[0]
    path.write_text(kernel + "@pytest.mark.skip(reason='later')\ndef test_a():\n    pass\n")
    r = check(path)
    assert not r.ok and r.message.startswith("no test ran: test_a") and r.tests[0].kind == "skipped"


# ----------------------------------------------------------------------------------------- ROCm benchmark layout


def test_rocm_result_gold_entries_are_the_outputs(rocm_runs):
    r = rocm_runs["itself"]
    assert r.ok, r.message
    assert [t.name for t in r.tests if t.kind == "pass"] == ["test_scale_add[1000-0.5]", "test_scale_add[4096--2.0]"]
    assert [t.kind for t in r.tests if t.name.startswith("test_performance")] == ["benchmark", "benchmark"]
    assert "2 benchmark(s) left to geak bench" in r.message
    assert r.comparison.compared_outputs == 2 and r.comparison.fresh_calls == 2


def test_rocm_wrong_kernel_within_the_tests_own_tolerance_is_caught_by_result_gold(rocm_runs):
    assert rocm_runs["off_alone"].ok  # its own loose assert_close passes
    r = rocm_runs["off"]
    assert not r.ok and r.stage == "exec"
    where = [m.where for m in r.comparison.mismatches]
    assert "test_scale_add[1000-0.5] → result_gold['test_scale_add_1000_0.5']" in where


def test_geak_check_cli_on_rocm_files():
    def geak(*args):
        return subprocess.run(
            [sys.executable, "-m", "geak.server.cli", "check", *map(str, args), "--backend", "interpreter"],
            capture_output=True,
            text=True,
            timeout=300,
        )

    same = geak(ROCM, "--against", ROCM)
    assert same.returncode == 0, same.stdout + same.stderr
    off = geak(ROCM_OFF, "--against", ROCM)
    assert off.returncode == 1 and "result_gold" in off.stdout


# ----------------------------------------------------------------------------------------- the geak_eval shim

CAPTURE = """
import json, sys
from pathlib import Path
from geak.evaluator.job import bench_capture, rocm_bench, sandbox
from geak.evaluator.bench import bench_job
from geak.evaluator.options import EvalOptions
from geak.evaluator.triton_file import read_triton_file
from geak.evaluator.shared.protocol import job_from_dict
from geak.evaluator.shared.sequential import RoundPlan

sandbox.prepare_zygote("interpreter")
t = read_triton_file(sys.argv[1])
scratch = Path(sys.argv[2])
path = scratch / "candidate.py"
path.write_text(t.compose().text)
spec = {"label": "candidate", "path": str(path), "module_name": "geak_capture", "wrappers": list(t.wrappers),
        "kernels": [k.name for k in t.kernels]}
job = job_from_dict(bench_job([spec], t, EvalOptions(), scratch / "outputs", RoundPlan.fixed(6)))
rocm_bench.install(scratch, [str(path)])
captured = bench_capture.capture_bench_calls(job, spec, lambda event: None)
calls = [{"signature": c.signature, "flops": c.flops} for c in captured["calls"]]
for c in captured["calls"]:
    captured["recorder"].originals[c.wrapper](*c.args, **c.kwargs)  # each can be called again with its arguments
from geak_eval.perf.ROCm.performance_utils_pytest import PYTEST_BENCHMARK_RESULTS, save_all_benchmark_results
records = {k: len(v) for k, v in PYTEST_BENCHMARK_RESULTS.items()}
save_all_benchmark_results(sys.argv[3])
print(json.dumps({"job": job.pytest_functions, "calls": calls, "records": records}))
"""


def test_test_performance_cases_become_bench_calls(tmp_path):
    scratch, elsewhere = tmp_path / "job", tmp_path / "elsewhere"
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", CAPTURE, str(ROCM), str(scratch), str(elsewhere)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["job"] == ["test_performance"]
    # each benchmarked lambda's wrapper call, with the file's FLOP count; the lambda that launches the kernel
    # inline has no call to time
    assert report["calls"] == [
        {"signature": "scale_add(f32[4096], f32[4096], 0.5)", "flops": 2 * 4096},
        {"signature": "scale_add(f32[65536], f32[65536], 0.5)", "flops": 2 << 16},
    ]
    assert report["records"] == {"scale_add_perf": 2, "scale_add_kernel_perf": 2}
    # results asked for outside the job's directory land inside it
    assert not elsewhere.exists()
    assert sorted(p.name for p in (scratch / "perf").iterdir()) == ["scale_add_kernel_perf.json", "scale_add_perf.json"]


def test_shim_is_not_importable_in_the_callers_process():
    assert importlib.util.find_spec("geak_eval") is None
    assert str(rocm_bench.SHIM_DIR) not in sys.path
    assert (rocm_bench.SHIM_DIR / "geak_eval" / "perf" / "ROCm" / "performance_utils_pytest.py").is_file()


# ----------------------------------------------------------------------------------------- real ROCm files

# ROCm-benchmark files that Triton's interpreter runs in seconds (others need block pointers, a GPU target or minutes).
INTERPRETABLE = ("test_batched_vecmat.py", "test_triton_swizzle2d.py")


@pytest.mark.skipif(not ROCM_SUITE.is_dir(), reason="../shared/suites (GEAK-eval's ROCm benchmark) is absent")
@pytest.mark.parametrize("name", INTERPRETABLE)
def test_real_rocm_files_pass_against_themselves(name):
    path = ROCM_SUITE / name
    r = check(path, path)
    assert r.ok and r.stage == "exec", r.message
    assert r.comparison.compared_outputs >= 1
    assert any(t.kind == "benchmark" for t in r.tests) and all(t.ok for t in r.tests)
