"""The search sample's measurements (``search_report.py --files-json``) from timed `geak eval` runs of the
TritonBench-revised golden files as their own predictions: a file passes where every run passed it, and its calls
take the median over the runs of the golden file's own timed calls (`reference_ms`), or, where a search measured the
file alone (`--baselines`: search.jsonl lines, the original's own bench), that: the rule's own measure, which the
paired timing of `geak eval` can undercount (`softmax_flaggems.py` 19 µs there, 35 µs alone). ROCm files are kept
from an earlier measurement file (no `geak eval` covers that suite).

    python benchmarks/measured_from_eval.py --records R1.jsonl ... --baselines S1.jsonl ... --rocm-from OLD.json \
        --out NEW.json --date DATE
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from geak.agent.batch.records_file import read_records

TB_FOLDER = "tritonbench_revised/TritonBench_G_v1"


def measurements(records: list[dict[str, dict]], alone_us: dict[str, float]) -> list[dict]:
    """One entry per file any run scored: passing where every run passed it, call_us its time alone where measured
    (`alone_us`), else the median reference time."""
    files = []
    for name in sorted(set().union(*records)):
        runs = [run.get(name) for run in records]
        passing = all(r is not None and r.get("pass_exe") for r in runs)
        times = [r["reference_ms"] for r in runs if r is not None and r.get("reference_ms")]
        call_us = statistics.median(times) * 1e3 if passing and times else None
        if passing and name in alone_us:
            call_us = alone_us[name]
        entry = {"path": f"{TB_FOLDER}/{name}", "passing": passing, "call_us": call_us}
        if not passing:
            failing = [r for r in runs if r is not None and not r.get("pass_exe")]
            entry["why"] = str(failing[0].get("message"))[:200] if failing else "not scored in every run"
        files.append(entry)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", nargs="+", required=True, help="records.jsonl of timed `geak eval` runs")
    parser.add_argument("--baselines", nargs="*", default=[], help="search.jsonl of search_report.py runs")
    parser.add_argument("--rocm-from", required=True, help="a measurement file whose ROCm entries are kept")
    parser.add_argument("--out", required=True)
    parser.add_argument("--date", required=True)
    args = parser.parse_args()
    records = [{row["filename"]: row for row in read_records(Path(p), "filename")} for p in args.records]
    alone_us = {
        row["file"]: row["baseline_ms"] * 1e3
        for p in args.baselines
        for row in read_records(Path(p), "file")
        if row.get("baseline_ms")
    }
    old = json.loads(Path(args.rocm_from).read_text())
    rocm = [f for f in old["files"] if f["path"].startswith("rocm/")]
    out = {
        "device": old["device"],
        "date": args.date,
        "measured_by": f"TritonBench-revised: benchmarks/measured_from_eval.py over {len(records)} timed `geak eval` "
        f"runs of the golden files as their own predictions (median of reference_ms), {len(alone_us)} files as a "
        f"search's bench of the original alone timed them; ROCm: kept from {old['date']} ({old['measured_by']})",
        "files": measurements(records, alone_us) + rocm,
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(out['files'])} files ({sum(f['passing'] for f in out['files'])} passing) -> {args.out}")


if __name__ == "__main__":
    main()
