"""The measured figures are generated, never hand-edited: docs/results.md and the README's results table are what
`benchmarks/results_table.py` renders from the raw records in `benchmarks/records/`, and every record names the
device, date and commit it measured; the search's figures come from its runs' raw records: each file's first, median
and latest run and the spread between them, the README's row from one run."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "benchmarks" / "results_table.py"


def _script():
    spec = importlib.util.spec_from_file_location("results_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_record_names_its_device_date_and_commit():
    records = _script().load_records()
    assert records
    for name, record in records.items():
        for field in ("device", "date", "commit", "source"):
            assert record.get(field), f"{name} has no {field}"


def test_results_md_is_what_the_records_give():
    script = _script()
    assert (ROOT / "docs" / "results.md").read_text() == script.results_md(script.load_records())


def test_the_readme_table_is_what_the_records_give():
    script = _script()
    readme = (ROOT / "README.md").read_text()
    assert readme.count(script.BEGIN) == 1 and readme.count(script.END) == 1
    assert readme == script.with_readme_table(readme, script.readme_table(script.load_records()))


def test_a_record_without_a_commit_is_refused(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"device": "NVIDIA H200", "date": "2026-12-03"}))
    script = _script()
    assert script.missing_fields(script.load_records(tmp_path)) == ["r.json: commit"]


def _run(date: str, time: str, commit: str, speedups: dict[str, float], seconds: float = 30.0) -> dict:
    """A small search-run record as `geak.agent.search_record.run_record` writes it."""
    rows = [
        {
            "path": path,
            "file": path.rpartition("/")[2],
            "improved": s > 1.0,
            "speedup": s,
            "verdict": "faster" if s > 1.0 else "original kept",
            "seconds": seconds,
        }
        for path, s in speedups.items()
    ]
    return {"kind": "search-run", "device": "NVIDIA H200", "date": date, "time": time, "commit": commit,
            "source": "benchmarks/search_report.py", "setup": {"seed": 7}, "searched": rows}  # fmt: skip


def _runs_folder(tmp_path: Path) -> Path:
    """Three runs of two files, written out of order: first, median and latest are by date and time."""
    runs = {
        "c.json": _run("2026-12-06", "09:00:00", "ccc", {"TB/a.py": 1.5, "rocm/b.py": 1.0}, seconds=95.0),
        "a.json": _run("2026-12-04", "10:00:00", "aaa", {"TB/a.py": 1.2, "rocm/b.py": 1.1}),
        "b.json": _run("2026-12-04", "11:00:00", "bbb", {"TB/a.py": 2.0}),
    }
    for name, record in runs.items():
        (tmp_path / name).write_text(json.dumps(record))
    return tmp_path


def test_search_runs_give_each_files_first_median_and_latest_run_and_the_spread(tmp_path):
    script = _script()
    runs = script.search_runs(script.load_records(_runs_folder(tmp_path)))
    assert [r["commit"] for r in runs] == ["aaa", "bbb", "ccc"]
    assert script.per_file(runs) == {"TB/a.py": [1.2, 2.0, 1.5], "rocm/b.py": [1.1, 1.0]}
    a = script.file_figures([1.2, 2.0, 1.5])
    assert (a["first"], a["median"], a["latest"]) == (1.2, 1.5, 1.5) and a["spread"] == pytest.approx(0.8)
    b = script.file_figures([1.1, 1.0])
    assert (b["first"], b["median"], b["latest"]) == (1.1, 1.0, 1.0)  # the median is a run that happened

    lines = script._search_runs(runs)
    assert "| `a.py` | 3 | 1.200× | 1.500× | 1.500× | 0.800 |" in lines
    assert "| ROCm `b.py` | 2 | 1.100× | 1.000× | 1.000× | 0.100 |" in lines
    assert "| 2026-12-06 09:00:00 | NVIDIA H200 | `ccc` | 7 | 2 | 1.225× | 1 (50%) | 0 | 95 s | 2 |" in lines
    first, median, latest = math.sqrt(1.2 * 1.1), math.sqrt(1.5 * 1.0), math.sqrt(1.5 * 1.0)
    assert lines[-1] == (
        f"Geometric mean over the files, each file's first run **{first:.3f}×**, its median run **{median:.3f}×**, "
        f"its latest run **{latest:.3f}×**; 2 of 5 file runs took longer than 90 s."
    )


def test_the_readme_row_of_the_search_is_the_latest_run_alone(tmp_path):
    script = _script()
    records = script.load_records(_runs_folder(tmp_path))
    row = script._search_row(records)
    assert row.startswith("| `geak optimize` without a model on a seeded sample of 2 suite files (seed 7; one run, "
                          "commit `ccc`, 2026-12-06) | geometric mean **1.225×**, 1 of 2 significantly faster, "
                          "0 slower, at most 95 s a file |")  # fmt: skip
