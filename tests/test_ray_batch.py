"""Evaluation on Ray: a local Ray instance on CPU, one actor holding a warm interpreter evaluator; the driver keeps
the loop and the results. (Ray is in the test extras; the test skips only where it cannot be imported.)"""

from __future__ import annotations

import json

import pytest
from test_batch_run import TB, results, tritonbench_predictions, write_config

from geak.server.cli.entry import main

pytest.importorskip("ray", reason="ray is not installed (pip install ray)")


@pytest.mark.timeout(180)
def test_run_and_eval_on_local_ray(tmp_path, capsys):
    out = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", suite="tritonbench", data_path=TB, output_path=out, search_time_s=1,
                       ray_address="local", target_kernels=["add_example.py", "hip_only.py"])  # fmt: skip
    assert main(["run", str(cfg), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    rows = {r["filename"]: r for r in results(out)}
    assert rows["add_example.py"]["pass_exe"] and rows["add_example.py"]["slot"] == "ray cpu actor 0"
    assert rows["hip_only.py"]["reference_error"]  # BadInput crosses the actor boundary as BadInput
    assert summary["exec_pass"] == 1 and "Ray GPU ids [] on" in summary["evaluators"][0]
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["run"]["ray_address"] == "local"

    preds = tritonbench_predictions(tmp_path / "preds.jsonl", broken="add_example.py")
    preds.write_text("\n".join(preds.read_text().splitlines()[:2]) + "\n")  # add_example (broken), relu_kernel
    argv = ["eval", str(preds), "--suite", "tritonbench", "--data", str(TB), "--ray-address", "local", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["slot"] for r in data["records"]} == {"ray cpu actor 0"}
    assert [(r["filename"], r["pass_call"], r["pass_exe"]) for r in data["records"]] == [
        ("add_example.py", True, False),
        ("relu_kernel.py", True, True),
    ]
