"""The GPU side of a comparison with a base (``geak.server.base_comparison``) without a GPU: an evaluator that answers
with timings as a GPU evaluator reports them (recorded `BenchResult`s), so that what a slowdown makes of a file's
verdict, and `--max-slowdown`, are tested here; the timing itself is the evaluator's (tested on a GPU)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from git_repos import scale_file

from geak.evaluator import BadInput, BenchResult, CheckResult
from geak.server.base_comparison import bench_file, compare_file, speed_line, too_slow
from geak.server.base_revision import Base, BaseVersion
from geak.server.cli.base_check import exit_code


def timing(ratio: float, low: float, high: float, verdict: str, ok: bool = True) -> BenchResult:
    """A bench result against a reference, as an H100 run reports it (one call, its speedup)."""
    call = {"wrapper": "scale", "signature": "scale(f32[16777216])", "median_ms": 0.0412, "spread_pct": 0.8,
            "method": "cuda graph", "bytes_moved": 134217728, "gbps": 3258.0, "tflops": None, "pct_peak_bw": 97.2,
            "pct_peak_flops": None, "cache": "cold"}  # fmt: skip
    significant = verdict in ("faster", "slower")
    return BenchResult.from_dict({
        "ok": ok, "stage": "perf", "backend": "cuda", "file": "scale.py", "device": "NVIDIA H100 80GB HBM3",
        "message": f"speedup {ratio:.3f}x: {verdict}" if ok else "timing rejected: the timed calls' outputs differ",
        "calls": [call], "reference_calls": [{**call, "median_ms": 0.0412 * ratio}],
        "speedup": {"ratio": ratio, "low": low, "high": high, "rounds": 12, "significant": significant,
                    "verdict": verdict, "margin": 0.02},
    })  # fmt: skip


@dataclass
class RecordedGpu:
    """An evaluator on a GPU: checks pass (or the base fails its own test), timings are the recorded one."""

    timed: BenchResult
    base_fails: bool = False
    benched: list[str | None] = field(default_factory=list)

    async def check(self, file, *, against=None, progress=None) -> CheckResult:
        if against is not None and self.base_fails:
            own = CheckResult(ok=False, stage="exec", backend="cuda", file=str(against),
                              message=f"test_scale failed: AssertionError in {against}")  # fmt: skip
            raise BadInput(f"the reference {against} does not pass its own test: AssertionError", own)
        return CheckResult(ok=True, stage="exec", backend="cuda", file=str(file), message="1 test(s) passed",
                           reference=str(against) if against else None)  # fmt: skip

    async def bench(self, file, *, against=None, progress=None, check_first=True) -> BenchResult:
        if check_first:  # as the evaluator's bench: its check first (against the reference)
            await self.check(file, against=against)
        self.benched.append(None if against is None else Path(against).name)
        return BenchResult.from_dict({**self.timed.to_dict(), "file": str(file),
                                      "reference": str(against) if against else None})  # fmt: skip


@pytest.fixture
def version(tmp_path) -> BaseVersion:
    file = tmp_path / "scale.py"
    file.write_text(scale_file("x + x"))
    return BaseVersion(file, "kernels/scale.py", scale_file())


BASE = Base(Path("/repo"), "HEAD", "1a2b3c4d" * 5)
SLOWER = timing(0.80, 0.78, 0.82, "slower")  # a 1.25x slowdown
A_LITTLE_SLOWER = timing(0.97, 0.96, 0.98, "slower")  # significant, 1.03x
WITHIN_NOISE = timing(0.99, 0.985, 1.005, "within noise (±2%)")
UNDECIDED = timing(0.90, 0.70, 1.10, "undecided (40 rounds)")


def test_only_a_significant_slowdown_beyond_the_limit_is_too_slow():
    assert too_slow(SLOWER, 1.05) and too_slow(SLOWER, 1.2) and not too_slow(SLOWER, 1.3)
    assert not too_slow(A_LITTLE_SLOWER, 1.05) and too_slow(A_LITTLE_SLOWER, 1.0)
    assert not too_slow(WITHIN_NOISE, 1.0) and not too_slow(UNDECIDED, 1.0)
    assert not too_slow(timing(1.3, 1.25, 1.35, "faster"), 1.0)
    assert not too_slow(SLOWER, None) and not too_slow(None, 1.05)


def test_speed_lines_say_the_size_the_interval_and_the_verdict():
    assert speed_line(SLOWER, "HEAD") == "1.25x slower than HEAD [0.78, 0.82]: slower"
    assert speed_line(timing(1.21, 1.18, 1.24, "faster"), "HEAD~1") == "1.21x faster than HEAD~1 [1.18, 1.24]: faster"
    rejected = timing(0.8, 0.78, 0.82, "slower", ok=False)
    assert speed_line(rejected, "HEAD").startswith("not timed against HEAD: timing rejected")


def compared(version, gpu: RecordedGpu, tmp_path, **kwargs):
    folder = tmp_path / "bases"
    folder.mkdir(exist_ok=True)
    return asyncio.run(compare_file(gpu, BASE, version, folder, **kwargs))


def test_on_a_gpu_a_slowdown_beyond_the_limit_fails_the_file(version, tmp_path):
    gpu = RecordedGpu(SLOWER)
    verdict = compared(version, gpu, tmp_path, timed=True, max_slowdown=1.05)
    assert gpu.benched == ["scale.py"]  # against the base's text, written under its own name
    assert verdict.verdict == "slower" and exit_code([verdict]) == 1
    assert verdict.message == ("same outputs as HEAD:kernels/scale.py; 1.25x slower than HEAD [0.78, 0.82]: slower "
                               "(beyond --max-slowdown 1.05)")  # fmt: skip
    assert verdict.bench.reference == "HEAD:kernels/scale.py" and verdict.result.reference == "HEAD:kernels/scale.py"
    verdict = compared(version, RecordedGpu(SLOWER), tmp_path, timed=True)  # no limit: said, not failed
    assert verdict.verdict == "pass" and exit_code([verdict]) == 0 and "1.25x slower than HEAD" in verdict.message


@pytest.mark.parametrize("timed", [A_LITTLE_SLOWER, WITHIN_NOISE, UNDECIDED])
def test_a_slowdown_within_the_limit_noise_or_undecided_passes(version, tmp_path, timed):
    verdict = compared(version, RecordedGpu(timed), tmp_path, timed=True, max_slowdown=1.05)
    assert verdict.verdict == "pass" and verdict.bench is not None


def test_a_rejected_timing_fails_and_no_gpu_times_nothing(version, tmp_path):
    verdict = compared(version, RecordedGpu(timing(0.8, 0.78, 0.82, "slower", ok=False)), tmp_path, timed=True)
    assert verdict.verdict == "fail" and "not timed against HEAD: timing rejected" in verdict.message
    cpu = RecordedGpu(SLOWER)
    verdict = compared(version, cpu, tmp_path, timed=False, max_slowdown=1.05)
    assert verdict.verdict == "pass" and verdict.bench is None and cpu.benched == []


def test_new_files_and_failing_bases_are_not_timed_against_anything(version, tmp_path):
    new = BaseVersion(version.file, "kernels/scale.py", None)
    gpu = RecordedGpu(SLOWER)
    verdict = compared(new, gpu, tmp_path, timed=True, max_slowdown=1.05)
    assert (verdict.verdict, verdict.note, gpu.benched) == ("pass", "new since HEAD: checked alone", [])
    gpu = RecordedGpu(SLOWER, base_fails=True)
    verdict = compared(version, gpu, tmp_path, timed=True, max_slowdown=1.05)
    assert verdict.verdict == "pass" and gpu.benched == []
    assert verdict.note == ("HEAD:kernels/scale.py does not pass its own test or import (test_scale failed: "
                            "AssertionError in HEAD:kernels/scale.py): checked alone")  # fmt: skip


def test_bench_against_the_base_fails_on_a_slowdown_beyond_the_limit(version, tmp_path):
    folder = tmp_path / "bases"
    folder.mkdir()
    verdict = asyncio.run(bench_file(RecordedGpu(SLOWER), BASE, version, folder, max_slowdown=1.1))
    assert verdict.verdict == "slower" and verdict.message == "1.25x slower than HEAD [0.78, 0.82]: slower"
    verdict = asyncio.run(bench_file(RecordedGpu(SLOWER), BASE, version, folder, max_slowdown=1.3))
    assert verdict.verdict == "pass"
    gpu = RecordedGpu(SLOWER, base_fails=True)
    verdict = asyncio.run(bench_file(gpu, BASE, version, folder, max_slowdown=1.1))
    assert gpu.benched == [None] and verdict.note.endswith("): timed alone")
