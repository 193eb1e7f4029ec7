"""Ctrl-C on the command line: while a command loads and reads its input, it exits at once (130, one line) and no
KeyboardInterrupt is raised there (one raised in the middle of an import can leave a module lock held and hang the
command); once its work is under way, it is a KeyboardInterrupt the command handles (``tests/test_cli.py``,
``test_batch_run.py`` and ``test_service.py`` interrupt running work)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from geak.server.cli.entry import main

ADD = Path(__file__).parent / "fixtures" / "add_native.py"

# `geak optimize` whose configuration takes 30 s to read: says "reading" on stdout, and "raised" where a
# KeyboardInterrupt reached that code, which is part of the command's loading.
SLOW_LOADING = f"""
import sys, time
import geak.agent.config as config
from geak.server.cli.entry import main

def slow_load_config(*args, **kwargs):
    print("reading", flush=True)
    try:
        time.sleep(30)
    except KeyboardInterrupt:
        print("raised", flush=True)
        raise
    raise config.ConfigError("read")

config.load_config = slow_load_config
sys.exit(main(["optimize", {str(ADD)!r}, "--backend", "interpreter"]))
"""


def _loading(sigint: signal.Handlers) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SLOW_LOADING], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "reading\n", proc.communicate()
    return proc


def test_ctrl_c_while_a_command_loads_exits_at_once_and_raises_nothing_there():
    proc = _loading(signal.SIG_DFL)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    # ended by the signal while it loaded (a load that ran its 30 s ends with the configuration's error)
    assert proc.returncode == 130 and err == "geak: interrupted\n", (proc.returncode, err)
    assert "raised" not in out


def test_a_ctrl_c_the_shell_ignores_stays_ignored_while_a_command_loads():
    proc = _loading(signal.SIG_IGN)  # a shell's background job
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None
    proc.kill()
    proc.communicate(timeout=20)


def test_the_callers_ctrl_c_handling_is_back_after_a_command(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    assert main(["eval", str(tmp_path / "none.jsonl"), "--suite", "tritonbench", "--data", str(tmp_path)]) == 2
    assert signal.getsignal(signal.SIGINT) is before


# `geak optimize` interrupted while `asyncio.run` makes its event loop: its work (a coroutine) is made, never started.
INTERRUPTED_BEFORE_THE_LOOP = f"""
import asyncio.events, sys
from geak.server.cli.entry import main

def new_event_loop():
    raise KeyboardInterrupt  # as a Ctrl-C landing there raises it
asyncio.events.new_event_loop = new_event_loop
sys.exit(main(["optimize", {str(ADD)!r}, "--backend", "interpreter", "--output", sys.argv[1]]))
"""


def test_a_ctrl_c_before_the_loop_starts_the_work_leaves_the_commands_own_last_line(tmp_path):
    """On a loaded host a Ctrl-C half a second in landed there, and Python's "coroutine '_optimize' was never
    awaited" warning followed the command's last line."""
    proc = subprocess.run([sys.executable, "-W", "default", "-c", INTERRUPTED_BEFORE_THE_LOOP, str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert "never awaited" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("geak optimize: stopped; no candidate was finished")
