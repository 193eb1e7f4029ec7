"""The measured figures are generated, never hand-edited: docs/results.md and the README's results table are what
`benchmarks/results_table.py` renders from the raw records in `benchmarks/records/`, and every record names the
device, date and commit it measured."""

import importlib.util
import json
from pathlib import Path

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
