"""Probe report: every golden file of the suites checked against itself with the probes on (fresh values, other sizes,
other values), and, with --baseline, again with fresh values only: the verdicts, the probes each file got, the
files the new probes fail (false alarms: a golden file must pass against itself) and what they cost in wall time.

    python scripts/probe_report.py ../shared/suites/tritonbench_revised/TritonBench_G_v1 ../shared/suites/rocm/ROCm_v1 \
        --jobs 12 --baseline --out report/probes

Each run is one warm evaluator per suite (`geak check DIR --against-self`'s engine): a file's time is its own check
(the reference job) plus its check against itself (the candidate job). Writes `probes.json` under --out and prints a
summary per suite and every file whose verdict the new probes change.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from geak.evaluator.api import EvalOptions
from geak.server.check_many import FileVerdict, check_many, triton_files


def row(verdict: FileVerdict) -> dict[str, Any]:
    shown, alone = verdict.result, verdict.alone
    comparison = shown.comparison if shown is not None else None
    jobs = [alone, *([shown] if shown is not alone else [])]  # the file's own check, then against itself
    seconds = sum(r.duration_s for r in jobs if r is not None)
    return {
        "file": Path(verdict.file).name,
        "verdict": verdict.verdict,
        "seconds": round(seconds, 2),
        "fresh": comparison.fresh_calls if comparison else 0,
        "shapes": comparison.shape_calls if comparison else 0,
        "values": comparison.value_calls if comparison else 0,
        "skipped": comparison.probes_skipped if comparison else 0,
        "unwritten": any("unwritten" in c for c in (shown.caveats if shown else ())),
        "why": verdict.message.strip().splitlines()[0][:300] if verdict.verdict != "pass" else "",
    }


async def run(files: list[Path], args: argparse.Namespace, variants: bool) -> tuple[list[dict[str, Any]], float]:
    options = EvalOptions(
        timeout_s=args.timeout, backend=args.backend, max_concurrent=args.jobs, probe_variants=variants
    )
    started = time.perf_counter()
    found = await check_many(files, options, against_self=True)
    return [row(v) for v in found], time.perf_counter() - started


def summary(rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    counts = {k: sum(r["verdict"] == k for r in rows) for k in ("pass", "fail", "not checkable", "bad input")}
    return {
        **counts,
        "wall_s": round(wall_s, 1),
        "file_s": round(sum(r["seconds"] for r in rows), 1),
        "shape_probes": sum(r["shapes"] for r in rows),
        "value_probes": sum(r["values"] for r in rows),
        "skipped": sum(r["skipped"] for r in rows),
        "unwritten": [r["file"] for r in rows if r["unwritten"]],
    }


async def main_async(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {}
    for suite in args.suites:
        files = [f.resolve() for f in triton_files([suite])][: args.limit or None]
        with_probes, wall = await run(files, args, variants=True)
        entry = {"probes": summary(with_probes, wall), "files": with_probes}
        print(f"\n{suite}: {len(files)} files, with shape and value probes: {entry['probes']}", flush=True)
        if args.baseline:
            fresh_only, base_wall = await run(files, args, variants=False)
            entry["fresh_only"] = summary(fresh_only, base_wall)
            print(f"  fresh values only: {entry['fresh_only']}")
            changed = [(a, b) for a, b in zip(fresh_only, with_probes, strict=True) if a["verdict"] != b["verdict"]]
            entry["changed"] = [{"file": b["file"], "before": a["verdict"], "after": b["verdict"], "why": b["why"]}
                                for a, b in changed]  # fmt: skip
            ratios = [b["seconds"] / a["seconds"] for a, b in zip(fresh_only, with_probes, strict=True)
                      if a["verdict"] == "pass" and b["verdict"] == "pass" and a["seconds"] > 0]  # fmt: skip
            if ratios:
                entry["time_ratio"] = {"median": round(statistics.median(ratios), 3), "max": round(max(ratios), 3)}
            cost = entry["probes"]["file_s"] / max(entry["fresh_only"]["file_s"], 1e-9) - 1
            print(f"  check time with the new probes: {cost:+.1%} over the passing and failing files "
                  f"(per passing file: {entry.get('time_ratio')})")  # fmt: skip
            for c in entry["changed"]:
                print(f"  CHANGED {c['file']}: {c['before']} -> {c['after']}: {c['why']}")
        for r in with_probes:
            if r["verdict"] != "pass":
                print(f"  {r['verdict']:14s} {r['file']}: {r['why'][:200]}")
        report[str(suite)] = entry
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "probes.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="+", help="folders of suite files")
    parser.add_argument("--out", default="probe_report")
    parser.add_argument("--backend", default="auto", choices=("auto", "gpu", "interpreter"))
    parser.add_argument("--jobs", type=int, default=4, help="files checked at once")
    parser.add_argument("--timeout", type=float, default=180, help="per job, seconds")
    parser.add_argument("--limit", type=int, default=0, help="only the first N files of each suite")
    parser.add_argument("--baseline", action="store_true", help="also check with fresh values only (the cost)")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
