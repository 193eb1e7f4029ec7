"""Render the corpus part of `evaluator_report.json` (benchmarks/gpu_evaluator_report.py) as a Markdown table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from geak.agent.retrieval import load_entry
from geak.snippets import KERNELS_DIR


def main(paths: list[str]) -> None:
    rows = [r for p in paths for r in json.loads(Path(p).read_text()) if "file" in r]
    print("| kernel | family | largest bench call | median ms | GB/s | % copy peak | TFLOP/s | % bf16 peak | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["file"]):
        entry = load_entry(KERNELS_DIR / r["file"])
        calls = r.get("calls") or []
        if not calls:
            print(f"| {r['file']} | {entry.family} | - | - | - | - | - | - | {r['message'][:80]} |")
            continue
        c = max(calls, key=lambda c: c["median_ms"])

        def f(v, d):
            return "-" if v is None else f"{v:.{d}f}"

        print(f"| {r['file']} | {entry.family} | `{c['signature'][:48]}` | {c['median_ms']:.4f} | {f(c['gbps'], 0)} | "
              f"{f(c['pct_peak_bw'], 0)} | {f(c['tflops'], 0)} | {f(c['pct_peak_flops'], 0)} | "
              f"{'pass' if r['ok'] else 'FAIL'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
