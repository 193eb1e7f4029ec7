"""Timing trust report on a GPU, time-boxed (under 5 minutes): hostile timings rejected, A/A within noise, a real
speedup still claimed, and the device's A/A margin measured for the peaks cache.

Run on a machine with a GPU: ``python benchmarks/gpu_trust_report.py [--out DIR] [--budget-s 280]``. Prints one line per
case as it goes and a compact table at the end; writes ``trust_report.json``; exits 1 if any case did not behave.

* hostile fixtures (``tests/fixtures``: memoized by address, unwritten after 40 calls, cached with a token launch, a
  PyTorch fallback once timed, a side stream, a forged timer), each timed against ``add_native.py`` at 2^24
  elements and at 2^16 (graph replay), with ``check_first=False`` so that the timing's own defences are what is
  tested: every one must be rejected with a reason, except the forged clock, which the timer never reads (it must
  be timed truly: within noise of the reference's same kernel);
* fault: a candidate that faults (an illegal address) only on the timer's copies of its call fails as itself, not as
  an internal error, and the next bench runs;
* A/A on seven corpus kernels of different sizes: each timed against itself must be "within noise";
* ``add_slow.py`` with BLOCK 32 -> 1024 against ``add_slow.py``: must be "faster", at least 1.2x.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from geak.evaluator import peaks as peaks_cache
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.results import BenchResult
from geak.evaluator.runtime_facts import RuntimeFacts

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
KERNELS = ROOT / "snippets" / "kernels"
HOSTILE = (
    "memoize_by_address.py",
    "unwritten_after_40.py",
    "cached_token_launch.py",
    "fallback_when_timed.py",
    "side_stream.py",
    "forged_timer.py",
)
# The forged clock patches torch.cuda.Event at import; the timer reads clocks bound before user code, so the
# candidate (the same kernel as add_native.py) is timed truly: within noise of the reference, or else rejected.
NEUTRALIZED = ("forged_timer.py",)
AA_KERNELS = (
    "vector_add.py",
    "softmax_rowwise.py",
    "layer_norm_fwd.py",
    "matmul_fp16.py",
    "cross_entropy.py",
    "rms_norm_fwd.py",
    "dropout.py",
)


class Report:
    def __init__(self, budget_s: float):
        self.rows: list[dict] = []
        self.deadline = time.perf_counter() + budget_s

    @property
    def out_of_time(self) -> bool:
        return time.perf_counter() > self.deadline

    def add(self, case: str, expected: str, passed: bool | None, result: str, **extra) -> None:
        row = {"case": case, "expected": expected, "passed": passed, "result": result, **extra}
        self.rows.append(row)
        mark = "SKIP" if passed is None else "ok  " if passed else "FAIL"
        print(f"{mark} {case:<44} {result[:150]}", flush=True)


def speedup_text(b: BenchResult) -> str:
    s = b.speedup
    if not b.ok or s is None:
        return b.message.replace("\n", " ")
    methods = ",".join(sorted({c.method for c in b.calls}))
    return f"{s.ratio:.4f}x [{s.low:.4f}, {s.high:.4f}] {s.verdict} ({len(b.calls)} call(s), {methods})"


def variant(source: Path, tmp: Path, name: str, *edits: tuple[str, str]) -> Path:
    text = source.read_text()
    for old, new in edits:
        if old not in text:
            raise SystemExit(f"{source.name}: cannot find {old!r} to edit")
        text = text.replace(old, new)
    path = tmp / name
    path.write_text(text)
    return path


async def run(report: Report, tmp: Path, real_cache: Path, parts: set[str], hostile: tuple[str, ...]) -> None:
    async with Evaluator(EvalOptions(timeout_s=120, spares=1)) as ev:
        info = await ev.runtime()
        if info.get("backend") == "interpreter":
            raise SystemExit("this report needs a GPU: torch sees no CUDA or ROCm device")
        print(f"device: {info.get('device')} ({info.get('backend')}, torch {info.get('torch_version')}, "
              f"triton {info.get('triton_version')})", flush=True)  # fmt: skip
        t0 = time.perf_counter()
        peaks = await ev.device_peaks()
        measured = peaks.source == "measured"
        report.add(
            "peaks and A/A margin (measured afresh)",
            "measured",
            measured,
            f"copy {peaks.bandwidth_gbps:.0f} GB/s, L2 {peaks.l2_gbps:.0f} GB/s, "
            f"bf16 {peaks.tflops_16bit:.0f} TFLOP/s, fp32 {peaks.tflops_fp32:.1f}, "
            f"margin ±{100 * peaks.noise_margin:.2f}% ({time.perf_counter() - t0:.0f} s)",
            peaks=asdict(peaks),
        )
        if measured:  # into the user's own cache too
            peaks_cache.store(RuntimeFacts.from_dict(info), peaks, real_cache)

        references = {
            "2^24": FIXTURES / "add_native.py",
            "2^16": variant(FIXTURES / "add_native.py", tmp, "add_native_small.py", ("1 << 24", "1 << 16")),
        }
        for fixture in hostile if "hostile" in parts else ():
            for size, reference in references.items():
                case = f"hostile {fixture} @{size}"
                if report.out_of_time:
                    report.add(case, "rejected", None, "skipped: out of time")
                    continue
                b = await ev.bench(FIXTURES / fixture, against=reference, check_first=False)
                rejected = not b.ok and "rejected" in b.message
                if fixture in NEUTRALIZED:  # its forgery cannot reach the timer: the true times, or a rejection
                    true_times = b.ok and b.speedup is not None and not b.speedup.significant
                    report.add(case, "rejected or true", rejected or true_times, speedup_text(b),
                               seconds=round(b.duration_s, 1))  # fmt: skip
                    continue
                report.add(case, "rejected", rejected, speedup_text(b), seconds=round(b.duration_s, 1))

        if "fault" in parts:  # user code that faults only on the timer's copies: its failure, and the next job runs
            b = await ev.bench(FIXTURES / "faults_when_timed.py", against=FIXTURES / "add_native.py", check_first=False)
            said = not b.ok and "internal evaluator error" not in b.message and "prepared for timing" in b.message
            report.add("faults only when timed", "the candidate's failure", said, b.message[:200])
            after = await ev.bench(FIXTURES / "add_native.py", against=FIXTURES / "add_native.py", check_first=False)
            report.add("a bench after the fault", "timed", after.ok, speedup_text(after))

        if "speedup" in parts:
            slow = FIXTURES / "add_slow.py"
            edits = (("cdiv(n, 32)", "cdiv(n, 1024)"), ("BLOCK=32, num_warps=1", "BLOCK=1024, num_warps=4"))
            fixed = variant(slow, tmp, "add_slow_fixed.py", *edits)
            b = await ev.bench(fixed, against=slow, check_first=False)
            s = b.speedup
            real = b.ok and s is not None and s.verdict == "faster" and s.low >= 1.2
            report.add("add_slow fixed (BLOCK 32 -> 1024) vs add_slow", "faster >= 1.2x", real, speedup_text(b))

        for kernel in AA_KERNELS if "aa" in parts else ():
            case = f"A/A {kernel}"
            if report.out_of_time:
                report.add(case, "within noise", None, "skipped: out of time")
                continue
            b = await ev.bench(KERNELS / kernel, against=KERNELS / kernel, check_first=False)
            s = b.speedup
            quiet = b.ok and s is not None and not s.significant
            report.add(case, "within noise", quiet, speedup_text(b), seconds=round(b.duration_s, 1))


def table(rows: list[dict]) -> None:
    print("\n| case | expected | result | verdict |")
    print("|---|---|---|---|")
    for r in rows:
        verdict = "skipped" if r["passed"] is None else "PASS" if r["passed"] else "FAIL"
        print(f"| {r['case']} | {r['expected']} | {r['result'][:110]} | {verdict} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for trust_report.json")
    parser.add_argument("--budget-s", type=float, default=280.0, help="stop starting new cases after this long")
    parser.add_argument("--parts", default="hostile,fault,speedup,aa", help="comma-separated parts (see above)")
    parser.add_argument("--hostile", default=",".join(HOSTILE), help="comma-separated hostile fixtures to time")
    args = parser.parse_args()
    started = time.perf_counter()
    report = Report(args.budget_s)
    real_cache = peaks_cache.cache_file()
    with tempfile.TemporaryDirectory(prefix="geak-trust-") as tmp:
        os.environ["GEAK_CACHE_DIR"] = tmp  # an empty cache: the peaks and the A/A margin are measured now
        asyncio.run(run(report, Path(tmp), real_cache, set(args.parts.split(",")), tuple(args.hostile.split(","))))
    table(report.rows)
    failed = [r["case"] for r in report.rows if r["passed"] is False]
    print(f"\n{len(report.rows)} cases in {time.perf_counter() - started:.0f} s; failed: {failed or 'none'}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trust_report.json").write_text(json.dumps(report.rows, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
