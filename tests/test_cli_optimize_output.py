"""What `geak optimize` says: a model that cannot be used (exit 2, plainly), no secret, markup shown verbatim, the
final message once, table notes whole, "1 request"."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

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
    started = time.monotonic()
    p = geak("optimize", str(ADD), "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1", "--backend",
             "interpreter", "--output", str(tmp_path), "--config", config_file(tmp_path, max_retries=1))  # fmt: skip
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("geak optimize: the model cannot be used: cannot connect") and "never answered" in last
    assert "debugging trap" not in p.stderr and "tuning the launch parameters" not in p.stderr and not p.stdout
    assert time.monotonic() - started < 60


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


def test_the_search_winners_review_notes_are_printed(capsys):
    from geak.agent.outcome import OptimizeResult
    from geak.server.cli.optimize import print_result

    note = "mm: SPLIT_K 1→2 takes its `tl.atomic_add` path (line 9): it adds into memory that must start at zero"
    search = {"summary": "mm: SPLIT_K 1→2: 2.000x faster", "knobs": 1, "screened": 4, "correct": 4, "rounds": 1,
              "finalists": 1, "seconds": 3.0, "review": [note]}  # fmt: skip
    result = OptimizeResult(str(ADD), True, "s1 (search) is 2.0x faster", True, {"device": "GPU"}, 1.0, None, None,
                            "", [], search=search)  # fmt: skip
    print_result(result)
    assert f"review: {note}" in capsys.readouterr().out.replace("\n", " ")
