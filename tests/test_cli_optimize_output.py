"""What `geak optimize` says: a model that cannot be used (exit 2, plainly), no secret, markup shown verbatim, the
final message once, table notes whole, "1 request", a search winner's review notes in the table, the summary and
`--json`."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM

FIXTURES = Path(__file__).parent / "fixtures"
ADD = FIXTURES / "add_native.py"
KERNEL = ADD.read_text().split("def test_add")[0]


def geak(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "geak.server.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})  # fmt: skip


def config_file(tmp_path: Path, **values) -> str:
    path = tmp_path / "geak.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in values.items()))
    return str(path)


def test_a_closed_port_is_reported_as_an_unusable_model(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = geak("optimize", str(ADD), "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1", "--backend",
             "interpreter", "--output", str(tmp_path), "--config", config_file(tmp_path, max_retries=1))  # fmt: skip
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("geak optimize: the model cannot be used: cannot connect") and "never answered" in last
    assert "gave up after 1 retries" in last  # the client's one retry, not minutes of them
    assert "debugging trap" not in p.stderr and "tuning the launch parameters" not in p.stderr and not p.stdout


def test_rate_limited_forever_exits_2(scripted_llm: ScriptedLLM, tmp_path):
    scripted_llm.forever("slow down", status=429)
    p = geak("optimize", str(ADD), "--model", "m", "--base-url", scripted_llm.base_url, "--backend", "interpreter",
             "--output", str(tmp_path),
             "--config", config_file(tmp_path, max_retries=0, model_max_failures=2))  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "the model cannot be used: rate limited" in p.stderr and "2 requests failed in a row" in p.stderr
    assert len(scripted_llm.requests) == 2


def test_no_password_and_markup_shown_verbatim(scripted_llm: ScriptedLLM, tmp_path):
    url = scripted_llm.base_url.replace("http://", "http://alice:PW-s3cret@")
    scripted_llm.reply("[/bold] boom [red]", status=500)  # the request is asked again
    scripted_llm.reply(f"```python\n{KERNEL}```\n")
    out = tmp_path / "runs"
    p = geak("-v", "optimize", str(ADD), "--model", "m", "--base-url", url, "--backend", "interpreter", "--output",
             str(out), "--iterations", "1", "--no-search",
             "--config", config_file(tmp_path, max_retries=0))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "[/bold] boom [red]" in p.stderr  # the server's text, not rich markup
    assert "http://***@localhost" in p.stderr
    assert "tokens: " in p.stdout and "in 1 request\n" in p.stdout
    for text in [p.stdout, p.stderr, *(f.read_text() for f in out.rglob("*") if f.is_file())]:
        assert "PW-s3cret" not in text


def test_the_demo_says_its_result_once_with_whole_notes(tmp_path):
    p = geak("optimize", "snippets/kernels/vector_add.py", "--backend", "interpreter", "--budget", "4", "--output",
             str(tmp_path), env={"COLUMNS": "80"})  # fmt: skip
    assert p.returncode == 0, p.stderr
    message = "speed cannot be measured without a GPU"
    assert (p.stdout + p.stderr).count(message) == 1
    assert "screened configurations" in p.stdout  # tried for correctness only: no candidate, but the list
    assert "add_kernel: BLOCK_SIZE 1024→" in p.stdout.replace("\n", " ")
    assert re.search(r"launch search: 2 knob\(s\), \d+ configuration\(s\) screened \(\d+ correct\)", p.stdout)
    table = [line for line in p.stdout.splitlines() if "│" in line or "┃" in line]
    assert table and all(len(line) <= 80 for line in table)  # the table fits the terminal


SPLIT_K = FIXTURES / "split_k_atomic.py"  # the scripted GPU times its SPLIT_K 2 at half the original's time
HARNESS = Path(__file__).parent / "lsp_harness.py"
ATOMIC_LINE = next(i for i, line in enumerate(SPLIT_K.read_text().splitlines(), 1) if "tl.atomic_add(" in line)
ATOMIC_NOTE = f"row_sum_kernel: SPLIT_K 1→2 takes its `tl.atomic_add` path (line {ATOMIC_LINE}): it updates memory"
PINNED_NOTE = "row_sum_kernel: its autotuner's 2 configs are replaced by the one timed here"


def scripted_gpu_geak(*args: str) -> subprocess.CompletedProcess:
    """`geak` on the scripted GPU (``lsp_harness``): real checks and screening in the interpreter, timing scripted."""
    return subprocess.run([sys.executable, str(HARNESS), "--scripted-gpu", "--cli", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})  # fmt: skip


def test_a_search_winner_that_splits_k_carries_its_review_notes_and_both_speedups_in_json_record_and_text(tmp_path):
    """The search's winner, as the loop returns it, takes the kernel onto its atomic path and pins its autotuner's list
    to one config: every output says so, and gives its speedup over the file as it runs (2x) beside the one over the
    best of its autotune list (its second config pinned: 1.6x)."""
    record_path = tmp_path / "records" / "run.json"
    p = scripted_gpu_geak("optimize", str(SPLIT_K), "--budget", "12", "--output", str(tmp_path / "a"), "--json",
                          "--record", str(record_path))  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["improved"] and data["best"]["note"] == "row_sum_kernel: SPLIT_K 1→2"
    atomic, pinned = data["review"]
    assert atomic.startswith(ATOMIC_NOTE) and pinned.startswith(PINNED_NOTE)
    assert data["best"]["review"] == [atomic, pinned]
    over = data["search"]["over_autotune_best"]
    assert over["config"] == "row_sum_kernel: its own config 2 of 2 pinned (SPLIT_K=1, num_warps=2, num_stages=3)"
    assert over["speedup"] == pytest.approx(1.6) and over["verdict"] == "faster"
    assert data["message"] == (
        "s1 (search) is 2.000x faster [1.960, 2.040] and passes the test, 1.600x [1.568, 1.632] vs your autotune "
        f"list's best ({over['config']}; faster); 2 review notes say what the test cannot show: read before applying it"
    )

    # the run's raw record (--record): every configuration screened, the finalists' intervals, device, commit
    record = json.loads(record_path.read_text())
    assert record["kind"] == "search-run" and record["device"] == "scripted GPU" and record["commit"]
    assert record["setup"] == {"budget_s": 12.0, "model": None}
    (entry,) = record["searched"]
    assert entry["file"] == "split_k_atomic.py" and entry["speedup"] == pytest.approx(2.0)
    assert entry["interval"] == pytest.approx([1.96, 2.04]) and entry["review"] == [atomic, pinned]
    assert len(entry["configurations"]) >= entry["search"]["screened"] == data["search"]["screened"] > 8
    assert [(f["change"], f["verdict"]) for f in entry["finalists"]] == [("row_sum_kernel: SPLIT_K 1→2", "faster")]
    assert entry["over_autotune_best"] == data["search"]["over_autotune_best"] and entry["seconds"] > 0

    p = scripted_gpu_geak("optimize", str(SPLIT_K), "--budget", "12", "--output", str(tmp_path / "b"))
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if line.startswith(" s1 "))
    assert row.rstrip().endswith("row_sum_kernel: SPLIT_K 1→2 ⚠ review below")  # the table marks it
    assert f"review s1: {atomic}" in p.stdout and f"review s1: {pinned}" in p.stdout
    assert "vs your autotune list's best" in p.stdout and "2 review notes say what the test cannot show" in p.stdout
    assert f"screened configurations (the first 8 of {len(entry['configurations'])}" in p.stdout
