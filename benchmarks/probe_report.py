"""Probe report: every golden file of the suites checked against itself with the probes on (fresh values, other sizes,
other values), and, with --baseline, again with fresh values only: the verdicts, the probes each file got, the
files the new probes fail (false alarms: a golden file must pass against itself) and what they cost in wall time.

    python benchmarks/probe_report.py ../shared/suites/tritonbench_revised/TritonBench_G_v1 \
        ../shared/suites/rocm/ROCm_v1 --jobs 12 --baseline --out report/probes

Each run is one warm evaluator per suite (`geak check DIR --against-self`'s engine): a file's time is its own check
(the reference job) plus its check against itself (the candidate job). Writes `probes.json` under --out and prints a
summary per suite and every file whose verdict the new probes change (with --baseline, against fresh values only,
run once before and once after), and where the time goes (from the jobs' progress: each probe is named as it
starts): the reference's tests and probes, the candidate's, by kind of probe, and the slowest probes.
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
from geak.evaluator.shared.probe_rules import KIND_WORDS
from geak.server.cli.check_many import FileVerdict, check_many, triton_files


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


PROBE_WORDS = {f"running {words} #": kind for kind, words in KIND_WORDS.items()}


def phases(timeline: list[tuple[float, str]], end: float) -> dict[str, Any]:
    """Where one file's time went, from its progress messages: seconds by phase (`reference tests`, `reference
    shape probes`, `candidate fresh probes`...) and each probe's own time. A message lasts until the next, so the
    last step of a job also counts the job's end and the caller's judging of it (the reference's until the
    candidate's job is started, the candidate's until the file's verdict): such a probe is marked `last`."""
    spent: dict[str, float] = {}
    probes = []
    side = "reference"
    nexts = [m for _, m in timeline[1:]] + [""]
    for (t, message), later, following in zip(timeline, [t for t, _ in timeline[1:]] + [end], nexts, strict=True):
        if message.startswith("running the tests of"):
            side = "candidate"
        kind = next((k for prefix, k in PROBE_WORDS.items() if message.startswith(prefix)), None)
        phase = f"{side} {kind} probes" if kind else f"{side} {'probes' if message == 'running probes' else 'tests'}"
        spent[phase] = spent.get(phase, 0.0) + later - t
        if kind:
            last = not following or following.startswith("running the tests of")
            probe = message.removeprefix("running ")
            probes.append({"side": side, "probe": probe, "s": round(later - t, 3), "last": last})
    return {"phases": {k: round(v, 3) for k, v in spent.items()}, "probes": probes}


async def run(files: list[Path], args: argparse.Namespace, variants: bool) -> tuple[list[dict[str, Any]], float]:
    options = EvalOptions(
        timeout_s=args.timeout, backend=args.backend, max_concurrent=args.jobs, probe_variants=variants
    )
    timelines: dict[str, list[tuple[float, str]]] = {}
    ends: dict[str, float] = {}
    started = time.perf_counter()
    found = await check_many(
        files,
        options,
        against_self=True,
        on_progress=lambda f, m: timelines.setdefault(str(f), []).append((time.perf_counter(), m)),
        on_done=lambda v: ends.setdefault(v.file, time.perf_counter()),
    )
    rows = [row(v) for v in found]
    for r, v in zip(rows, found, strict=True):
        r["time"] = phases(timelines.get(v.file, []), ends[v.file])
    return rows, time.perf_counter() - started


def where_time_goes(rows: list[dict[str, Any]], slowest: int = 8) -> str:
    """The phases summed over the files, and the slowest probes other than fresh ones."""
    total: dict[str, float] = {}
    for r in rows:
        for phase, s in r["time"]["phases"].items():
            total[phase] = total.get(phase, 0.0) + s
    lines = ["  time by phase, summed over the files: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(total.items()))]
    probes = [(p["s"], r["file"], p) for r in rows for p in r["time"]["probes"] if not p["probe"].startswith("fresh")]
    for s, file, p in sorted(probes, key=lambda x: -x[0])[:slowest]:
        end = " (with the job's end and the caller's judging)" if p["last"] else ""
        lines.append(f"  {s:6.2f} s  {file}  {p['side']}: {p['probe'][:120]}{end}")
    return "\n".join(lines)


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


def baseline_rows(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fresh-only runs before and after the run with the probes as one: each file's time their mean (a warm-up
    or a drift of the machine between runs then weighs on both sides alike), its verdict the first run's."""
    return [{**a, "seconds": round((a["seconds"] + b["seconds"]) / 2, 2)} for a, b in zip(before, after, strict=True)]


async def main_async(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {}
    for suite in args.suites:
        files = [f.resolve() for f in triton_files([suite])][: args.limit or None]
        before, before_wall = await run(files, args, variants=False) if args.baseline else ([], 0.0)
        with_probes, wall = await run(files, args, variants=True)
        entry = {"probes": summary(with_probes, wall), "files": with_probes}
        print(f"\n{suite}: {len(files)} files, with shape and value probes: {entry['probes']}", flush=True)
        print(where_time_goes(with_probes), flush=True)
        if args.baseline:
            after, after_wall = await run(files, args, variants=False)
            fresh_only = baseline_rows(before, after)
            entry["fresh_only"] = summary(fresh_only, (before_wall + after_wall) / 2)
            entry["fresh_only_runs"] = {"before": before, "after": after}
            print(f"  fresh values only (mean of a run before and one after): {entry['fresh_only']}")
            print(where_time_goes(before + after), flush=True)
            changed = [(a, b) for a, b in zip(fresh_only, with_probes, strict=True) if a["verdict"] != b["verdict"]]
            entry["changed"] = [{"file": b["file"], "before": a["verdict"], "after": b["verdict"], "why": b["why"]}
                                for a, b in changed]  # fmt: skip
            ratios = [b["seconds"] / a["seconds"] for a, b in zip(fresh_only, with_probes, strict=True)
                      if a["verdict"] == "pass" and b["verdict"] == "pass" and a["seconds"] > 0]  # fmt: skip
            if ratios:
                entry["time_ratio"] = {"median": round(statistics.median(ratios), 3), "max": round(max(ratios), 3)}
            cost = entry["probes"]["file_s"] / max(entry["fresh_only"]["file_s"], 1e-9) - 1
            runs = f"{summary(before, before_wall)['file_s']} s before, {summary(after, after_wall)['file_s']} s after"
            print(f"  check time with the new probes: {cost:+.1%} over the passing and failing files "
                  f"(per passing file: {entry.get('time_ratio')}; the fresh-only runs: {runs})")  # fmt: skip
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
    parser.add_argument("--baseline", action="store_true",
                        help="also check with fresh values only, before and after (the cost)")  # fmt: skip
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
