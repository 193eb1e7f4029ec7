"""Suite report: each file of a benchmark suite run natively, then `geak check` alone and against itself.

    python benchmarks/suite_report.py ../shared/suites/tritonbench_revised/TritonBench_G_v1 --out report/tb
    python benchmarks/suite_report.py ../shared/suites/rocm/ROCm_v1 --out report/rocm

Native: `python FILE` (pytest modules: `python -m pytest FILE`, their `test_performance*` cases deselected), in
parallel, each with a time limit. GEAK: one warm evaluator for the whole suite (`geak check --against-self`'s
engine), so the wall time printed is what a user waits for. Writes `results.json` (every file, with reasons and its
progress messages timed) and `table.md` under --out, and prints the table, every file where the three columns
disagree, and where the checks' time went (`phases.md`: the time between one progress message and the next, summed
over the suite by what the first one says).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

from geak.evaluator.api import EvalOptions
from geak.evaluator.shared.probe_rules import GHOST_RUN, KIND_WORDS, SECOND_RUN
from geak.server.cli.check_many import FileVerdict, check_many, triton_files


async def run_native(file: Path, timeout_s: float, limit: asyncio.Semaphore, shim: Path | None) -> dict:
    pytest_style = "import pytest" in file.read_text(encoding="utf-8", errors="replace")
    command = [sys.executable, str(file)]
    if pytest_style:
        command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", str(file)]
        command += ["-k", "not performance"]
    env = dict(os.environ)
    if shim is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(shim), env.get("PYTHONPATH"))))
    async with limit:
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=file.parent,
            env=env,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(timeout_s):
                out, _ = await proc.communicate()
            code = proc.returncode
        except TimeoutError:
            os.killpg(proc.pid, 9)
            out, code = (await proc.communicate())[0], "timeout"
    tail = out.decode("utf-8", "replace").strip().splitlines()[-3:]
    return {"ok": code == 0, "code": code, "seconds": round(time.perf_counter() - started, 1), "tail": tail}


def row(
    file: Path, native: dict, verdict: FileVerdict, done_s: float | None = None, steps: list | None = None
) -> dict:
    """One file's line of results.json; `done_s`: when it finished, from the start of the GEAK part; `steps`: its
    progress messages, each with its time from the file's start."""
    alone = verdict.alone or verdict.result
    against = verdict.result if verdict.result is not alone else None  # a file failing alone is not run against itself
    seconds = sum(r.duration_s for r in (alone, against) if r is not None)
    return {
        "file": file.name,
        "native": native,
        "check": {"ok": bool(alone and alone.ok), "stage": alone.stage if alone else None},
        "self": {"ok": verdict.verdict == "pass", "verdict": verdict.verdict},
        "why": verdict.message.strip().splitlines()[0][:300] if verdict.verdict != "pass" else "",
        "geak_s": round(seconds, 1),
        "done_s": None if done_s is None else round(done_s, 1),
        "steps": steps or [],
    }


def phase_of(job: str, message: str) -> str:
    """What a progress message starts, whatever the file: `reference: other sizes`, `candidate: test run`."""
    if message.startswith(("running the reference", "running the tests of")):
        return f"{job}: job start (a free fork server, the trusted cache, fork, isolation, GPU context)"
    if message.startswith("importing "):
        return f"{job}: importing the file"
    if message.startswith(("reading the outputs", "comparing the outputs")):
        return f"{job}: the caller judging its outputs"
    what = message.removeprefix("running ")
    what = re.sub(r" \(\d[\d,]* kernel programs interpreted\)$", "", what)
    for kind in KIND_WORDS.values():
        if what.startswith(kind):
            run = next((r for r in (GHOST_RUN, SECOND_RUN) if what.endswith(r)), "")
            return f"{job}: {kind}{run}"
    if what == "probes":
        return f"{job}: between the tests and the first probe"
    return f"{job}: test run" + (" again" if what.endswith(SECOND_RUN) else "")


def phases(steps: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds per phase of one file's check: from each message to the next (the last to the file's end)."""
    spent: dict[str, float] = defaultdict(float)
    job = "reference"
    for (at, message), (until, _) in itertools.pairwise(steps):
        if message.startswith("running the tests of"):
            job = "candidate"
        elif message.startswith("running the reference"):
            job = "reference"
        spent[phase_of(job, message)] += until - at
    return spent


def phase_table(all_steps: list[list[tuple[float, str]]], slots: int) -> str:
    """Where the suite's check time went, summed over its files, largest first."""
    total: dict[str, float] = defaultdict(float)
    files: dict[str, int] = defaultdict(int)
    for steps in all_steps:
        for phase, seconds in phases(steps).items():
            total[phase] += seconds
            files[phase] += 1
    whole = sum(total.values()) or 1.0
    lines = [
        f"| phase | files | seconds | share | over {slots} slots |",
        "|---|---|---|---|---|",
    ]
    for phase, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {phase} | {files[phase]} | {seconds:.0f} | {seconds / whole:.1%} | {seconds / slots:.0f} s |")
    lines.append(f"| all | {len(all_steps)} | {whole:.0f} | 100% | {whole / slots:.0f} s |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    names = Path(args.files_from).read_text().split() if args.files_from else []
    paths = [Path(args.suite) / n for n in names] if names else [args.suite]
    files = [f.resolve() for f in triton_files(paths)]  # native runs start in each file's folder
    if args.limit:
        files = files[: args.limit]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shim = Path(args.shim).resolve() if args.shim else None
    started = time.perf_counter()
    if args.native_json:  # native results of an earlier run (--only native)
        saved = json.loads(Path(args.native_json).read_text())
        natives = [saved.get(f.name, {"ok": False, "code": "not run", "seconds": 0, "tail": []}) for f in files]
    else:
        limit = asyncio.Semaphore(args.native_jobs)
        natives = await asyncio.gather(*(run_native(f, args.native_timeout, limit, shim) for f in files))
        (out / "native.json").write_text(json.dumps({f.name: n for f, n in zip(files, natives, strict=True)}))
    native_s = time.perf_counter() - started
    print(f"native: {sum(n['ok'] for n in natives)}/{len(files)} pass in {native_s:.0f} s", flush=True)
    if args.only == "native":
        return 0

    options = EvalOptions(timeout_s=args.timeout, backend=args.backend, max_concurrent=args.jobs)
    done = [0]

    partial = (out / "partial.jsonl").open("w")

    done_at: dict[Path, float] = {}
    steps: dict[Path, list[tuple[float, str]]] = defaultdict(list)

    def on_progress(file: Path, message: str) -> None:
        steps[file].append((time.perf_counter(), message))

    def timed_steps(file: Path) -> list[tuple[float, str]]:
        first = steps[file][0][0] if steps[file] else 0.0
        return [(round(at - first, 2), message) for at, message in steps[file]]

    def on_done(v: FileVerdict) -> None:  # written as files finish: a run cut short still says what it found
        done[0] += 1
        print(f"[{done[0]}/{len(files)}] {Path(v.file).name}: {v.verdict}", flush=True)
        index = files.index(Path(v.file))
        done_at[files[index]] = time.perf_counter() - started
        steps[files[index]].append((time.perf_counter(), "done"))
        line = row(files[index], natives[index], v, done_at[files[index]], timed_steps(files[index]))
        partial.write(json.dumps(line, default=str) + "\n")
        partial.flush()

    def on_term(signum, frame) -> None:  # cut short (`timeout`): the files still being checked, with their steps
        unfinished = {f.name: timed_steps(f) for f in files if f not in done_at and steps[f]}
        (out / "unfinished.json").write_text(json.dumps(unfinished, indent=1))
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
    started = time.perf_counter()
    # Longest first (by an earlier run's GEAK time where given, else the native run's): a slow file started last
    # would hold the whole run up alone (TritonBench-revised on an H200: `spinning_lock_reduction.py` finished last).
    earlier = _earlier_seconds(args.order_from) if args.order_from else {}
    native_of = dict(zip(files, natives, strict=True))
    cost = {f: earlier.get(f.name, float(native_of[f].get("seconds") or 0)) for f in files}
    slow_first = sorted(files, key=lambda f: -cost[f])
    found = await check_many(slow_first, options, against_self=True, on_done=on_done, on_progress=on_progress)
    verdict_of = dict(zip(slow_first, found, strict=True))
    verdicts = [verdict_of[f] for f in files]
    geak_s = time.perf_counter() - started
    rows = [row(f, n, v, done_at.get(f), timed_steps(f)) for f, n, v in zip(files, natives, verdicts, strict=True)]
    totals = {
        "files": len(rows),
        "native_pass": sum(r["native"]["ok"] for r in rows),
        "check_pass": sum(r["check"]["ok"] for r in rows),
        "self_pass": sum(r["self"]["ok"] for r in rows),
        "false_fails": sum(r["native"]["ok"] and not (r["check"]["ok"] and r["self"]["ok"]) for r in rows),
        "native_wall_s": round(native_s),
        "geak_wall_s": round(geak_s),
    }
    (out / "results.json").write_text(json.dumps({"totals": totals, "files": rows}, indent=1, default=str))
    lines = [
        "| files | native pass | `geak check` pass | `--against-self` pass | false fails | GEAK wall time |",
        "|---|---|---|---|---|---|",
        f"| {totals['files']} | {totals['native_pass']} | {totals['check_pass']} | {totals['self_pass']} | "
        f"{totals['false_fails']} | {totals['geak_wall_s']} s |",
        "",
        "| file | native | check | self | why |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if len({r["native"]["ok"], r["check"]["ok"], r["self"]["ok"]}) > 1 or not r["native"]["ok"]:
            tail = " ".join(r["native"]["tail"])[-160:]
            native = "pass" if r["native"]["ok"] else f"fail ({r['native']['code']}: {tail})".replace("|", "/")
            why = r["why"].replace("|", "/")
            lines.append(f"| {r['file']} | {native} | {r['check']['ok']} | {r['self']['ok']} | {why} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    where = phase_table([r["steps"] for r in rows if r["steps"]], args.jobs)
    (out / "phases.md").write_text(where + "\n")
    print("\nwhere the checks' time went\n" + where)
    return 0


def _earlier_seconds(results: str) -> dict[str, float]:
    """Each file's GEAK time in an earlier run's results.json (files it lacks are not there)."""
    rows = json.loads(Path(results).read_text())["files"]
    return {r["file"]: float(r["geak_s"]) for r in rows if r.get("geak_s") is not None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", help="folder of suite files")
    parser.add_argument("--out", default="suite_report")
    parser.add_argument("--backend", default="auto", choices=("auto", "gpu", "interpreter"))
    parser.add_argument("--jobs", type=int, default=4, help="GEAK checks at once")
    parser.add_argument("--native-jobs", type=int, default=8, help="native runs at once")
    parser.add_argument("--timeout", type=float, default=180, help="per GEAK job, seconds")
    parser.add_argument("--native-timeout", type=float, default=300)
    parser.add_argument("--limit", type=int, default=0, help="only the first N files")
    parser.add_argument("--files-from", help="only the files of the suite named in this file (one name a line)")
    parser.add_argument("--shim", help="folder to put on PYTHONPATH for native runs (the geak_eval shim)")
    parser.add_argument("--only", choices=("native",), help="run the files natively only (writes native.json)")
    parser.add_argument("--native-json", help="take the native results from this native.json instead of running")
    parser.add_argument("--order-from", help="an earlier results.json: its GEAK times order this run, slowest first")
    args = parser.parse_args()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
