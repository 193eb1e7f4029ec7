"""Batch figures on GPUs, time-boxed: `geak eval` of the golden TritonBench-revised files as their own predictions,
and `geak run` (launch-parameter search, no model) over N problems on one GPU and on two, with the device of every
evaluator and problem in the log.

``python benchmarks/gpu_batch_report.py --data ../shared/suites/tritonbench_revised [--problems 20] [--budget 3]
[--eval-problems 184] [--rounds 5] [--deadline-s 450] [--out DIR]``

Each part runs as a `geak` command with its share of the deadline; a part that reaches it gets Ctrl-C (SIGINT),
which keeps every finished problem, and its figures are reported from what finished. Expectations: every golden
file that passes natively scores as correct with a speedup of about 1.00x; two GPUs give close to twice the
problems per hour of one.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

GEAK = [sys.executable, "-m", "geak.server.cli"]


def run_part(name: str, argv: list[str], limit_s: float, log: Path) -> dict:
    """Run a geak command; SIGINT at `limit_s` (finished work is kept). Returns rc, wall time, whether cut."""
    started = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen([*GEAK, *argv], stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            out, _ = proc.communicate(timeout=max(limit_s, 10))
            cut = False
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
            cut = True
    wall = time.perf_counter() - started
    print(f"[{name}] rc {proc.returncode} in {wall:.0f} s{' (cut at the deadline)' if cut else ''}", flush=True)
    return {"rc": proc.returncode, "wall_s": round(wall, 1), "cut": cut, "stdout": out}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def golden_predictions(data: Path, path: Path, start: int, limit: int) -> int:
    items = json.loads((data / "TritonBench_G_v1.json").read_text())[start : start + limit]
    with path.open("w") as f:
        for item in items:
            code = (data / "TritonBench_G_v1" / item["file"]).read_text()
            f.write(json.dumps({"instruction": item["comp_instru"], "predict": code, "label": item["output"]}) + "\n")
    return len(items)


def eval_part(args, out: Path, limit_s: float, gpu_ids: str) -> dict:
    preds = out / "golden_predictions.jsonl"
    n = golden_predictions(args.data, preds, args.eval_start, args.eval_problems)
    resume = ["--resume"] if (out / "eval" / "records.jsonl").exists() else []  # what an earlier call left
    part = run_part("eval", ["eval", str(preds), "--suite", "tritonbench", "--data", str(args.data), "--rounds",
                             str(args.rounds), "--gpu-ids", gpu_ids, "--output", str(out / "eval"), *resume],
                    limit_s, out / "eval.log")  # fmt: skip
    records = read_jsonl(out / "eval" / "records.jsonl")
    scored = [r for r in records if not r.get("reference_error")]
    speedups = sorted(r["speedup"] for r in scored if r.get("speedup"))
    return {
        "predictions": n,
        "scored": len(records),
        "golden_fails_natively": sorted(r["filename"] for r in records if r.get("reference_error")),
        "natively_passing": len(scored),
        "correct": sum(bool(r["pass_exe"]) for r in scored),
        "natively_passing_but_not_correct": [
            {"file": r["filename"], "stage": r.get("stage"), "message": (r.get("message") or "")[:300]}
            for r in scored if not r["pass_exe"]
        ],
        "speedup_median": speedups[len(speedups) // 2] if speedups else None,
        "speedup_range": [speedups[0], speedups[-1]] if speedups else None,
        "speedup_outside_0.95_1.05": sum(not 0.95 <= s <= 1.05 for s in speedups),
        **{k: part[k] for k in ("rc", "wall_s", "cut")},
    }


def sample_gpus(stop: threading.Event, samples: list) -> None:
    query = ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
    while not stop.wait(1.0):
        try:
            text = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return
        samples.append([line.split(", ") for line in text.strip().splitlines()])


def run_part_on(args, out: Path, name: str, gpu_ids: list[int], limit_s: float) -> dict:
    folder = out / name
    config = {
        "suite": "tritonbench",
        "data_path": str(args.data),
        "datalen": args.problems,
        "start_idx": args.start_idx,
        "search_time_s": args.budget,
        "bench_rounds": args.rounds,
        "gpu_ids": gpu_ids,
        "output_path": str(folder),
    }
    (out / f"{name}.yaml").write_text(yaml.safe_dump(config))
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=sample_gpus, args=(stop, samples), daemon=True)
    sampler.start()
    earlier = len(read_jsonl(folder / "results.jsonl"))  # problems an earlier call finished: this one resumes
    resume = ["--resume"] if earlier else []
    part = run_part(name, ["run", str(out / f"{name}.yaml"), "--json", *resume], limit_s, out / f"{name}.log")
    stop.set()
    sampler.join(timeout=15)
    rows = read_jsonl(folder / "results.jsonl")
    run_info = json.loads((folder / "run.json").read_text()) if (folder / "run.json").exists() else {}
    busy = {}
    for sample in samples:
        for index, util, _mem in sample:
            busy.setdefault(index, 0)
            busy[index] += int(util) > 0
    finished = len(rows) - earlier
    return {
        "gpus": gpu_ids,
        "finished": finished,
        "finished_before": earlier,
        "wall_s": part["wall_s"],
        "cut": part["cut"],
        "problems_per_hour": round(finished / part["wall_s"] * 3600, 1) if finished else None,
        "evaluators": run_info.get("evaluators", []),
        "problems_per_slot": {s: sum(r["slot"] == s for r in rows) for s in sorted({r["slot"] for r in rows})},
        "improved": sum(bool(r.get("improved")) for r in rows),
        "speedups": sorted(round(r["speedup"], 3) for r in rows if r.get("speedup")),
        "errors": {r["filename"]: (r.get("error") or "")[:200] for r in rows if r.get("error")},
        "nvidia_smi_busy_samples_per_gpu": busy,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/suites/tritonbench_revised"))
    parser.add_argument("--problems", type=int, default=20, help="problems of the geak run parts")
    parser.add_argument("--start-idx", type=int, default=0)
    parser.add_argument("--budget", type=float, default=20, help="search seconds per problem")
    parser.add_argument("--eval-problems", type=int, default=184, help="golden files scored by geak eval")
    parser.add_argument("--eval-start", type=int, default=0, help="the first golden file scored (an index)")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds (eval and the search's final)")
    parser.add_argument("--deadline-s", type=float, default=450, help="the whole report's time box")
    parser.add_argument("--parts", default="eval,run1,run2", help="comma-separated: eval, run1, run2")
    parser.add_argument("--out", type=Path, default=Path("gpu_batch_report"))
    args = parser.parse_args()
    args.data = args.data.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    gpus = list(range(torch.cuda.device_count()))
    if not gpus:
        print("no GPU visible", file=sys.stderr)
        return 2
    parts = [p for p in args.parts.split(",") if p != "run2" or len(gpus) >= 2]
    shares = {"eval": 0.45, "run1": 0.33, "run2": 0.22}
    total = sum(shares[p] for p in parts)
    deadline = time.monotonic() + args.deadline_s
    report: dict = {"device": torch.cuda.get_device_name(0), "gpus": len(gpus), "settings": vars(args) | {
        "data": str(args.data), "out": str(args.out)}}  # fmt: skip
    for part in parts:
        remaining = deadline - time.monotonic()
        limit = remaining * shares[part] / total if part != parts[-1] else remaining
        total -= shares[part]
        if part == "eval":
            report["eval"] = eval_part(args, args.out, limit, ",".join(map(str, gpus)))
        elif part == "run1":
            report["run_1_gpu"] = run_part_on(args, args.out, "run1", gpus[:1], limit)
        else:
            report["run_2_gpus"] = run_part_on(args, args.out, "run2", gpus[:2], limit)
    one, two = report.get("run_1_gpu"), report.get("run_2_gpus")
    if one and two and one["problems_per_hour"] and two["problems_per_hour"]:
        report["two_gpu_throughput_ratio"] = round(two["problems_per_hour"] / one["problems_per_hour"], 2)
    (args.out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
