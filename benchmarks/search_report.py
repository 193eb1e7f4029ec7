"""The LLM-free launch-configuration search on a fixed, seeded sample of suite files (a GPU report, not a test).

    python benchmarks/search_report.py --out DIR --deadline-s 500 [--resume] [--files-json FILE] [--only NAME,...]
    python benchmarks/search_report.py --out DIR --shard K/N ...   (N processes, one per GPU, sharing DIR)
    python benchmarks/search_report.py --out DIR --report          (the table of what DIR holds)

1. The sample: each suite's files in an order shuffled with `--seed`; walking it, a file joins when it passes its own
   test natively and its timed calls take at least `--min-call-us` in all on this GPU (measured here with one warm
   evaluator, or read from `--files-json`: {"files": [{"path", "passing", "call_us"}]}, files named by their suite
   folder and name; unmeasured files are passed over), until `--tb` TritonBench-revised and `--rocm` ROCm files are
   in. Measurements go to DIR/durations.jsonl and the sample to DIR/sample.json, once.
   `records/search_measured_h200.json` holds every TritonBench-revised file as three timed `geak eval` runs on H200s
   measured it, or as a search timed the original alone where one did (``measured_from_eval.py``), and the first 8
   ROCm files, which give the 24-file sample of seed 0 without measuring again. µs-scale calls must be measured with
   the device's time (graph replay), never the host's: the host's time draws files whose calls take under 20 µs.
2. The search: `geak optimize FILE` without a model at the default budget (`--budget` seconds), every file through the
   same warm evaluator; a line per file in DIR/search.jsonl as it finishes.
3. The table (file, knobs, configurations screened, finalists, speedup with interval and verdict, seconds) and the
   summary (geometric-mean speedup, share significantly faster, slower count, max/median seconds, device), also in
   DIR/report.md; and the run's raw record (``geak.agent.search_record``: every file's configurations screened,
   finalists with their bench intervals, seconds; the device, date and commit — `GEAK_COMMIT` where the checkout
   has no git history) in `benchmarks/records/` (`--record`), from which `benchmarks/results_table.py` renders the
   published figures: commit it.

`--deadline-s` stops cleanly before a file that would not finish in time (a file is reckoned at `--budget` + 40 s);
`--resume` continues from what DIR holds. With `--shard K/N` (each process on its own GPU), shard K measures every
N-th file of the first `--scan-tb`/`--scan-rocm` of each shuffled suite, the shards wait for each other, all choose
the same sample from what they measured together, and shard K searches every N-th file of the sample not yet searched
(so a later call may use another N). Shards always continue what DIR holds; each writes its own durations.K.jsonl
and search.K.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "shared" / "suites"
if not SUITES.is_dir():
    SUITES = ROOT.parent / "shared" / "suites"
SUITE_DIRS = {"tb": "tritonbench_revised/TritonBench_G_v1", "rocm": "rocm/ROCm_v1"}
RECORDS = ROOT / "benchmarks" / "records"
FILE_SLACK_S = 40.0  # a file's baseline check and bench, on top of the search's budget


def append(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line cut by a kill
            continue
    return rows


class Clock:
    def __init__(self, deadline_s: float):
        self.started = time.monotonic()
        self.deadline_s = deadline_s

    def left(self) -> float:
        return self.deadline_s - (time.monotonic() - self.started)


def shuffled(suite: str, seed: int) -> list[Path]:
    files = sorted((SUITES / SUITE_DIRS[suite]).glob("*.py"))
    random.Random(f"{seed}:{suite}").shuffle(files)
    return files


async def measure(evaluator, path: Path) -> dict[str, Any]:
    """Does the file pass its own test, and how long do its timed calls take?"""
    from geak.evaluator.api import BadInput

    started = time.perf_counter()
    try:
        check = await evaluator.check(path)
    except BadInput as e:
        return {"path": str(path), "passing": False, "why": str(e)[:200], "seconds": time.perf_counter() - started}
    if not check.ok:
        return {
            "path": str(path),
            "passing": False,
            "why": check.message[:200],
            "seconds": time.perf_counter() - started,
        }
    bench = await evaluator.bench(path, check_first=False)
    call_us = bench.total_ms * 1e3 if bench.ok and bench.total_ms else None
    return {"path": str(path), "passing": True, "call_us": call_us, "bench": bench.message[:200],
            "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip


def pick(known: dict[str, dict[str, Any]], args) -> tuple[list[str], Path | None]:
    """The sample rule: in each suite's shuffled order, the first files that pass natively with timed calls of at least
    `--min-call-us`. Returns the files and the first file the rule needs that `known` lacks (None when complete);
    with `--files-json` or `--shard` an unmeasured file is passed over instead."""
    chosen: list[str] = []
    for suite, wanted in (("tb", args.tb), ("rocm", args.rocm)):
        picked = 0
        for path in shuffled(suite, args.seed):
            if picked >= wanted:
                break
            record = known.get(key(path))
            if record is None:
                if args.files_json or args.shard:
                    continue
                return chosen, path
            if record.get("passing") and (record.get("call_us") or 0) >= args.min_call_us:
                chosen.append(str(path))
                picked += 1
    return chosen, None


def key(path: str | Path) -> str:
    """A suite file's name in measurements: its suite folder and name (the same on any machine)."""
    return f"{Path(path).parent.name}/{Path(path).name}"


def measured(out: Path) -> dict[str, dict[str, Any]]:
    return {key(r["path"]): r for f in sorted(out.glob("durations*.jsonl")) for r in read_lines(f)}


async def measure_into(evaluator, path: Path, out: Path, name: str) -> None:
    record = await measure(evaluator, path)
    append(out / name, record)
    print(f"  measured {path.name}: passing={record['passing']} calls={record.get('call_us')} µs "
          f"({record.get('seconds')} s)", flush=True)  # fmt: skip


async def measure_share(args, out: Path, evaluator, clock: Clock) -> bool:
    """This shard's part of the scan window, then the wait for the others; False when the deadline came first."""
    k, n = args.shard
    known = measured(out)
    window = [*shuffled("tb", args.seed)[: args.scan_tb], *shuffled("rocm", args.seed)[: args.scan_rocm]]
    for path in window[k::n]:
        if key(path) not in known:
            if clock.left() < 60:
                return False
            await measure_into(evaluator, path, out, f"durations.{k}.jsonl")
    (out / f"measured.{k}").write_text("done\n")
    while not all((out / f"measured.{i}").exists() for i in range(n)):
        if clock.left() < 60:
            return False
        await asyncio.sleep(2)
    return True


async def choose_sample(args, out: Path, evaluator, clock: Clock) -> list[str] | None:
    """The sample (fixed once written); None when the deadline came first (measurements kept for --resume)."""
    sample_file = out / "sample.json"
    if sample_file.exists():
        return json.loads(sample_file.read_text())["files"]
    if args.shard and not args.files_json and not await measure_share(args, out, evaluator, clock):
        return None
    while True:
        known = measured(out)
        if args.files_json:
            known |= {key(r["path"]): r for r in json.loads(Path(args.files_json).read_text())["files"]}
        chosen, missing = pick(known, args)
        if missing is None:
            break
        if clock.left() < 60:
            return None
        await measure_into(evaluator, missing, out, "durations.jsonl")
    text = json.dumps({"seed": args.seed, "min_call_us": args.min_call_us, "files": chosen}, indent=1)
    partial = sample_file.with_suffix(f".{os.getpid()}")  # the shards write the same list: each whole, by rename
    partial.write_text(text)
    partial.replace(sample_file)
    return chosen


async def search_one(evaluator, path: str, args, out: Path) -> dict[str, Any]:
    from geak.agent.config import AgentConfig
    from geak.agent.session import OptimizeSession

    cfg = AgentConfig(search_time_s=args.budget, output_path=Path(args.runs_dir) if args.runs_dir else out / "runs")
    started = time.perf_counter()

    def progress(event) -> None:
        if event.kind != "waiting" or args.steps:  # the screening job's own steps: too many lines for a report
            print(f"    {time.perf_counter() - started:6.1f}s {event.message}", flush=True)

    session = OptimizeSession(path, cfg, evaluator=evaluator, progress=progress)
    try:
        result = await session.run()
    except Exception as e:  # a file the search cannot take: recorded, and the report goes on
        return {"file": Path(path).name, "path": key(path), "error": f"{type(e).__name__}: {e}"[:300],
                "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
    from geak.agent.search_record import file_record

    row = file_record(result, time.perf_counter() - started)
    return {**row, "path": key(path), "suite": "rocm" if "/rocm/" in path else "tb"}


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| file | knobs | screened | finalists | speedup [95% interval] | verdict | s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r.get("search") or {}
        if "error" in r:
            lines.append(f"| {r['file']} | - | - | - | - | error: {r['error'][:80]} | {r['seconds']} |")
            continue
        interval = f" [{r['interval'][0]:.3f}, {r['interval'][1]:.3f}]" if r.get("interval") else ""
        lines.append(
            f"| {r['file']} | {s.get('knobs', 0)} | {s.get('screened', 0)} ({s.get('correct', 0)} correct) | "
            f"{len(r.get('finalists') or [])} | {r['speedup']:.3f}{interval} | {r['verdict']} | {r['seconds']} |"
        )
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]], sample: list[str]) -> str:
    done = [r for r in rows if "error" not in r]
    if not rows:
        return "no file searched yet"
    speedups = [r["speedup"] for r in done]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else float("nan")
    faster = sum(bool(r.get("improved")) for r in done)
    slower = sum(1 for r in done if r.get("verdict") == "slower")
    rejected_slower = sum(f.get("verdict") == "slower" for r in done for f in r.get("finalists") or ())
    seconds = [r["seconds"] for r in rows]
    device = next((r.get("device") for r in done if r.get("device")), "?")
    share = 100 * faster / len(rows)
    return (
        f"{len(rows)} of {len(sample)} files: geometric-mean speedup {geomean:.3f}x; {faster} ({share:.0f}%) "
        f"significantly faster; {slower} slower (finalists the bench found slower and rejected: {rejected_slower}); "
        f"{len(rows) - len(done)} error(s); seconds per file max {max(seconds):.0f}, "
        f"median {statistics.median(seconds):.0f}; device {device}"
    )


def searched(out: Path) -> list[dict[str, Any]]:
    return [r for f in sorted(out.glob("search*.jsonl")) for r in read_lines(f)]


def report(out: Path, sample: list[str], args) -> None:
    """The table and summary of what DIR holds, and the run's raw record (``search_record``) at `--record`."""
    from geak.agent.search_record import run_record, write_record

    rows = [r for r in searched(out) if any(Path(p).name == r["file"] for p in sample)]
    text = table(rows) + "\n\n" + summary(rows, sample) + "\n"
    (out / "report.md").write_text(text)
    print(text, flush=True)
    if rows:
        setup = {"seed": args.seed, "budget_s": args.budget, "tb": args.tb, "rocm": args.rocm,
                 "min_call_us": args.min_call_us, "sample": [key(p) for p in sample]}  # fmt: skip
        record = run_record(rows, f"benchmarks/search_report.py --out {out.name}", **setup)
        path = (
            Path(args.record)
            if args.record
            else RECORDS / f"search-run-{record['date']}-seed{args.seed}-{out.name}.json"
        )
        write_record(path, record)
        print(f"the run's record: {path}", flush=True)


async def main_async(args) -> None:
    from geak.agent.config import AgentConfig, eval_options
    from geak.evaluator.api import Evaluator

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report:
        sample_file = out / "sample.json"
        sample = json.loads(sample_file.read_text())["files"] if sample_file.exists() else []
        return report(
            out, sample or [str(p) for name in (args.only or "").split(",") if name for p in _find(name)], args
        )
    earlier = any(any(out.glob(pattern)) for pattern in ("sample.json", "durations*.jsonl", "search*.jsonl"))
    if earlier and not (args.resume or args.shard):
        raise SystemExit(f"{out} holds an earlier run: pass --resume to continue, or another --out")
    clock = Clock(args.deadline_s)
    k, n = args.shard or (0, 1)
    async with Evaluator(eval_options(AgentConfig())) as evaluator:
        if args.only:
            sample = [str(p) for name in args.only.split(",") for p in _find(name.strip())]
        else:
            sample = await choose_sample(args, out, evaluator, clock)
            if sample is None:
                print("stopped while choosing the sample (deadline); continue with --resume", flush=True)
                return
        done = {r["file"] for r in searched(out)}
        mine = [p for p in sample if Path(p).name not in done][k::n]
        print(f"sample: {len(sample)} files ({len(done)} searched before, {len(mine)} for this shard)", flush=True)
        for path in mine:
            if clock.left() < args.budget + FILE_SLACK_S:
                print(f"stopped before {Path(path).name} (deadline); continue with --resume", flush=True)
                break
            print(f"== {Path(path).name}", flush=True)
            row = await search_one(evaluator, path, args, out)
            append(out / ("search.jsonl" if args.shard is None else f"search.{k}.jsonl"), row)
            print(f"   -> {row.get('speedup', '-')}x {row.get('verdict', row.get('error'))} in {row['seconds']} s",
                  flush=True)  # fmt: skip
    report(out, sample, args)


def shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
        raise argparse.ArgumentTypeError(f"--shard takes K/N with 0 <= K < N, not {text!r}")
    return int(k), int(n)


def _find(name: str) -> list[Path]:
    if Path(name).exists():
        return [Path(name)]
    found = [p for d in SUITE_DIRS.values() for p in (SUITES / d).glob(name)]
    if not found:
        raise SystemExit(f"--only: no suite file {name}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline-s", type=float, default=500.0)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--files-json")
    parser.add_argument("--only", help="comma-separated suite file names (glob patterns) instead of the sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tb", type=int, default=20, help="TritonBench-revised files in the sample")
    parser.add_argument("--rocm", type=int, default=4, help="ROCm files in the sample")
    parser.add_argument("--min-call-us", type=float, default=20.0)
    parser.add_argument("--budget", type=float, default=60.0, help="the search's time budget per file (seconds)")
    parser.add_argument("--shard", type=shard, help="K/N: this process's share, one process per GPU")
    parser.add_argument("--scan-tb", type=int, default=80, help="with --shard: TritonBench-revised files measured")
    parser.add_argument("--scan-rocm", type=int, default=12, help="with --shard: ROCm files measured")
    parser.add_argument("--runs-dir", help="where the optimize runs write their files (default DIR/runs)")
    parser.add_argument("--report", action="store_true", help="only print the table of what DIR holds")
    parser.add_argument(
        "--record", help="the run's raw record (default benchmarks/records/search-run-DATE-seedN-DIR.json)"
    )
    parser.add_argument("--steps", action="store_true", help="also print the evaluator's own steps (a timeline)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="the evaluator's log on stderr (-vv: debug)")
    args = parser.parse_args()
    if args.verbose:
        from geak.server.cli.entry import LOG_FORMAT

        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
        logging.getLogger("geak").setLevel(logging.DEBUG if args.verbose > 1 else logging.INFO)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
