"""The vendor's profiler over a file's kernels: Nsight Compute's report read back (a real capture of `ncu --csv` on an
H200), each launch matched with the kernel the target launched, a forged report bounded by the caller, the figures
in the words the hover and the optimizer's prompt use, and, on a GPU with Nsight Compute, a real profile job in the
sandbox."""

from __future__ import annotations

import asyncio
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from geak.evaluator import slowness
from geak.evaluator.api import Evaluator
from geak.evaluator.job import kernel_profile
from geak.evaluator.pool import JobOutcome
from geak.evaluator.profile import profile_result
from geak.evaluator.results import CompiledKernelFacts, ProfileResult
from geak.evaluator.triton_file import read_triton_file

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).parents[1] / "snippets" / "kernels"
# `ncu --profile-from-start off --clock-control none --metrics ... --csv --log-file` of two calls on an H200: a
# 2^24-element add, then a 2048^3 fp16 matmul, a torch add and a smaller add (the job filters torch's kernels out)
CAPTURE = (FIXTURES / "ncu_details.csv").read_text()


def test_nsight_computes_report_is_read_launch_by_launch_after_its_own_lines():
    rows = kernel_profile.profiled_launches(CAPTURE)
    assert [r["kernel"] for r in rows][:2] == ["add_kernel", "mm_kernel"] and rows[-1]["kernel"] == "add_kernel"
    first = rows[0]
    assert first["achieved_occupancy_pct"] == pytest.approx(81.98)
    assert first["theoretical_occupancy_pct"] == 100.0
    assert first["dram_pct"] == pytest.approx(84.64)
    assert first["duration_ns"] == 44416.0  # "44,416": thousands separated
    assert rows[1]["achieved_occupancy_pct"] < 30 and rows[1]["sm_pct"] > 50  # the matmul: compute, 8 warps a block
    assert kernel_profile.profiled_launches("==PROF== Disconnected from process 675\n") == []


def test_each_profiled_row_is_matched_with_the_launch_the_target_recorded_in_order():
    rows = [{"kernel": "a", "dram_pct": 1.0}, {"kernel": "b", "dram_pct": 2.0}, {"kernel": "a", "dram_pct": 3.0}]
    calls = [
        {"signature": "f(x)", "launches": [{"kernel": "a", "hash": "h1"}, {"kernel": "b", "hash": "h2"}]},
        {"signature": "g(x)", "launches": [{"kernel": "a", "hash": "h3"}]},
    ]
    joined = kernel_profile.joined(calls, rows)
    assert [[(x["hash"], x["dram_pct"]) for x in c["launches"]] for c in joined] == [
        [("h1", 1.0), ("h2", 2.0)],
        [("h3", 3.0)],
    ]
    # out of step (a launch the profiler did not see, past its cap): nothing after it is matched
    skewed = kernel_profile.joined([{"signature": "f", "launches": [{"kernel": "b"}, {"kernel": "a"}]}, *calls], rows)
    assert all(not c["launches"] for c in skewed)


def _outcome(result: dict) -> JobOutcome:
    return JobOutcome(status="ok", result=result, message="")


def test_a_forged_report_is_bounded_and_only_the_files_kernels_count():
    owner = read_triton_file(CORPUS / "vector_add.py")
    kernel = owner.kernels[0].name
    launch = {"kernel": kernel, "hash": "abc", "achieved_occupancy_pct": 60.0, "dram_pct": 80.0, "duration_ns": 1000}
    forged = [
        {**launch, "achieved_occupancy_pct": 500.0, "dram_pct": math.nan, "duration_ns": 3000},  # out of bounds
        {**launch, "kernel": "not_in_the_file", "achieved_occupancy_pct": 1.0},
        "not a launch",
    ]
    result = profile_result(
        _outcome({"profiler": "Nsight Compute 2025.3", "calls": [{"signature": "s", "launches": [launch, *forged]}]}),
        "vector_add.py", owner, "H200",
    )  # fmt: skip
    assert result.ok and [k.kernel for k in result.kernels] == [kernel]
    measured = result.kernels[0]
    assert measured.launches == 2 and measured.achieved_occupancy == pytest.approx(0.60)  # 500% is no figure
    assert measured.dram_pct == pytest.approx(80.0) and measured.duration_us == pytest.approx(2.0)
    missing = profile_result(_outcome({"unavailable": "Nsight Compute (ncu) is not installed"}), "f", owner, None)
    assert missing.unavailable and not missing.ok and "not installed" in missing.message
    failed = profile_result(_outcome({"error": "the profiled run failed: boom"}), "f", owner, None)
    assert not failed.ok and not failed.unavailable and "boom" in failed.message
    none = profile_result(_outcome({"profiler": "x", "calls": [{"launches": forged[1:]}]}), "f", owner, None)
    assert not none.ok and "none of the file's kernels" in none.message


def test_the_measurement_joins_the_compile_facts_of_the_same_compiled_kernel():
    profile = ProfileResult.from_dict(
        {
            "ok": True,
            "file": "f.py",
            "message": "",
            "profiler": "Nsight Compute",
            "kernels": [
                {"kernel": "k", "hash": "h1", "launches": 1, "achieved_occupancy": 0.62, "dram_pct": 85.2, "sm_pct": 6},
                {"kernel": "k", "hash": "h2", "launches": 1, "achieved_occupancy": 0.3},
            ],
        }
    )
    facts = (
        CompiledKernelFacts("k", 32, 0, 0, 4, 3, 1.0, "warps", hash="h1"),
        CompiledKernelFacts("k", 32, 0, 0, 4, 3, 1.0, "warps", hash="h9"),  # no profiled twin
    )
    joined = slowness.with_profile(facts, profile)
    assert joined[0].measured is not None and joined[1].measured is None
    line = slowness.kernel_line(joined[0])
    assert line.endswith("occupancy 100% (warps), measured: achieved occupancy 62%, DRAM 85% of peak, SM 6%"), line
    assert "measured" not in slowness.kernel_line(joined[1])
    assert "measured: achieved occupancy 62%" in slowness.summary((), joined)  # what the optimizer's prompt reads
    assert slowness.with_profile(facts, None) == facts


def test_without_nsight_compute_or_rocprofv3_the_job_says_why_and_runs_nothing(monkeypatch, tmp_path):
    from geak.evaluator.job import rocprof

    job = SimpleNamespace(modules=[{"kernels": ["k"]}], scratch=str(tmp_path), timeout_s=10.0)
    sent = []
    monkeypatch.setattr(rocprof, "find_rocprofv3", lambda: None)
    rocm = kernel_profile.run_profile(job, SimpleNamespace(backend="rocm"), sent.append)
    assert "rocprofv3 is not installed" in rocm["unavailable"] and "Nsight" not in rocm["unavailable"]
    monkeypatch.setattr(kernel_profile, "find_ncu", lambda: None)
    missing = kernel_profile.run_profile(job, SimpleNamespace(backend="cuda"), sent.append)
    assert "Nsight Compute (ncu) is not installed" in missing["unavailable"]
    assert not sent and not list(tmp_path.iterdir())


def test_nsight_compute_is_found_on_the_path(monkeypatch, tmp_path):
    ncu = tmp_path / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert kernel_profile.find_ncu() == str(ncu)


def profile_vector_add(backend: str, unless: str):
    """The corpus's `vector_add.py` profiled by a fresh evaluator, skipped (saying `unless`) on another backend."""

    async def go():
        async with Evaluator() as evaluator:
            if (await evaluator.runtime()).get("backend") != backend:
                pytest.skip(unless)
            return await evaluator.profile(CORPUS / "vector_add.py")

    return asyncio.run(go())


def test_on_the_interpreter_a_profile_says_it_needs_a_gpu():
    result = profile_vector_add("interpreter", unless="a GPU is visible")
    assert result.unavailable and "profiling needs a GPU" in result.message


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a GPU")
def test_a_profile_job_measures_the_files_kernels_in_the_sandbox():
    """On a GPU with Nsight Compute: the real profiler over a corpus kernel's captured calls, in the job's sandbox."""
    if kernel_profile.find_ncu() is None and shutil.which("ncu") is None:
        pytest.skip("Nsight Compute (ncu) is not installed")
    result = profile_vector_add("cuda", unless="no CUDA GPU")
    assert result.ok, result.message
    assert result.profiler and result.profiler.startswith("Nsight Compute")
    (measured,) = result.kernels
    assert measured.kernel == "add_kernel" and measured.hash and measured.launches >= 1
    assert 0 < measured.achieved_occupancy <= 1 and 0 < measured.theoretical_occupancy <= 1
    assert measured.dram_pct > 10 and measured.duration_us > 0


def test_a_file_without_kernels_is_said_before_any_profiler_is_looked_for(monkeypatch, tmp_path):
    from geak.evaluator.job import rocprof

    def looked_for():
        raise AssertionError("no profiler is needed for a file without kernels")

    monkeypatch.setattr(rocprof, "find_rocprofv3", looked_for)
    monkeypatch.setattr(kernel_profile, "find_ncu", looked_for)
    job = SimpleNamespace(modules=[{"kernels": []}], scratch=str(tmp_path), timeout_s=10.0)
    for backend in ("rocm", "cuda"):
        found = kernel_profile.run_profile(job, SimpleNamespace(backend=backend), [].append)
        assert found == {"error": "the file has no Triton kernel to profile"}
