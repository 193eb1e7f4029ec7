"""The job side as a fork server runs it: a copy of ``evaluator/job`` and ``evaluator/shared`` under a neutral
package name in the zygote's own directory, started with the Python environment reached through a neutral link, so
that nothing a job process can look at (its modules and their files, ``sys.path``, the import hooks, its command
line, its environment, its directories) names the evaluator. The zygote imports every job-side module before it
forks (``job/worker.py`` ``PRELOAD``), so job processes need none of these files: the checkout stays hidden.

What in-process instrumentation still reveals is listed in docs/evaluator.md ("An evaluator the code under test
cannot see").
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "kernelrun"  # the copy's name: what `sys.modules` of a job shows instead of the evaluator's
WORKER_MODULE = f"{PACKAGE}.job.worker"  # started as `python -m WORKER_MODULE`, its configuration on stdin
_EVALUATOR = Path(__file__).resolve().parent
_TOP = __name__.split(".")[0]


@dataclass(frozen=True)
class Launch:
    """How a zygote starts: its Python (through `python_home`, a neutral link to the environment's prefix, where
    it is a virtual environment) and the import hooks of the evaluator's own installation it must drop."""

    python: str
    python_home: str | None
    forget: tuple[str, ...]


def prepare(workdir: Path, python: str = sys.executable) -> Launch:
    """Write the neutral copy of the job side into `workdir` (the zygote's directory, and its working directory:
    first on its `sys.path`) and the link to the Python environment."""
    write_package(workdir)
    home = _neutral_home(workdir, python)
    if home is not None:
        python = os.path.join(home, os.path.relpath(python, sys.prefix))
    return Launch(python, home, own_import_hooks())


def write_package(directory: Path) -> None:
    """The neutral copy of the job side, as `directory`/``PACKAGE``: the zygote's, and a profile job's, whose
    profiler starts a Python of its own that imports it from the job's directory (``job/kernel_profile.py``)."""
    package = directory / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("job", "shared"):
        shutil.copytree(_EVALUATOR / part, package / part, ignore=ignore)


def _neutral_home(workdir: Path, python: str) -> str | None:
    """A link to the virtual environment's prefix (None outside one, or for another Python than this one): Python
    started through it takes its prefix, its module paths and `sys.executable` from the link."""
    if sys.prefix == sys.base_prefix or not os.path.abspath(python).startswith(sys.prefix + os.sep):
        return None
    link = workdir / "py"
    link.symlink_to(sys.prefix, target_is_directory=True)
    return str(link)


def own_import_hooks() -> tuple[str, ...]:
    """The modules of the import hooks an editable install of the evaluator adds at start-up (setuptools'
    `__editable___<name>_finder`, which maps the evaluator's packages to the checkout)."""
    found = []
    # sys.modules.copy() is one C call; list(sys.modules.items()) raised "dictionary changed size during iteration"
    # once in CI, while another thread of the command imported
    for name, module in sys.modules.copy().items():
        mapping = getattr(module, "MAPPING", None)
        if name.startswith("__editable__") and isinstance(mapping, dict) and any(
            str(key).split(".")[0] == _TOP for key in mapping
        ):
            found.append(name)
    return tuple(found)
