"""Helpers for tests that interrupt a run with Ctrl-C (SIGINT)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

ADD_NATIVE = Path(__file__).parent / "fixtures" / "add_native.py"
# The `geak` script a user runs. Not `python -m geak.server.cli`: there CPython itself ends the process by SIGINT (-2)
# after a clean exit 130 when the Ctrl-C landed in code run by `exec` of a string (a dataclass being made while a
# module loads): the flag `exec` sets for an unhandled Ctrl-C stays set though the command handled it (Py_RunMain's
# check, made for `-m`, `-c` and stdin only).
GEAK = shutil.which("geak", path=str(Path(sys.executable).parent)) or "geak"


def slow_add_native(folder: Path, seconds: float = 1.0) -> Path:
    """`folder/add_native.py`: the fixture with a `seconds`-long sleep in its test, so an interrupt sent once a run is
    under way lands mid-run on any machine (the plain fixture's whole optimize run can take under a second)."""
    text = ADD_NATIVE.read_text()
    marker = "    out = add(x, y)\n"
    assert marker in text, "the fixture changed: update slow_add_native"
    path = folder / "add_native.py"
    path.write_text("import time\n" + text.replace(marker, f"{marker}    time.sleep({seconds})\n", 1))
    return path


def start_interruptible(*args: str, **kwargs) -> subprocess.Popen:
    """Start `geak ARGS` with SIGINT's default action even where the tests run in the background (a shell starts a
    `&` job with SIGINT ignored, which the child would inherit and, as a command should, respect)."""
    return subprocess.Popen(
        [GEAK, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **kwargs,
    )
