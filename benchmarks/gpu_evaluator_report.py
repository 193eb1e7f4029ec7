"""Evaluator figures on a GPU: faults and hangs vs the pool, A/A and slow-variant speedups, checks per minute.

Run on a machine with a GPU: ``python benchmarks/gpu_evaluator_report.py [--out DIR] [KERNEL.py ...]``. Prints a
table and writes ``evaluator_report.json``. Extra files given on the command line are checked and timed too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from geak.evaluator.api import EvalOptions, Evaluator

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def row(name: str, **values) -> dict:
    print(name.ljust(34), "  ".join(f"{k}={v}" for k, v in values.items()), flush=True)
    return {"name": name, **values}


async def faults_and_speedups(report: list[dict]) -> None:
    async with Evaluator(EvalOptions(timeout_s=30, spares=1)) as ev:
        info = await ev.runtime()
        report.append(row("runtime", **info))
        for fixture in (
            "gpu_illegal_address.py",
            "gpu_hang.py",
            "add_native.py",
            "compile_error.py",
            "unwritten_output.py",
            "hardcoded.py",
        ):
            t0 = time.perf_counter()
            against = FIXTURES / ("add_tritonbench.py" if fixture == "unwritten_output.py" else "add_native.py")
            r = await ev.check(
                FIXTURES / fixture, against=against if fixture in ("unwritten_output.py", "hardcoded.py") else None
            )
            where = [(d.line, d.message[:80]) for d in r.diagnostics[:1]]
            report.append(
                row(
                    f"check {fixture}",
                    ok=r.ok,
                    stage=r.stage,
                    seconds=round(time.perf_counter() - t0, 1),
                    message=r.message[:160].replace("\n", " "),
                    diagnostic=where,
                )
            )
        for name, cand in (("A/A add vs add", "add_native.py"), ("slow add (BLOCK=32, 1 warp)", "add_slow.py")):
            b = await ev.bench(FIXTURES / cand, against=FIXTURES / "add_native.py")
            s = b.speedup
            report.append(
                row(
                    name,
                    ok=b.ok,
                    message=b.message[:200],
                    interval=[round(s.low, 4), round(s.high, 4)] if s else None,
                    width_pct=round(100 * (s.high - s.low) / s.ratio, 2) if s else None,
                )
            )
            for c in b.calls:
                report.append(
                    row(
                        f"  {c.signature}",
                        median_ms=round(c.median_ms, 5),
                        gbps=round(c.gbps or 0),
                        pct_bw=round(c.pct_peak_bw or 0, 1),
                        method=c.method,
                        spread=round(c.spread_pct, 2),
                        kernels=c.kernel_ms,
                    )
                )
        if b.peaks:
            report.append(row("peaks", **asdict(b.peaks)))


async def corpus(files: list[str], report: list[dict], rounds: int, out: Path) -> None:
    async with Evaluator(EvalOptions(timeout_s=300, spares=1, bench_rounds=rounds)) as ev:
        for f in files:
            b = await ev.bench(f)
            entry = {"file": Path(f).name, "ok": b.ok, "message": b.message[:300]}
            if b.check is not None:
                entry["check"] = b.check.message[:300]
            entry["calls"] = [asdict(c) for c in b.calls]
            report.append(entry)
            (out / "evaluator_report.json").write_text(json.dumps(report, indent=1, default=str))
            best = max(b.calls, key=lambda c: c.median_ms) if b.calls else None
            print(Path(f).name.ljust(34), "ok" if b.ok else "FAIL", b.message[:150].replace("\n", " "), flush=True)
            if best is not None:
                print(
                    " " * 36,
                    f"{best.signature[:60]} {best.median_ms:.4f} ms  {best.gbps or 0:.0f} GB/s "
                    f"({best.pct_peak_bw or 0:.0f}% BW)  {best.tflops or 0:.1f} TFLOP/s "
                    f"({best.pct_peak_flops or 0:.0f}% FLOP) {best.method}",
                    flush=True,
                )


async def checks_per_minute(report: list[dict], n: int = 12) -> None:
    target = FIXTURES / "add_native.py"
    async with Evaluator(EvalOptions(timeout_s=120, spares=2, fresh_inputs=False)) as ev:
        await ev.check(target)  # warm the compile cache and the spares
        t0 = time.perf_counter()
        for _ in range(n):
            assert (await ev.check(target)).ok
        warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):  # GEAK-eval's way: a fresh interpreter per check
        code = "import runpy, sys; m = runpy.run_path(sys.argv[1]); m['test_add']()"
        subprocess.run([sys.executable, "-c", code, str(target)], check=True, capture_output=True)
    fresh = time.perf_counter() - t0
    report.append(row("checks per minute", warm_pool=round(60 * n / warm, 1), fresh_process=round(60 * n / fresh, 1)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=".")
    parser.add_argument("--skip-basics", action="store_true")
    parser.add_argument("--rounds", type=int, default=15, help="timing rounds per corpus file")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    report: list[dict] = []
    if not args.skip_basics:
        asyncio.run(faults_and_speedups(report))
        asyncio.run(checks_per_minute(report))
    if args.files:
        asyncio.run(corpus(args.files, report, args.rounds, Path(args.out)))
    Path(args.out, "evaluator_report.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
