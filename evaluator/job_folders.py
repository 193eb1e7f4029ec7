"""The folders the evaluator's jobs run in, under one scratch folder of its own."""

from __future__ import annotations

import asyncio
import importlib.util
import keyword
import shutil
import sys
import tempfile
from pathlib import Path

from .triton_file import TritonFile


class JobFolders:
    """Job folders and module names, numbered alike for references and candidates (a job cannot tell which it runs)."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp())
        self._serial = 0

    def new(self) -> Path:
        """A job's folder, with its `outputs` folder."""
        self._serial += 1
        path = self.scratch / f"job{self._serial}"
        (path / "outputs").mkdir(parents=True)
        return path

    def module_name(self) -> str:
        """A neutral module name: it does not say which variant is the reference."""
        self._serial += 1
        return f"kernels_{self._serial}"

    async def aclose(self) -> None:
        await removed(self.scratch)


async def removed(path: Path) -> None:
    """Remove a job's folder off the event loop: removing the outputs of many checks would hold the loop, and every
    job's messages with it."""
    await asyncio.to_thread(shutil.rmtree, path, True)


def file_name(owner: TritonFile) -> str:
    """The name a check job's file goes by (its module's name is the stem): the test's owner's, as when it runs
    alone, so reference and candidate jobs look alike; `kernels.py` where that name cannot name a module."""
    stem = Path(owner.path).stem
    plain = stem.isidentifier() and not keyword.iskeyword(stem) and stem not in sys.stdlib_module_names
    return f"{stem}.py" if plain and importlib.util.find_spec(stem) is None else "kernels.py"
