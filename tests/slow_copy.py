"""A copy of the vector-add fixture whose test takes a while, so an interrupt sent once a run is under way lands
mid-run on any machine (the plain fixture's whole optimize run can take under a second on a fast one)."""

from __future__ import annotations

from pathlib import Path

ADD_NATIVE = Path(__file__).parent / "fixtures" / "add_native.py"


def slow_add_native(folder: Path, seconds: float = 1.0) -> Path:
    """`folder/add_native.py`: the fixture with a `seconds`-long sleep in its test."""
    text = ADD_NATIVE.read_text()
    marker = "    out = add(x, y)\n"
    assert marker in text, "the fixture changed: update slow_add_native"
    path = folder / "add_native.py"
    path.write_text("import time\n" + text.replace(marker, f"{marker}    time.sleep({seconds})\n", 1))
    return path
