"""The rocprofv3 path of the profile stage: its counter CSVs (the columns of ROCm's rocprofiler-sdk documentation;
one pass per group of counters, in pass_N folders) read into the facts Nsight Compute gives on NVIDIA: achieved and
theoretical occupancy, DRAM share of the peak, waves of workgroups, and VALU busy in the place of SM throughput. The
CSVs are constructed in rocprofv3's format for a simulated MI300X (gfx942, 304 CUs): an add of 2^24 floats and a
matmul with 192 VGPRs and 32 KB of LDS per workgroup."""

from __future__ import annotations

from pathlib import Path

import pytest

from geak.evaluator.job import kernel_profile, rocprof
from geak.evaluator.pool import JobOutcome
from geak.evaluator.profile import profile_result
from geak.evaluator.triton_file import read_triton_file

RECORDED = Path(__file__).parent / "fixtures" / "rocm" / "rocprof"
CORPUS = Path(__file__).parents[1] / "snippets" / "kernels"


def recorded() -> list[dict]:
    texts = [Path(p).read_text() for p in rocprof.counter_files(RECORDED)]
    return rocprof.dispatches(texts, "gfx942:sramecc+:xnack-", 304)


def test_each_pass_is_found_in_order():
    assert [Path(p).parent.name for p in rocprof.counter_files(RECORDED)] == ["pass_1", "pass_2"]


def test_rocprofv3s_counters_become_the_per_launch_facts():
    add, matmul = recorded()
    assert add["kernel"] == "add_kernel" and add["duration_ns"] == 61_000
    assert add["achieved_occupancy_pct"] == 71.25 and add["sm_pct"] == 9.5
    assert add["dram_gbps"] == pytest.approx(196_608 * 1024 / 60_000)  # KB fetched + written, over its own pass
    assert add["theoretical_occupancy_pct"] == 100.0  # 16 VGPRs: 8 wavefronts a SIMD
    assert add["waves"] == pytest.approx(65_536 / (304 * 8))  # 65536 workgroups, 8 resident a CU
    # 192 VGPRs (128 + 64 AGPRs): 2 wavefronts a SIMD; 32 KB LDS: 2 workgroups a CU -> 2 of 4 wavefronts = 25%
    assert matmul["theoretical_occupancy_pct"] == 25.0 and matmul["waves"] == pytest.approx(1024 / (304 * 2))


def test_a_pass_out_of_step_ends_the_matched_launches():
    texts = [Path(p).read_text() for p in rocprof.counter_files(RECORDED)]
    swapped = texts[1].replace("add_kernel", "other_kernel")
    assert rocprof.dispatches([texts[0], swapped], "gfx942", 304) == []
    assert rocprof.dispatches(["not a csv"], "gfx942", 304) == []
    unknown_arch = rocprof.dispatches(texts, "gfx1100", 48)[0]
    assert "waves" not in unknown_arch and unknown_arch["sm_pct"] == 9.5


def test_the_caller_reads_bytes_moved_as_a_share_of_the_datasheet_peak():
    owner = read_triton_file(CORPUS / "vector_add.py")
    kernel = owner.kernels[0].name
    launch = {**recorded()[0], "kernel": kernel, "hash": "h"}
    calls = kernel_profile.joined([{"signature": "add(f32[16M])", "launches": [{"kernel": kernel, "hash": "h"}]}],
                                  [launch])  # fmt: skip
    outcome = JobOutcome("ok", {"profiler": "rocprofv3 1.0.0", "calls": calls})
    result = profile_result(outcome, "vector_add.py", owner, "AMD Instinct MI300X", 304)
    measured = result.kernels[0]
    assert result.ok and "rocprofv3" in result.message
    assert measured.dram_pct == pytest.approx(100 * 196_608 * 1024 / 60_000 / 5300)
    assert measured.achieved_occupancy == pytest.approx(0.7125) and measured.theoretical_occupancy == 1.0
    assert measured.waves == pytest.approx(65_536 / (304 * 8)) and measured.sm_pct == 9.5
    # a partition (CPX: 38 CUs) moves its share of the bandwidth; an unknown device gives no share
    cpx = profile_result(outcome, "vector_add.py", owner, "AMD Instinct MI300X", 38).kernels[0]
    assert cpx.dram_pct is None  # over its eighth of the peak: no figure
    assert profile_result(outcome, "vector_add.py", owner, "AMD Radeon PRO", None).kernels[0].dram_pct is None


def test_rocprofv3_is_found_in_rocms_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    assert rocprof.find_rocprofv3() is None or rocprof.find_rocprofv3() == "/opt/rocm/bin/rocprofv3"
    tool = tmp_path / "rocm" / "bin" / "rocprofv3"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert rocprof.find_rocprofv3() == str(tool)
