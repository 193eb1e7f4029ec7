"""The `geak` CLI contract: exit codes and the JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from interrupts import slow_add_native, start_interruptible

from geak.agent.checkpoint import paths_for

FIXTURES = Path(__file__).parent / "fixtures"


def geak(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "geak.server.cli", *args], capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_check_json_pass():
    p = geak("check", str(FIXTURES / "add_native.py"), "--json", "--backend", "interpreter")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert {"ok", "stage", "backend", "tests", "diagnostics"} <= set(data)
    assert data["ok"] and data["stage"] == "exec" and data["backend"] == "interpreter"
    assert data["tests"][0]["name"] == "test_add"


def test_check_of_a_test_that_asserts_nothing_says_so_once():
    p = geak("check", str(FIXTURES / "add_tritonbench.py"), "--backend", "interpreter")
    assert p.returncode == 0, p.stderr
    said = p.stdout + p.stderr
    assert "PASS" in said and "stage call" in said
    assert said.count("assert nothing") == 1, said


def test_check_failure_exit_1_with_diagnostic():
    p = geak("check", str(FIXTURES / "compile_error.py"), "--json")
    assert p.returncode == 1
    data = json.loads(p.stdout)
    assert not data["ok"] and data["diagnostics"][0]["line"] == 10


def test_not_checkable_on_cpu_exit_3_as_information():
    p = geak("check", str(FIXTURES / "interp" / "inline_asm.py"), "--json", "--backend", "interpreter")
    assert p.returncode == 3, p.stderr
    data = json.loads(p.stdout)
    assert not data["ok"] and "inline assembly" in data["not_checkable"]
    assert [d["severity"] for d in data["diagnostics"]] == ["information"]
    p = geak("check", str(FIXTURES / "interp" / "inline_asm.py"), "--backend", "interpreter")
    assert p.returncode == 3 and "NOT CHECKABLE" in p.stdout and "not checkable on CPU: inline" in p.stdout


def test_bad_input_exit_2():
    assert geak("check", str(FIXTURES / "no_kernel.py")).returncode == 2
    assert geak("check", "does-not-exist.py").returncode == 2
    assert geak("bench", str(FIXTURES / "no_test.py")).returncode == 2
    p = geak("check", str(FIXTURES / "add_native.py"), "--tolerance", "float32")
    assert p.returncode == 2 and "DTYPE=RTOL,ATOL" in p.stderr


def test_human_output_points_at_lines():
    p = geak("check", str(FIXTURES / "raising_test.py"))
    assert p.returncode == 1
    assert "raising_test.py:20:1: error: ValueError: unsupported size" in p.stdout


def test_bench_without_gpu_exit_2():
    p = geak("bench", str(FIXTURES / "add_native.py"), "--backend", "interpreter", "--json")
    assert p.returncode == 2
    assert "timing needs a GPU" in json.loads(p.stdout)["message"]


def test_optimize_without_model_on_cpu(tmp_path):
    p = geak("optimize", str(FIXTURES / "add_native.py"), "--budget", "3", "--output", str(tmp_path), "--json",
             "--backend", "interpreter")  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert not data["improved"] and "speed cannot be measured" in data["message"]
    assert data["candidates"] == []  # screened for correctness only: no finalist to check and time
    search = data["search"]
    assert search["knobs"] == 2 and search["screened"] >= 1 and search["summary"].startswith("timing needs a GPU")
    assert all(row["status"] in ("ok", "same", "not run") for row in search["configurations"])
    assert paths_for(tmp_path, FIXTURES / "add_native.py").latest.exists()


def test_optimize_rejects_a_key_in_the_config(tmp_path):
    cfg = tmp_path / "geak.yaml"
    cfg.write_text("model_id: m\napi_key: sk-123\n")
    p = geak("optimize", str(FIXTURES / "add_native.py"), "--config", str(cfg))
    assert p.returncode == 2 and "api_key_env" in p.stderr and "sk-123" not in p.stderr


def test_ctrl_c_keeps_the_checkpoint_and_resume_continues(tmp_path):
    import signal
    import time

    slow = slow_add_native(tmp_path)  # the plain fixture's search can end within a second of its first checkpoint
    output = tmp_path / "out"
    proc = start_interruptible("optimize", str(slow), "--budget", "12", "--output", str(output), "--backend",
                               "interpreter")  # fmt: skip
    checkpoint = paths_for(output, slow).latest
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert checkpoint.exists(), "no checkpoint was written"
    assert proc.poll() is None, "the run ended before Ctrl-C could interrupt it"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "checkpoint is kept" in err

    p = geak("optimize", str(slow), "--budget", "12", "--output", str(output), "--resume",
             "--json", "--backend", "interpreter")  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["search"]["screened"] >= 1
