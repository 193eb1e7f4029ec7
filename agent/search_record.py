"""The raw record of an optimize run, as plain JSON: what a published figure is computed from, never a hand-merged
table. A run record holds one entry per file (its configurations screened, its finalists with their bench intervals,
the winner's speedup over the file as it runs and over its autotune list's best, its seconds) and the run's device,
date and commit; `geak optimize --record PATH` writes one for a file, `benchmarks/search_report.py` one per sample
run into `benchmarks/records/`, and `benchmarks/results_table.py` renders the figures from them.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .outcome import OptimizeResult

KIND = "search-run"  # a run record's `kind`: the results table finds run records by it
COMMIT_ENV = "GEAK_COMMIT"  # the commit, where GEAK runs from a copy without its git history (a GPU machine)
CHECKOUT = Path(__file__).resolve().parent.parent


def file_record(result: OptimizeResult, seconds: float) -> dict[str, Any]:
    """One file's entry: its outcome, every configuration screened, every finalist with its bench interval."""
    ev = result.best.evaluation if result.best is not None else None
    search = result.search or {}
    finalists = [
        {
            "id": c.id,
            "change": c.note,
            "ok": c.passed,
            "speedup": c.evaluation.speedup if c.evaluation else None,
            "interval": [c.evaluation.speedup_low, c.evaluation.speedup_high] if c.evaluation else None,
            "verdict": c.evaluation.speedup_verdict if c.evaluation else None,
            "message": (c.evaluation.message if c.evaluation else "")[:300],
            "review": list(c.review),
        }
        for c in result.candidates
        if c.origin == "search"
    ]
    return {
        "file": Path(result.file).name,
        "improved": result.improved,
        "speedup": ev.speedup if ev is not None and result.improved else 1.0,
        "interval": [ev.speedup_low, ev.speedup_high] if ev is not None and result.improved else None,
        "verdict": ev.speedup_verdict if ev is not None and result.improved else "original kept",
        "change": result.best.note if result.best is not None else "",
        "over_autotune_best": search.get("over_autotune_best") or {},
        "review": list(result.review),
        "baseline_ms": result.baseline_ms,
        "device": result.runtime.get("device"),
        "message": result.message[:400],
        "seconds": round(seconds, 1),
        "search": {k: search.get(k) for k in ("summary", "knobs", "screened", "correct", "rounds", "seconds")},
        "configurations": search.get("configurations") or [],
        "finalists": finalists,
    }


def run_record(files: list[dict[str, Any]], source: str, **setup: Any) -> dict[str, Any]:
    """A run's record: its files' entries with the device, date and commit they were measured with, the command
    (`source`), and the run's settings (`setup`: budget, seed…)."""
    devices = sorted({str(f["device"]) for f in files if f.get("device")})
    return {
        "kind": KIND,
        "device": " + ".join(devices) or "unknown",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "time": datetime.now(UTC).strftime("%H:%M:%S"),
        "commit": commit(),
        "source": source,
        "setup": setup,
        "searched": files,
    }


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Write `record` whole (a half-written record must never be read as a run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def commit() -> str:
    """The commit GEAK runs from (``GEAK_COMMIT`` where set), "-dirty" where its files differ from it; "unknown"
    outside a git checkout."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    try:
        head = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if changed else "")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()  # fmt: skip
