"""Helpers for tests that interrupt a run with Ctrl-C (SIGINT)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

ADD_NATIVE = Path(__file__).parent / "fixtures" / "add_native.py"


def slow_add_native(folder: Path, seconds: float = 1.0) -> Path:
    """`folder/add_native.py`: the fixture with a `seconds`-long sleep in its test, so an interrupt sent once a run is
    under way lands mid-run on any machine (the plain fixture's whole optimize run can take under a second)."""
    text = ADD_NATIVE.read_text()
    marker = "    out = add(x, y)\n"
    assert marker in text, "the fixture changed: update slow_add_native"
    path = folder / "add_native.py"
    path.write_text("import time\n" + text.replace(marker, f"{marker}    time.sleep({seconds})\n", 1))
    return path


def start_interruptible(cmd: list[str], **kwargs) -> subprocess.Popen:
    """Start `cmd` with SIGINT's default action even where the tests run in the background (a shell starts a `&` job
    with SIGINT ignored, which the child would inherit and, as a command should, respect)."""
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kwargs,
    )
