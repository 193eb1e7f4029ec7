"""How fast the evaluator's verdicts come, on this machine's GPU (not a test): the figures of issue 18's table.

    python benchmarks/speed_report.py PART... [--out DIR]     PART in: cli aa aa-small eval table

* cli: `geak bench K --against K` as a user runs it (a fresh command each time, default options) for corpus kernels:
  wall time, the verdict, the rounds taken and the device's noise floor.
* aa: A/A on corpus kernels and suite files, three times each through one warm evaluator: never faster or slower.
* aa-small: the same, with `geak eval`'s settings, on the TritonBench-revised files whose 1-3 µs calls came out 2-10%
  "faster" or "slower" against themselves in a `geak eval` before they were judged in the band their placement
  needs (``docs/timing.md``, the margin).
* eval: `geak eval` of the TritonBench-revised golden files' kernel code as predictions (every correct one timed),
  the same with `--no-timing`, and a plain GEAK-eval-style judge (``plain_judge.py``) on the same predictions.
  `--gpu-ids 0,1` runs the timed eval on two GPUs; `--file-timeout` is the limit of a check and of a judged run.
* table: the figures found under --out (suite runs: ``suite_report.py``'s results.json in DIR/tb and DIR/rocm; the
  language server's: ``lsp_bench.py --json`` in DIR/lsp.json), with the device named.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "snippets" / "kernels"
TB_DATA = ROOT / "shared" / "suites" / "tritonbench_revised"
if not TB_DATA.is_dir():
    TB_DATA = ROOT.parent / "shared" / "suites" / "tritonbench_revised"
TB = TB_DATA / "TritonBench_G_v1"
CLI_KERNELS = ("vector_add.py", "dropout.py", "softmax_rowwise.py", "layer_norm_fwd.py")
SMALL_CALLS = tuple(
    TB / name
    for name in (
        "chunk_cumsum_kernel.py", "relu_triton_kernel.py", "matmul_triton2.py", "matrix_transpose.py",
        "matrix_vector_multip.py", "ksoftmax_triton.py", "add_example.py", "sin_kernel.py", "l2_norm_bwd.py",
        "swiglu_triton.py", "dequantize_rowwise.py", "l2_norm_triton1.py", "logsumexp_fwd.py",
        "multinomial_sampling.py", "diag_ssm_triton.py",
    )
)  # fmt: skip
AA_FILES = (
    KERNELS / "vector_add.py",
    KERNELS / "softmax_rowwise.py",
    KERNELS / "layer_norm_fwd.py",
    KERNELS / "matmul_fp16.py",
    KERNELS / "dropout.py",
    TB / "layer_norm_liger.py",
    TB / "swiglu_fwd.py",
    TB / "triton_matmul.py",
)


def geak(*args: str, timeout_s: float = 600) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "geak.server.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s)  # fmt: skip
    return done, time.perf_counter() - started


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"


def part_cli(out: Path) -> dict:
    rows = []
    for name in CLI_KERNELS:
        path = str(KERNELS / name)
        done, wall = geak("bench", path, "--against", path, "--json")
        data = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
        s = data.get("speedup") or {}
        rows.append({"kernel": name, "wall_s": round(wall, 2), "ok": data.get("ok"), "verdict": s.get("verdict"),
                     "ratio": s.get("ratio"), "interval": [s.get("low"), s.get("high")], "rounds": s.get("rounds"),
                     "margin": s.get("margin"), "message": (data.get("message") or done.stderr)[-300:]})  # fmt: skip
        print(f"cli bench {name} --against itself: {wall:.1f} s, {s.get('verdict')} {s.get('ratio')} "
              f"[{s.get('low')}, {s.get('high')}] in {s.get('rounds')} rounds", flush=True)  # fmt: skip
    return {"rows": rows}


async def aa_runs(repeats: int, files: tuple[Path, ...] = AA_FILES, batch: bool = False) -> list[dict]:
    from geak.agent.batch.eval_slots import batch_eval_options
    from geak.agent.config import AgentConfig
    from geak.evaluator.api import EvalOptions, Evaluator

    options = batch_eval_options(AgentConfig(), "gpu", 0) if batch else EvalOptions()
    rows = []
    async with Evaluator(options) as ev:
        for repeat in range(repeats):
            for path in files:
                if not path.exists():
                    continue
                started = time.perf_counter()
                b = await ev.bench(path, against=path)
                s = b.speedup
                seconds = round(time.perf_counter() - started, 2)
                rows.append({"file": path.name, "repeat": repeat, "ok": b.ok, "seconds": seconds,
                             "verdict": s.verdict if s else None, "ratio": s.ratio if s else None,
                             "interval": [s.low, s.high] if s else None, "rounds": s.rounds if s else None,
                             "margin": s.margin if s else None, "message": b.message[:300]})  # fmt: skip
                said = f"{s.ratio:.4f}x [{s.low:.4f}, {s.high:.4f}] {s.verdict} ({s.rounds} rounds)" if s else b.message
                print(f"A/A {path.name} #{repeat + 1}: {seconds} s, {said[:300]}", flush=True)
    return rows


def part_aa(out: Path, repeats: int, files: tuple[Path, ...] = AA_FILES, batch: bool = False) -> dict:
    rows = asyncio.run(aa_runs(repeats, files, batch))
    claimed = [r for r in rows if r["verdict"] in ("faster", "slower")]
    return {"rows": rows, "files": len({r["file"] for r in rows}), "repeats": repeats, "claimed": len(claimed)}


def golden_predictions(path: Path) -> int:
    """The golden files' kernel code (what precedes the test) as one prediction each, TritonBench's JSONL format."""
    from geak.evaluator.triton_file import SEPARATOR

    items = json.loads((TB_DATA / "TritonBench_G_v1.json").read_text())
    with path.open("w") as f:
        for item in items:
            code = (TB / item["file"]).read_text().split(SEPARATOR)[0]
            f.write(json.dumps({"instruction": item["comp_instru"], "predict": code, "label": item["output"]}) + "\n")
    return len(items)


def part_eval(
    out: Path, gpu_ids: str, jobs_per_gpu: int | None, parts: list[str], timeout_s: float, file_timeout_s: float
) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    preds = out / "golden_predictions.jsonl"
    n = golden_predictions(preds)
    found: dict = {"predictions": n, "gpu_ids": gpu_ids}
    for kind in parts:
        if kind == "judge":
            found["judge"] = plain_judge(preds, timeout_s, file_timeout_s)
        else:
            flags = ["--no-timing"] if kind == "no-timing" else []
            folder = out / f"eval-{kind}"
            jobs = ["--jobs-per-gpu", str(jobs_per_gpu)] if jobs_per_gpu else []
            args = ["eval", str(preds), "--suite", "tritonbench", "--data", str(TB_DATA), "--gpu-ids", gpu_ids,
                    *jobs, "--timeout", str(file_timeout_s), "--output", str(folder), *flags]  # fmt: skip
            found[kind] = timed_eval(args, folder, timeout_s)
        print(f"eval {kind}: {json.dumps(found[kind])[:600]}", flush=True)
    return found


def timed_eval(args: list[str], folder: Path, timeout_s: float) -> dict:
    """Run `geak eval` as a user does, its progress lines kept with their times (folder/progress.log); its summary, or
    what it scored in the time; when its checks ended and what its timings took (the records' `timing_s`)."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    checks_end: float | None = None
    scored: list[tuple[float, str, bool]] = []  # (when, file, timed) of each record's progress line
    with (folder / "progress.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "geak.server.cli", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stderr is not None
        watchdog = threading.Timer(timeout_s, proc.kill)
        watchdog.start()
        for line in proc.stderr:
            at = time.perf_counter() - started
            log.write(f"{at:7.1f} {line}")
            if checks_end is None and line.startswith("every prediction checked"):
                checks_end = at
            if record := RECORD_LINE.match(line):
                scored.append((at, record["file"], record["speed"] is not None))
        proc.wait()
        watchdog.cancel()
        stopped = proc.returncode < 0  # killed by the watchdog
    wall = time.perf_counter() - started
    records_file = folder / "records.jsonl"
    records = [json.loads(line) for line in records_file.read_text().splitlines()] if records_file.exists() else []
    timings = [r["timing_s"] for r in records if r.get("timing_s")]
    found: dict = {"stopped_after_s" if stopped else "wall_s": round(wall, 1), "scored": len(records),
                   "checks_ended_s": checks_end, "timed": len(timings),
                   "timing_s_sum": round(sum(timings), 1)}  # fmt: skip
    if checks_end is not None and timings:
        found["timings_wall_s"] = round(wall - checks_end, 1)
    found.update(timeline(scored))
    if timings:  # the device alone, and its parts as the timing jobs reported them
        found["alone_s_sum"] = round(sum(r.get("alone_s") or 0.0 for r in records), 1)
        parts: dict[str, float] = {}
        for r in records:
            for part, seconds in (r.get("phases_s") or {}).items():
                parts[part] = parts.get(part, 0.0) + seconds
        found["phases_s_sum"] = {part: round(seconds, 1) for part, seconds in sorted(parts.items())}
    summary = folder / "summary.json"
    if not stopped and summary.exists():
        found.update(json.loads(summary.read_text()), wall_s=round(wall, 1))
    elif not stopped:
        found["error"] = f"exit {proc.returncode}"
    return found


RECORD_LINE = re.compile(r"^\[\d+/\d+\] (?P<file>\S+) on [^:]+: (pass|call only|fail)(?P<speed> \d+\.\d+x)?")


def timeline(scored: list[tuple[float, str, bool]]) -> dict:
    """What ended the run: when the last timed record and the last untimed one (a failed or untimed check) were
    scored, and the last file of all (a check held to its limit, or a timing)."""
    found: dict = {}
    timed = [at for at, _, was_timed in scored if was_timed]
    untimed = [at for at, _, was_timed in scored if not was_timed]
    if timed:
        found["last_timed_at_s"] = round(timed[-1], 1)
    if untimed:
        found["last_untimed_at_s"] = round(untimed[-1], 1)
    if scored:
        found["last_scored"] = [file for _, file, _ in scored[-3:]]
    return found


def plain_judge(preds: Path, timeout_s: float, file_timeout_s: float) -> dict:
    """The plain judge on the same predictions, with the same limit per file as `geak eval`'s per check (its
    verdicts with their times in judge-progress.log beside the predictions: how far a run cut short got)."""
    started = time.perf_counter()
    progress = preds.parent / "judge-progress.log"
    try:
        command = [sys.executable, str(ROOT / "benchmarks" / "plain_judge.py"), str(preds), "--data", str(TB_DATA),
                   "--jobs", "14", "--timeout", str(file_timeout_s), "--json", "--progress", str(progress)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        scored = len(progress.read_text().splitlines()) if progress.exists() else 0
        return {"stopped_after_s": round(time.perf_counter() - started, 1), "scored": scored}
    wall = time.perf_counter() - started
    return {"wall_s": round(wall, 1), **(json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr})}


def read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def part_table(out: Path) -> str:
    cli, aa = read(out / "cli.json"), read(out / "aa.json")
    tb, rocm = read(out / "tb" / "results.json"), read(out / "rocm" / "results.json")
    ev1, ev2, lsp = read(out / "eval1.json"), read(out / "eval2.json"), read(out / "lsp.json")
    device = (cli or aa or ev1 or {}).get("device", "?")
    rows = ["| figure | measured | target |", "|---|---|---|"]
    if cli:
        walls = [r["wall_s"] for r in cli["rows"]]
        margins = {r["margin"] for r in cli["rows"] if r["margin"]}
        rows.append(f"| `geak bench A --against A`, corpus kernels, default options (a fresh command each) | "
                    f"{min(walls):.1f}–{max(walls):.1f} s; noise floor ±{100 * max(margins or {0}):.2g}% | ≤ 6 s, "
                    "≤ ±1.5% |")  # fmt: skip
    if aa:
        verdicts = {r["verdict"].split(" (")[0] if r["verdict"] else "not timed" for r in aa["rows"]}
        rows.append(f"| A/A, {aa['files']} kernels × {aa['repeats']} | {aa['claimed']} claimed a change "
                    f"({', '.join(sorted(verdicts))}) | never faster or slower |")  # fmt: skip
    for name, data, target in (("TritonBench-revised", tb, "≤ 4 min"), ("ROCm benchmark", rocm, "≤ 6 min")):
        if data:
            t = data["totals"]
            rows.append(f"| whole {name} against itself | {t['geak_wall_s'] / 60:.1f} min ({t['self_pass']} pass of "
                        f"{t['native_pass']} natively passing; {t['false_fails']} false fails) | {target} |")
    for data, gpus, target in ((ev1, "one GPU", "≤ 4 min"), (ev2, "two GPUs", "≤ 2.5 min")):
        if data and "timed" in data:
            e = data["timed"]
            took = (f"{e['wall_s'] / 60:.1f} min ({e.get('exec_pass')} correct)" if "wall_s" in e else
                    f"stopped at {e['stopped_after_s'] / 60:.1f} min, {e['scored']} scored")  # fmt: skip
            if e.get("checks_ended_s") is not None:
                took += f"; checks ended at {e['checks_ended_s']:.0f} s, {e['timed']} timed"
            rows.append(f"| `geak eval`, {data['predictions']} predictions, correct ones timed, {gpus} | {took} | "
                        f"{target} |")  # fmt: skip
    if ev1 and "wall_s" in ev1.get("no-timing", {}) and "wall_s" in ev1.get("judge", {}):
        ratio = ev1["no-timing"]["wall_s"] / max(ev1["judge"]["wall_s"], 1e-9)
        rows.append(f"| `geak eval --no-timing` vs a plain judge | {ev1['no-timing']['wall_s']:.0f} s vs "
                    f"{ev1['judge']['wall_s']:.0f} s ({ratio:.2f}×) | ≤ 2× |")  # fmt: skip
    if lsp and lsp.get("save_to_diagnostics_ms"):
        rows.append(f"| warm didSave → diagnostics | median {lsp['save_to_diagnostics_ms']['median'] / 1e3:.2f} s | "
                    "≤ 1 s |")  # fmt: skip
    return f"Measured on {device}\n\n" + "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="+", choices=("cli", "aa", "aa-small", "eval", "table"))
    parser.add_argument("--out", type=Path, default=Path("speed_report"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpu-ids", default="0")
    parser.add_argument("--jobs-per-gpu", type=int, default=None, help="default: geak eval's own (the cores allow)")
    parser.add_argument("--eval-parts", default="timed,no-timing,judge")
    parser.add_argument("--eval-timeout", type=float, default=590,
                        help="seconds per `geak eval` (past them: how many it scored in the time)")  # fmt: skip
    parser.add_argument("--file-timeout", type=float, default=300,
                        help="a check's limit (`geak eval --timeout`), a file's run's in the plain judge")  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for part in args.parts:
        if part == "table":
            print(part_table(args.out))
            continue
        started = time.perf_counter()
        if part == "cli":
            found = part_cli(args.out)
        elif part == "aa":
            found = part_aa(args.out, args.repeats)
        elif part == "aa-small":
            found = part_aa(args.out, args.repeats, SMALL_CALLS, batch=True)
        else:
            found = part_eval(args.out / "eval", args.gpu_ids, args.jobs_per_gpu, args.eval_parts.split(","),
                              args.eval_timeout, args.file_timeout)  # fmt: skip
        found.update(device=device_name(), wall_s=round(time.perf_counter() - started, 1))
        gpus = len(re.findall(r"\d+", args.gpu_ids))
        name = part if part != "eval" else f"eval{gpus}"
        (args.out / f"{name}.json").write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
