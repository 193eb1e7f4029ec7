"""The isolation of job processes as both sides name it: the modes a caller may ask for, the mechanism a fork
server reports, the `Policy` the caller decides and the zygote applies (``job/namespaces.py``), and the paths both
treat alike (GPU device nodes, the Python installation)."""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from typing import Any

MODES = ("auto", "namespaces", "process")
PROCESS_ONLY = "process only"  # the mechanism when no namespaces could be made (or isolation is off)
GPU_NODES = ("nvidia*", "nvidia-caps", "nvidia-caps-imex-channels", "kfd", "dri")


@dataclass(frozen=True)
class Policy:
    """What a job may see, decided by the trusted side when the zygote starts. Paths are absolute.

    `hidden`: directories covered by an empty private tmpfs (the home directories, /tmp, the caller's project...);
    `exposed`: directories inside hidden ones that jobs need, shown read-only (the Python install, the evaluator)."""

    hidden: tuple[str, ...]
    exposed: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"hidden": list(self.hidden), "exposed": list(self.exposed)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Policy:
        return cls(tuple(data["hidden"]), tuple(data["exposed"]))


def gpu_nodes() -> list[str]:
    """The GPU device nodes present here (bound into a job's /dev, and into bubblewrap's)."""
    return sorted({p for pattern in GPU_NODES for p in glob.glob(f"/dev/{pattern}")})


def python_roots() -> set[str]:
    """The Python installation's roots: never hidden from a job."""
    return {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
