"""`geak bench --base` on real corpus kernels in git repositories made here (a GPU report, not a test).

    python benchmarks/base_report.py --out DIR [--kernels vector_add,softmax_rowwise,...] [--repeats 3]

1. **Slowdown**: `vector_add.py` committed, then a commit that drops its launch block 1024→32
   (`block_size: int = 1024` → `32`); `geak bench FILE --base HEAD~1` must call it significantly slower.
2. **Edits that change nothing it runs**, per kernel, each `--repeats` times on a fresh repository:
   - *comment*: a comment and a blank line added; GEAK says "same as HEAD" and times nothing (by design);
   - *inert*: a module-level constant added before the test section, so the code differs but no kernel or call
     does: `geak bench FILE --base HEAD` times both, and a verdict other than "within noise" is a false report.

Prints a table and writes DIR/base_report.json (device, date, commit, every command's verdict and speedup).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # git_repos: the repositories the tests make, made the same way here
from git_repos import Repo, new_repo  # noqa: E402

KERNELS = ROOT / "snippets" / "kernels"
DEFAULT_KERNELS = "vector_add,softmax_rowwise,layer_norm_fwd,rms_norm_fwd,cross_entropy,matmul_fp16"
SEPARATOR = "#" * 146
SLOWER = ("block_size: int = 1024", "block_size: int = 32")


def committed(folder: Path, name: str, text: str) -> Path:
    """`text` committed as `name` in a new repository at `folder` (``tests/git_repos.py``); the file's path."""
    repo = new_repo(folder)
    path = repo.write(name, text)
    repo.commit("base")
    return path


def bench_base(file: Path, rev: str, timeout_s: float) -> dict[str, Any]:
    """`geak bench FILE --base REV --json` in FILE's repository: its verdict, speedup and interval."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "geak.server.cli", "bench", file.name, "--base", rev, "--json"],
        cwd=file.parent,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    row: dict[str, Any] = {"exit": proc.returncode, "seconds": round(time.perf_counter() - started, 1)}
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        row["error"] = (proc.stderr or proc.stdout).strip()[-400:]
        return row
    verdict = (data.get("files") or [{}])[0]
    row["verdict"] = verdict.get("verdict")
    row["message"] = verdict.get("message")
    speedup = ((verdict.get("bench") or {}).get("speedup")) or {}
    for key in ("ratio", "low", "high", "verdict", "significant"):
        row[f"speedup_{key}"] = speedup.get(key)
    return row


def inert_edit(text: str) -> str:
    head, sep, tail = text.partition(SEPARATOR)
    if not sep:
        raise SystemExit("no test separator in the kernel file")
    return head + "_BASE_REPORT_INERT = 1\n" + sep + tail


def comment_edit(text: str) -> str:
    head, sep, tail = text.partition(SEPARATOR)
    return head + "\n# a comment added by base_report.py\n\n" + sep + tail


def slowdown(work: Path, timeout_s: float) -> dict[str, Any]:
    text = (KERNELS / "vector_add.py").read_text()
    if SLOWER[0] not in text:
        raise SystemExit(f"vector_add.py no longer has {SLOWER[0]!r}")
    file = committed(work / "slowdown", "vector_add.py", text)
    file.write_text(text.replace(SLOWER[0], SLOWER[1]))
    Repo(file.parent).commit("block 1024 -> 32")
    return {"case": "vector_add BLOCK 1024→32", "rev": "HEAD~1", **bench_base(file, "HEAD~1", timeout_s)}


def noop_edits(work: Path, kernels: list[str], repeats: int, timeout_s: float) -> list[dict[str, Any]]:
    rows = []
    for name in kernels:
        text = (KERNELS / f"{name}.py").read_text()
        for edit, change in (("comment", comment_edit), ("inert", inert_edit)):
            for i in range(repeats if edit == "inert" else 1):
                file = committed(work / f"{name}-{edit}-{i}", f"{name}.py", text)
                file.write_text(change(text))
                row = {"case": f"{name} {edit} #{i + 1}", "rev": "HEAD", **bench_base(file, "HEAD", timeout_s)}
                rows.append(row)
                print(_line(row), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    ratio = row.get("speedup_ratio")
    interval = f"{ratio:.3f} [{row['speedup_low']:.3f}, {row['speedup_high']:.3f}]" if ratio else "-"
    return (
        f"{row['case']:<34} exit {row['exit']}  {row.get('verdict') or 'error'}  {interval}  "
        f"{row.get('speedup_verdict') or ''}  {row['seconds']} s  {row.get('error', '')[:200]}"
    )


def device() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "unknown"


def commit() -> str:
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or os.environ.get("GEAK_COMMIT", "unknown")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--kernels", default=DEFAULT_KERNELS, help="corpus kernels (snippets/kernels) for the no-op edits"
    )
    parser.add_argument("--repeats", type=int, default=3, help="fresh repositories per kernel for the inert edit")
    parser.add_argument("--timeout", type=float, default=240, help="seconds for one `geak bench`")
    args = parser.parse_args()
    if shutil.which("git") is None:
        raise SystemExit("git is needed")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="geak-base-report-") as folder:
        work = Path(folder)
        slow = slowdown(work, args.timeout)
        print(_line(slow), flush=True)
        rows = noop_edits(work, [k for k in args.kernels.split(",") if k], args.repeats, args.timeout)
    inert = [r for r in rows if " inert " in r["case"]]
    false = [r for r in inert if r.get("speedup_verdict") in ("faster", "slower")]
    summary = {
        "slowdown_reported": slow.get("speedup_significant") is True and (slow.get("speedup_ratio") or 1) < 1,
        "inert_timed": sum(1 for r in inert if r.get("speedup_ratio")),
        "inert_false_reports": len(false),
        "comment_same": sum(1 for r in rows if " comment " in r["case"] and r.get("verdict") == "same"),
    }
    record = {
        "device": device(),
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "slowdown": slow,
        "edits": rows,
        "summary": summary,
    }
    (args.out / "base_report.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
