"""The search sample's measurements from timed `geak eval` runs (``benchmarks/measured_from_eval.py``): a file passes
only where every run passed it, and its calls take the median of the runs' times of its own timed calls, or its time
alone where a search measured it."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "measured_from_eval.py"


def test_a_file_passes_where_every_run_passed_it_and_takes_the_median_time(tmp_path):
    runs = [
        [("a.py", True, 0.010), ("b.py", True, 0.030), ("c.py", True, 0.5), ("d.py", True, 0.019)],
        [("a.py", True, 0.030), ("b.py", False, None), ("c.py", True, 0.7), ("d.py", True, 0.019)],
        [("a.py", True, 0.020), ("b.py", True, 0.031), ("d.py", True, 0.019)],
    ]
    paths = []
    for i, run in enumerate(runs):
        path = tmp_path / f"r{i}.jsonl"
        rows = [{"filename": n, "pass_exe": ok, "reference_ms": ms, "message": "fails" if not ok else ""}
                for n, ok, ms in run]  # fmt: skip
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        paths.append(str(path))
    old = tmp_path / "old.json"
    rocm = {"path": "rocm/ROCm_v1/x.py", "passing": True, "call_us": 40.0}
    old.write_text(json.dumps({"device": "NVIDIA H200", "date": "d0", "measured_by": "m", "files": [rocm]}))
    searched = tmp_path / "search.jsonl"
    searched.write_text(json.dumps({"file": "d.py", "baseline_ms": 0.035}) + "\n")
    out = tmp_path / "new.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--records", *paths, "--baselines", str(searched),
                           "--rocm-from", str(old), "--out", str(out), "--date", "d1"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    files = {Path(f["path"]).name: f for f in json.loads(out.read_text())["files"]}
    assert files["a.py"]["passing"] and abs(files["a.py"]["call_us"] - 20.0) < 1e-9
    assert not files["b.py"]["passing"] and files["b.py"]["call_us"] is None and files["b.py"]["why"] == "fails"
    assert not files["c.py"]["passing"]  # one run did not score it
    assert abs(files["d.py"]["call_us"] - 35.0) < 1e-9  # its time alone, where a search measured it
    assert files["x.py"] == rocm and files["a.py"]["path"].startswith("tritonbench_revised/TritonBench_G_v1/")
