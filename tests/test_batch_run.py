"""`geak run` and `geak eval` on CPU: fixture suites in both layouts, a user's dataloader, the paper's generate mode
with a scripted model, resume after Ctrl-C, the metrics and the scaling plot."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from interrupts import start_interruptible
from test_dataloaders import SUITES, write_user_loader

from geak.agent.batch import metrics
from geak.agent.batch.scaling_plot import plot_scaling
from geak.server.cli import main

TB = SUITES / "tritonbench"
GOLDEN = TB / "TritonBench_G_v1"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_config(path: Path, **values) -> Path:
    values = {"backend": "interpreter", "timeout_per_check_s": 120, **values}
    path.write_text(yaml.safe_dump({k: str(v) if isinstance(v, Path) else v for k, v in values.items()}))
    return path


def results(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def test_run_search_mode_over_fixture_suite(tmp_path, capsys, monkeypatch):
    from geak.evaluator.api import Evaluator

    forgotten: list[str] = []
    forget = Evaluator.forget_reference

    async def logged(self, file):  # each problem's reference, once its problem is done (the slot outlives it)
        forgotten.append(Path(file).name)
        await forget(self, file)

    monkeypatch.setattr(Evaluator, "forget_reference", logged)
    out = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", suite="tritonbench", data_path=TB, output_path=out, search_time_s=2)
    assert main(["run", str(cfg), "--json"]) == 0
    assert sorted(forgotten) == ["add_example.py", "hip_only.py", "relu_kernel.py", "row_sum.py"], forgotten
    summary = json.loads(capsys.readouterr().out)["summary"]
    rows = {r["filename"]: r for r in results(out)}
    assert sorted(rows) == ["add_example.py", "hip_only.py", "relu_kernel.py", "row_sum.py"]
    assert rows["hip_only.py"]["reference_error"] and "needs an AMD GPU" in rows["hip_only.py"]["error"]
    add = rows["add_example.py"]
    assert add["pass_exe"] and add["mode"] == "optimize" and add["slot"] == "interpreter 0" and add["speedup"] is None
    assert add["predict"] and add["test_code"].startswith("import torch")
    assert add["candidates"] == 0  # on the interpreter the search screens for correctness only: no finalist
    assert summary["problems"] == 4 and summary["exec_pass"] == 3 and summary["reference_errors"] == 1
    assert summary["by_difficulty"]["2"]["exec_accuracy"] == 0.5 and summary["ran"] == 4
    assert "interpreter 0: cpu" in json.loads((out / "run.json").read_text())["evaluators"][0]
    # no candidate on the interpreter (the search screens for correctness only): no scaling curve to plot
    assert json.loads((out / "summary.json").read_text())["curves"] == [] and not (out / "scaling.png").exists()
    assert list((out / "problems").glob("add_example-*/add_example_mem.json"))  # each problem's agent checkpoint


def test_run_refuses_to_mix_with_an_earlier_run(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps({"filename": "add_example.py", "pass_exe": True}) + "\n")
    cfg = write_config(tmp_path / "run.yaml", suite="tritonbench", data_path=TB, output_path=out)
    assert main(["run", str(cfg)]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"suite": "tritonbench"}, "needs `data_path`"),
        ({"suite": "tritonbench", "dataloader": "a:B", "data_path": "x"}, "exactly one of `suite`"),
        ({"suite": "tritonbench", "data_path": str(TB), "datalenn": 3}, "did you mean `datalen`"),
        ({"suite": "tritonbench", "data_path": str(TB), "mode": "generate"}, "needs a model"),
        ({"suite": "tritonbench", "data_path": str(TB), "api_key": "sk-1"}, "must not be written"),
        ({"suite": "tritonbench", "data_path": str(TB), "mem_file": "m.json"}, "`geak run --resume` continues a batch"),
        ({"suite": "tritonbench", "data_path": str(TB), "start_idx": 9}, "no problem selected"),
        ({"suite": "rocm", "data_path": str(TB)}, "is not a folder"),
        ({"dataloader": "no_such_module:Loader"}, "cannot import"),
    ],
)
def test_run_bad_configuration_exit_2(tmp_path, capsys, values, message):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({"backend": "interpreter", "output_path": str(tmp_path / "o"), **values}))
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("geak run: ") and message in err and "Traceback" not in err


def test_run_user_dataloader(tmp_path, monkeypatch, capsys):
    write_user_loader(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", dataloader="my_kernels:MyKernels", output_path=out, search_time_s=1,
                       dataloader_args={"names": ["row_sum.py", "relu_kernel.py"]})  # fmt: skip
    assert main(["run", str(cfg), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["problems"] == 2 and summary["exec_pass"] == 2 and set(summary["by_difficulty"]) == {"easy"}
    assert len(list((out / "references").glob("*/row_sum.py"))) == 1  # composed from label + test_code


GENERATED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    keep = offs < n_elements
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=keep) + tl.load(b_ptr + offs, mask=keep), mask=keep)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(out.numel(), 64),)](x, y, out, out.numel(), BLOCK_SIZE=64)
    return out
'''


def test_generate_mode_from_instruction_with_scripted_model(tmp_path, capsys, scripted_llm):
    scripted_llm.reply("I cannot do that.")  # round 1: no code
    scripted_llm.reply(f"## Reflection\nI forgot the code.\n```python\n{GENERATED}```")  # round 2: reflection
    out = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", suite="tritonbench", data_path=TB, output_path=out, datalen=1,
                       model_id="scripted-model", base_url=scripted_llm.base_url, max_iteration=2, search=False,
                       max_retries=0, timeout_s=10)  # fmt: skip
    assert main(["run", str(cfg), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    (row,) = results(out)
    assert row["mode"] == "generate" and row["pass_exe"] and row["predict"].strip() == GENERATED.strip()
    assert row["chains"] == 1 and row["chains_passed"] == 1 and summary["pass_at_k"] == {"1": 1.0}
    assert [h["pass_exe"] for h in row["history"]] == [False, True]
    first = scripted_llm.requests[0]["messages"][-1]["content"]
    assert "Write a Triton kernel `add_kernel(x_ptr, y_ptr, out_ptr" in first  # the instruction
    assert "def test_add" in first  # the fixed test the code must pass
    assert "add_kernel[grid](x, y, out, n, BLOCK_SIZE=128)" not in first  # never the golden code


def test_resume_after_ctrl_c_loses_no_finished_problem(tmp_path):
    out = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", suite="tritonbench", data_path=TB, output_path=out, search_time_s=4)
    cmd = [sys.executable, "-m", "geak.server.cli", "run", str(cfg)]
    proc = start_interruptible("run", str(cfg))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "results.jsonl").exists() and (out / "results.jsonl").read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    finished = results(out)
    if proc.returncode == 0:  # the last problems finished before the signal landed: nothing to resume
        pytest.skip("the run finished before Ctrl-C arrived")
    assert proc.returncode == 130 and "--resume" in err, err
    assert 1 <= len(finished) < 4
    (out / "results.jsonl").write_text((out / "results.jsonl").read_text() + '{"filename": "row_')  # a torn line
    p = subprocess.run([*cmd, "--resume", "--json"], capture_output=True, text=True, timeout=300,
                       env={**os.environ})  # fmt: skip
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)["summary"]
    rows = results_lines_valid(out)
    assert sorted(r["filename"] for r in rows) == ["add_example.py", "hip_only.py", "relu_kernel.py", "row_sum.py"]
    assert rows[: len(finished)] == finished  # finished problems kept as they were, not rerun
    assert summary["ran"] == 4 - len(finished) and summary["problems"] == 4


def results_lines_valid(folder: Path) -> list[dict]:
    rows = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


# ------------------------------------------------------------------------------------------ geak eval


def tritonbench_predictions(path: Path, *, broken: str | None = None) -> Path:
    items = json.loads((TB / "TritonBench_G_v1.json").read_text())
    lines = []
    for item in items:
        code = (GOLDEN / item["file"]).read_text()
        if item["file"] == broken:
            code = code.replace("x + y", "x * y")
        lines.append({"instruction": item["comp_instru"], "predict": code, "label": item["output"]})
    lines.append({"instruction": "a kernel nobody asked for", "predict": "pass", "label": "nothing"})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_eval_tritonbench_predictions(tmp_path, capsys):
    preds = tritonbench_predictions(tmp_path / "preds.jsonl", broken="add_example.py")
    argv = ["eval", str(preds), "--suite", "tritonbench", "--data", str(TB), "--backend", "interpreter"]
    assert main([*argv, "--json", "--output", str(tmp_path / "out")]) == 0
    data = json.loads(capsys.readouterr().out)
    verdicts = {r["filename"]: (r["pass_call"], r["pass_exe"]) for r in data["records"]}
    assert verdicts == {
        "add_example.py": (True, False),  # runs, wrong outputs
        "relu_kernel.py": (True, True),
        "row_sum.py": (True, True),
        "hip_only.py": (False, False),  # the golden file itself fails on this machine
    }
    s = data["summary"]
    assert (s["problems"], s["call_pass"], s["exec_pass"], s["reference_errors"], s["unmatched"]) == (4, 3, 2, 1, 1)
    assert s["by_difficulty"]["1"]["exec_accuracy"] == 0.0 and s["by_difficulty"]["3"]["exec_accuracy"] == 1.0
    assert len((tmp_path / "out" / "records.jsonl").read_text().splitlines()) == 4
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["exec_pass"] == 2
    assert main(argv) == 0  # the table
    table = capsys.readouterr().out
    assert "exec acc" in table and "50.0%" in table and "could not be scored" in table


def test_eval_geak_output_format_and_rocm_layout(tmp_path, capsys):
    # GEAK's own per-round results ({stem}_{round}.jsonl): filename + predict.
    kernel = (GOLDEN / "relu_kernel.py").read_text().split("#" * 146)[0]
    rows = [{"problem": "relu_kernel.py", "filename": "relu_kernel.py", "predict": kernel, "speedup": None},
            {"filename": "row_sum.py", "predict": None}]  # fmt: skip
    preds = tmp_path / "relu_0.jsonl"
    preds.write_text("\n".join(json.dumps(r) for r in rows))
    assert main(["eval", str(preds), "--suite", "tritonbench", "--data", str(TB), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    assert [(r["filename"], r["pass_exe"]) for r in records] == [("relu_kernel.py", True), ("row_sum.py", False)]
    assert records[1]["message"] == "the prediction has no code"
    # The ROCm layout (pytest modules): predictions matched by instruction; a wrong softmax fails execution.
    rocm = json.loads((SUITES / "rocm" / "ROCm_eval_complex_instruct_v1.json").read_text())
    wrong = rocm[1]["label"].replace("numerator / tl.sum(numerator, axis=0)", "numerator")
    lines = [{"instruction": rocm[1]["instruction"], "predict": rocm[1]["label"]},
             {"instruction": rocm[2]["instruction"], "predict": rocm[2]["label"]},
             {"instruction": rocm[1]["instruction"], "predict": wrong}]  # fmt: skip
    preds = tmp_path / "rocm.jsonl"
    preds.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["eval", str(preds), "--suite", "rocm", "--data", str(SUITES / "rocm"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    verdicts = [(r["filename"], r["pass_call"], r["pass_exe"]) for r in data["records"]]
    assert verdicts == [
        ("naive_softmax.py", True, True),
        ("test_scale.py", True, True),
        ("naive_softmax.py", True, False),
    ]
    assert data["summary"]["pass_at_k"] == {"1": 0.75} and data["summary"]["exec_pass"] == 2  # (1/2 + 1/1) / 2


def test_eval_bad_input_exit_2(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "none.jsonl"), "--suite", "tritonbench", "--data", str(TB)]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    assert main(["eval", str(bad), "--suite", "tritonbench", "--data", str(TB)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"instruction": "nothing known", "predict": "x"}) + "\n")
    assert main(["eval", str(bad), "--suite", "tritonbench", "--data", str(TB)]) == 2
    assert "no line of" in capsys.readouterr().err
    assert main(["eval", str(bad), "--suite", "rocm", "--data", str(tmp_path)]) == 2


# ------------------------------------------------------------------------------------------ metrics and plot


def test_metrics_merge_runs_and_pass_at_k():
    runs = [
        {"filename": "a.py", "pass_call": True, "pass_exe": False, "speedup": None, "difficulty": "1"},
        {"filename": "a.py", "pass_call": True, "pass_exe": True, "speedup": 1.5, "difficulty": "1"},
        {"filename": "a.py", "pass_call": True, "pass_exe": True, "speedup": 2.0, "difficulty": "1",
         "speedup_verdict": "faster"},
        {"filename": "b.py", "pass_call": False, "pass_exe": False, "speedup": None, "difficulty": "2"},
        {"filename": "b.py", "pass_call": True, "pass_exe": False, "speedup": None, "difficulty": "2"},
        {"filename": "b.py", "pass_call": True, "pass_exe": False, "speedup": None, "difficulty": "2"},
    ]
    best = metrics.merge_runs(runs[:3])
    assert best["speedup"] == 2.0 and (best["chains"], best["chains_passed"]) == (3, 2)
    s = metrics.summarize(runs)
    assert (s["problems"], s["call_pass"], s["exec_pass"], s["speedup_geomean"]) == (2, 2, 1, 2.0)
    assert s["pass_at_k"]["1"] == pytest.approx((2 / 3 + 0) / 2) and s["pass_at_k"]["3"] == 0.5
    assert s["by_difficulty"]["2"]["call_accuracy"] == 1.0 and s["by_difficulty"]["1"]["faster"] == 1
    noise = {"filename": "c.py", "pass_call": True, "pass_exe": True, "speedup": 1.004, "difficulty": "1",
             "speedup_verdict": "within noise (±1%)"}
    assert metrics.summarize([*runs, noise])["faster"] == 1  # a ratio above 1 is not "faster" unless judged so
    assert metrics.geomean([2.0, 0.5]) == pytest.approx(1.0) and metrics.geomean([]) is None


def test_a_run_record_carries_the_verdict_of_its_speedup():
    """What `summary.json` counts as faster is the evaluator's verdict, so a run's record keeps it."""
    import asyncio

    from geak.agent.batch.run import BatchRun
    from geak.agent.memory import Candidate, Evaluation
    from geak.agent.outcome import OptimizeResult

    def searched(ratio: float, verdict: str) -> OptimizeResult:
        timed = Evaluation(True, "perf", "", timed=True, speedup=ratio, speedup_low=ratio - 0.01,
                           speedup_high=ratio + 0.01, speedup_verdict=verdict)  # fmt: skip
        best = Candidate("s1", 0, 1, "search", "code", evaluation=timed)
        return OptimizeResult("k.py", True, "", True, {}, 1.0, best, None, "", [best])

    records = []
    for ratio, verdict in ((1.3, "faster"), (1.004, "within noise (±1%)")):
        record = {"filename": f"{verdict}.py", "pass_call": True, "pass_exe": True}
        asyncio.run(BatchRun._fill(None, record, searched(ratio, verdict), None, False))  # type: ignore[arg-type]
        assert (record["speedup"], record["speedup_verdict"]) == (ratio, verdict)
        records.append(record)
    assert metrics.summarize(records)["faster"] == 1


def test_iteration_curves_and_plot(tmp_path):
    records = [
        {"filename": "a.py", "pass_call": True, "pass_exe": True, "speedup": 2.0,
         "history": [{"iteration": 1, "pass_call": True, "pass_exe": False, "speedup": None},
                     {"iteration": 2, "pass_call": True, "pass_exe": True, "speedup": 2.0}]},
        {"filename": "b.py", "pass_call": True, "pass_exe": True, "speedup": 0.5,
         "history": [{"iteration": 1, "pass_call": True, "pass_exe": True, "speedup": 0.5}]},
    ]  # fmt: skip
    curves = metrics.iteration_curves(records)
    assert [c["exec_accuracy"] for c in curves] == [0.5, 1.0]
    assert curves[0]["speedup_geomean"] == pytest.approx(0.5) and curves[1]["speedup_geomean"] == pytest.approx(1.0)
    path = plot_scaling(curves, tmp_path / "plots" / "scaling.png", "two problems")
    assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 10_000


def test_eval_resumes_an_interrupted_eval_without_scoring_twice(tmp_path, capsys):
    preds = tritonbench_predictions(tmp_path / "preds.jsonl", broken="add_example.py")
    out = tmp_path / "out"
    argv = ["eval", str(preds), "--suite", "tritonbench", "--data", str(TB), "--backend", "interpreter",
            "--output", str(out), "--json"]  # fmt: skip
    assert main(argv) == 0
    full = json.loads(capsys.readouterr().out)
    lines = (out / "records.jsonl").read_text().splitlines()
    # Stopped after two predictions, while a third record was being written.
    (out / "records.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:20])
    assert main(argv) == 2 and "continue it with --resume" in capsys.readouterr().err  # never overwritten
    other = tmp_path / "other.jsonl"
    other.write_text(preds.read_text().splitlines()[0] + "\n")
    assert main(["eval", str(other), *argv[2:], "--resume"]) == 2
    assert "other predictions" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert [r["filename"] for r in resumed["records"]] == [r["filename"] for r in full["records"]]
    assert resumed["summary"]["exec_pass"] == full["summary"]["exec_pass"] == 2
    now = (out / "records.jsonl").read_text().splitlines()
    assert set(now[:2]) == set(lines[:2]) and len(now) == len(lines)  # the two kept as they were, the torn one again
    assert main(["eval", str(preds), "--suite", "tritonbench", "--data", str(TB), "--resume"]) == 2
    assert "--resume needs --output" in capsys.readouterr().err


def test_eval_without_timing_scores_correctness_only_even_on_a_gpu(tmp_path):
    """`geak eval --no-timing`: call and execution accuracy only; no prediction is timed, whatever the device."""
    import asyncio

    from geak.agent.batch.dataloaders import BUILT_IN
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot
    from geak.evaluator.api import EvalOptions, Evaluator

    class NoTiming(Evaluator):
        async def bench(self, *args, **kwargs):
            raise AssertionError("a prediction was timed")

    async def go():
        evaluator = NoTiming(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
        slot = EvalSlot("gpu 0", evaluator, gpu="0", runtime={"backend": "cuda", "device": "a GPU"})
        preds = tmp_path / "preds.jsonl"
        kernel = (GOLDEN / "relu_kernel.py").read_text()
        preds.write_text(json.dumps({"filename": "relu_kernel.py", "predict": kernel}) + "\n")
        try:
            return await score_predictions(BUILT_IN["tritonbench"](TB), preds, [slot], tmp_path, timing=False)
        finally:
            await evaluator.aclose()

    outcome = asyncio.run(go())
    assert [(r["pass_call"], r["pass_exe"], r["speedup"]) for r in outcome.records] == [(True, True, None)]


def test_what_passed_is_timed_on_any_slot_while_checks_still_run(tmp_path):
    """A prediction that passed is timed at once, beside running checks (its timing pauses those of its slot while
    it measures: ``test_device_share``), on any slot with a turn: a slot whose last check hangs holds nothing back."""
    import asyncio
    import contextlib

    from geak.agent.batch.dataloaders import BUILT_IN
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot
    from geak.evaluator.api import EvalOptions, Evaluator

    running = {"gpu 0": 0, "gpu 1": 0}
    checks = {"gpu 0": 0, "gpu 1": 0}
    seen: list[tuple[str, dict[str, int]]] = []  # (the slot a timing started on, the checks running then)
    three_timed = asyncio.Event()

    class Logged(Evaluator):
        def __init__(self, name: str):
            super().__init__(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
            self.name = name

        async def check(self, *args, **kwargs):
            running[self.name] += 1
            checks[self.name] += 1
            try:
                if self.name == "gpu 1" and checks["gpu 1"] == 2:  # slow: until three are timed (a minute)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(three_timed.wait(), 60)
                return await super().check(*args, **kwargs)
            finally:
                running[self.name] -= 1

        async def bench(self, *args, **kwargs):
            seen.append((self.name, dict(running)))
            if len(seen) == 3:
                three_timed.set()
            return await super().bench(*args, **kwargs)

    async def go():
        fast, slow = Logged("gpu 0"), Logged("gpu 1")
        slots = [
            EvalSlot(e.name, e, gpu=e.name[-1], runtime={"backend": "cuda", "device": "a GPU"}) for e in (fast, slow)
        ]
        preds = tmp_path / "preds.jsonl"
        code = (GOLDEN / "relu_kernel.py").read_text()
        preds.write_text("".join(json.dumps({"filename": "relu_kernel.py", "predict": code}) + "\n" for _ in range(4)))
        try:
            return await score_predictions(BUILT_IN["tritonbench"](TB), preds, slots, tmp_path, per_slot=2)
        finally:
            await asyncio.gather(fast.aclose(), slow.aclose())

    outcome = asyncio.run(go())
    assert [r["slot"] for r in outcome.records] == ["gpu 0", "gpu 1", "gpu 0", "gpu 1"], outcome.records
    assert all(r["pass_exe"] and r["timed_on"] for r in outcome.records), outcome.records
    assert len(seen) == 4 and all(checks_then["gpu 1"] >= 1 for _, checks_then in seen[:3]), seen  # gpu 1 checking


def test_a_slot_times_the_quickest_and_the_slowest_tests_by_turns():
    """A timing captures its calls by running the tests again, and prepares only while no other measures: the
    quickest is soon ready to measure (the device kept busy), and the slowest, taken by turns with it, prepares
    beside the others instead of being the run's tail."""
    from geak.agent.batch.eval import _Checked, next_to_time, timing_order
    from geak.evaluator.results import CheckResult, TestOutcome

    def checked(line: int, *seconds: float) -> _Checked:
        tests = tuple(TestOutcome(f"test_{i}", True, duration_s=s) for i, s in enumerate(seconds))
        return _Checked({"line": line}, check=CheckResult(True, "exec", "cuda", "f.py", "", tests=tests))

    unchecked = _Checked({"line": 4})
    waiting = [checked(0, 0.5), checked(1, 20.0, 15.0), checked(2, 0.5), checked(3, 3.0), unchecked]
    assert [c.record["line"] for c in timing_order(waiting)] == [4, 0, 2, 3, 1]
    taken = []
    while waiting:
        taken.append(next_to_time(waiting, len(taken)))
        waiting.remove(taken[-1])
    assert [c.record["line"] for c in taken] == [4, 1, 0, 3, 2]


def test_a_timed_eval_times_what_passed_beside_the_checks_a_few_at_a_time(tmp_path, monkeypatch):
    """A timing pauses the checks of its slot while it measures, so `geak eval` times what passed once every check
    has started, beside the checks still running, a few at once on each slot (their setups overlap, their
    measurements take turns: the pool's device share, ``test_device_share``), more as the checks end, up to as
    many as the slot checked at once."""
    import asyncio

    from geak.agent.batch import eval as batch_eval
    from geak.agent.batch.dataloaders import BUILT_IN
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot
    from geak.evaluator.api import EvalOptions, Evaluator

    TIMINGS_AT_ONCE = 2  # fewer than the default, for fewer checks on the interpreter
    monkeypatch.setattr(batch_eval, "TIMINGS_AT_ONCE", TIMINGS_AT_ONCE)
    running = {"checks": 0, "benches": 0, "most benches": 0, "most beside checks": 0, "beside checks": 0,
               "started": 0, "before all": 0}  # fmt: skip

    class Logged(Evaluator):
        async def check(self, *args, **kwargs):
            running["started"] += 1
            running["checks"] += 1
            try:
                return await super().check(*args, **kwargs)
            finally:
                running["checks"] -= 1

        async def bench(self, *args, **kwargs):
            running["beside checks"] += running["checks"] > 0
            running["before all"] += running["started"] < 5  # not every check had started
            running["benches"] += 1
            running["most benches"] = max(running["most benches"], running["benches"])
            if running["checks"]:
                running["most beside checks"] = max(running["most beside checks"], running["benches"])
            try:
                await asyncio.sleep(2.0)  # as a timing's setup takes a while
                return await super().bench(*args, **kwargs)  # on the interpreter: "timing needs a GPU"
            finally:
                running["benches"] -= 1

    async def go():
        evaluator = Logged(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
        slot = EvalSlot("gpu 0", evaluator, gpu="0", runtime={"backend": "cuda", "device": "a GPU"})
        preds = tmp_path / "preds.jsonl"
        names = ("relu_kernel.py",) * 5
        lines = [{"filename": name, "predict": (GOLDEN / name).read_text()} for name in names]
        lines.insert(1, {"filename": "relu_kernel.py", "predict": ""})  # no code: scored at once, never timed
        preds.write_text("".join(json.dumps(line) + "\n" for line in lines))
        said: list[str] = []
        try:
            outcome = await score_predictions(
                BUILT_IN["tritonbench"](TB), preds, [slot], tmp_path, per_slot=3, on_event=said.append
            )
        finally:
            await evaluator.aclose()
        return outcome, said

    outcome, said = asyncio.run(go())
    assert running["beside checks"] >= 1, running  # a timing started while the last check still ran
    assert running["before all"] == 0, running  # none before every check had started
    assert running["most beside checks"] <= TIMINGS_AT_ONCE, running  # a few at once beside the checks
    assert running["most benches"] == 3, running  # once the checks ended, as many as the slot checked at once
    assert [(r["line"], r["pass_exe"]) for r in outcome.records] == [(0, True), (1, False)] + [
        (line, True) for line in range(2, 6)
    ]
    assert all(r["speedup"] is None for r in outcome.records)  # the interpreter times nothing
    assert "timing needs a GPU" in outcome.records[0]["message"], outcome.records[0]["message"]
    assert all(r["timing_s"] is not None for r in outcome.records if r["pass_exe"])
    assert said[0] == "checking 6 prediction(s), 3 at once on each of 1 slot(s)", said
    assert said[1].startswith(f"gpu 0 times what passed (2 waiting), {TIMINGS_AT_ONCE} at a time"), said


def test_a_timed_record_says_how_long_the_golden_files_timed_calls_take():
    """A speedup of µs-scale calls is judged in a wider band: each record says how small its calls are."""
    import asyncio

    from geak.agent.batch.dataloaders.scoring import Score, time_code
    from geak.evaluator.results import BenchResult, CallTiming, CheckResult, Speedup

    def call(ms: float) -> CallTiming:
        return CallTiming("f", "f(f32[8])", ms, 1.0, "cuda-graph", 64, None, None, None, None, "hot")

    class Timed:
        async def bench(self, **kwargs):
            speedup = Speedup(1.01, 0.9, 1.1, 6, False, "within noise (±15%)", 0.15)
            reference = (call(0.001), call(0.002))
            return BenchResult(True, "perf", "cuda", "f.py", "timed; timed again with the candidate prepared first: "
                               "1.020x; both orders together 1.010x (within noise (±15%))", calls=(call(0.001),),
                               reference_calls=reference, speedup=speedup, duration_s=1.234)  # fmt: skip

    score = Score(True, True)
    check = CheckResult(True, "exec", "cuda", "f.py", "")
    asyncio.run(time_code(Timed(), "code", Path("f.py"), check, score))
    assert score.reference_ms == pytest.approx(0.003) and score.timing_s == 1.23
    assert score.speedup == 1.01 and score.speedup_verdict == "within noise (±15%)" and score.timed_rounds == 6
    assert "candidate prepared first: 1.020x" in score.timing_message  # each order's ratio, for the record


def test_an_eval_without_timing_says_nothing_of_timings_on_several_slots(tmp_path):
    """With two GPUs and `--no-timing`, the slot that finishes its checks first has nothing to time, and says so by
    saying nothing of timings."""
    import asyncio

    from geak.agent.batch.dataloaders import BUILT_IN
    from geak.agent.batch.eval import score_predictions
    from geak.agent.batch.eval_slots import EvalSlot
    from geak.evaluator.api import EvalOptions, Evaluator

    class Slow(Evaluator):
        async def check(self, *args, **kwargs):
            await asyncio.sleep(1.0)  # gpu 0 is done with its checks first
            return await super().check(*args, **kwargs)

    async def go() -> list[str]:
        fast = Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
        slow = Slow(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
        slots = [EvalSlot(f"gpu {i}", e, gpu=str(i), runtime={"backend": "cuda", "device": "a GPU"})
                 for i, e in enumerate((fast, slow))]  # fmt: skip
        preds = tmp_path / "preds.jsonl"
        code = (GOLDEN / "relu_kernel.py").read_text()
        preds.write_text("".join(json.dumps({"filename": "relu_kernel.py", "predict": code}) + "\n" for _ in range(2)))
        said: list[str] = []
        try:
            outcome = await score_predictions(
                BUILT_IN["tritonbench"](TB), preds, slots, tmp_path, timing=False, per_slot=1, on_event=said.append
            )
        finally:
            await asyncio.gather(fast.aclose(), slow.aclose())
        assert [r["pass_exe"] for r in outcome.records] == [True, True]
        return said

    said = asyncio.run(go())
    assert not [s for s in said if "timing" in s], said


def test_eval_with_a_tuned_reference_records_both_speedups_and_says_why_none_was_timed(tmp_path, capsys):
    """`--tuned-reference` plumbs through: every record keeps both speedups (on the interpreter neither is timed,
    and no search runs: it tunes by timing), the summary counts both, and the table says why none was timed."""
    kernel = (GOLDEN / "relu_kernel.py").read_text()
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"filename": "relu_kernel.py", "predict": kernel}) + "\n")
    argv = ["eval", str(preds), "--suite", "tritonbench", "--data", str(TB), "--backend", "interpreter",
            "--tuned-reference"]  # fmt: skip
    assert main([*argv, "--json", "--output", str(tmp_path / "out")]) == 0
    data = json.loads(capsys.readouterr().out)
    (record,) = data["records"]
    assert record["pass_exe"] and record["speedup"] is None and record["speedup_vs_tuned"] is None
    assert "tuned_reference" in record and record["speedup_vs_tuned_verdict"] is None
    summary = data["summary"]
    assert summary["timed_vs_tuned"] == 0 and summary["speedup_vs_tuned_geomean"] is None
    assert json.loads((tmp_path / "out" / "eval.json").read_text())["tuned_reference"] is True
    assert main([*argv, "--output", str(tmp_path / "out"), "--resume"]) == 0  # the same eval: resumed
    assert "no prediction was timed against one" in capsys.readouterr().out
    assert main([*argv[:-1], "--output", str(tmp_path / "out"), "--resume"]) == 2  # an eval without the flag: not
    assert main([*argv, "--no-timing"]) == 2 and "not with --no-timing" in capsys.readouterr().err


def test_a_prediction_is_timed_against_the_tuned_golden_file_too_or_keeps_its_speedup_where_the_search_kept_it(
    tmp_path,
):
    """Scripted timings: 1.5x over the golden file, 1.1x over its tuned self (a block-size sweep credited to the
    model no more); where the search kept the golden file, the speedup over it is the same speedup."""
    import asyncio

    from geak.agent.batch import metrics
    from geak.agent.batch.dataloaders.scoring import Score
    from geak.agent.batch.eval import _Checked, _time_against_tuned
    from geak.agent.batch.eval_slots import EvalSlot
    from geak.agent.batch.tuned_reference import TunedReference
    from geak.evaluator.results import BenchResult, CheckResult, Speedup

    golden, tuned_path = tmp_path / "k.py", tmp_path / "tuned" / "k.py"
    ratios = {golden: (1.5, "faster"), tuned_path: (1.1, "within noise (±15%)")}
    timed: list[Path] = []

    class Timed:
        async def bench(self, *, against: Path, **kwargs):
            ratio, verdict = ratios[against]
            timed.append(against)
            speedup = Speedup(ratio, ratio * 0.95, ratio * 1.05, 8, False, verdict, 0.15)
            return BenchResult(True, "perf", "cuda", "k.py", "timed", speedup=speedup, duration_s=1.0)

    class Searched:
        def __init__(self, reference: TunedReference):
            self.reference = reference

        async def of(self, reference, slot):
            return self.reference

    def run(tuned: TunedReference) -> dict:
        slot = EvalSlot("gpu 0", Timed(), gpu="0", runtime={"backend": "cuda"})
        check = CheckResult(True, "exec", "cuda", "k.py", "")
        score = Score(True, True, speedup=1.5, speedup_low=1.4, speedup_high=1.6, speedup_verdict="faster")
        checked = _Checked({"filename": "k.py", "pass_exe": True, **score.to_dict()}, score, check, "code", golden)
        asyncio.run(_time_against_tuned(checked, slot, Searched(tuned), None))
        return checked.record

    record = run(TunedReference(tuned_path, True, "1 finalist confirmed: 1.36x faster", 12.0))
    assert timed == [tuned_path]  # against the golden file it was timed before; now against its tuned self
    assert (record["speedup"], record["speedup_vs_tuned"]) == (1.5, 1.1)
    assert record["speedup_vs_tuned_verdict"] == "within noise (±15%)" and record["tuned_reference"]["improved"]
    kept = run(TunedReference(golden, False, "the original is kept"))
    assert timed == [tuned_path] and kept["speedup_vs_tuned"] == 1.5 and kept["speedup_vs_tuned_low"] == 1.4
    failed = run(TunedReference(golden, False, "", error="k.py does not pass its own test"))
    assert "speedup_vs_tuned" not in failed and failed["tuned_reference"]["error"].startswith("k.py does not")
    summary = metrics.summarize([record, {**kept, "filename": "j.py"}])
    assert summary["timed_vs_tuned"] == 2 and summary["faster_vs_tuned"] == 1
    assert summary["speedup_vs_tuned_geomean"] == pytest.approx((1.1 * 1.5) ** 0.5)


def test_the_search_of_a_golden_file_runs_once_and_keeps_it_where_it_cannot_time(tmp_path):
    """The real search without a model, on the interpreter: it screens for correctness only and keeps the golden
    file, which is then its own tuned reference; a second prediction of it waits for the same search."""
    import asyncio

    from geak.agent.batch.eval_slots import EvalSlot
    from geak.agent.batch.tuned_reference import TunedReferences
    from geak.agent.config import AgentConfig
    from geak.evaluator.api import EvalOptions, Evaluator

    golden = GOLDEN / "relu_kernel.py"

    async def go():
        evaluator = Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0))
        slot = EvalSlot("cpu", evaluator)
        tuned = TunedReferences(AgentConfig(search_time_s=5), tmp_path)
        try:
            first, second = tuned.of(golden, slot), tuned.of(golden, slot)
            return first is second, await first
        finally:
            await evaluator.aclose()

    same, reference = asyncio.run(go())
    assert same and reference.path == golden and not reference.improved and reference.error is None
    assert "timing needs a GPU" in reference.summary, reference.summary
