"""The isolation of job processes as both sides name it: the modes a caller may ask for, the mechanism a fork
server reports, the `Policy` the caller decides and the zygote applies (``job/namespaces.py``), and the paths both
treat alike (GPU device nodes, the Python installation)."""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODES = ("auto", "namespaces", "process")
PROCESS_ONLY = "process only"  # the mechanism when no namespaces could be made (or isolation is off)
GPU_NODES = ("nvidia*", "nvidia-caps", "nvidia-caps-imex-channels", "kfd", "dri")
KFD_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"  # amdkfd's node per CPU and GPU: a GPU's render minor, its UUID


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


def gpu_nodes(environ: Mapping[str, str] | None = None, topology: str = KFD_TOPOLOGY, dev: str = "/dev") -> list[str]:
    """The GPU device nodes present here (bound into a job's /dev, and into bubblewrap's). Where `environ` (default:
    this process's) pins AMD GPUs with ROCR_VISIBLE_DEVICES, only their render nodes of /dev/dri: what a container
    binds to give a process those GPUs alone (the HSA runtime opens every render node it is shown)."""
    environ = os.environ if environ is None else environ
    mask = environ.get("ROCR_VISIBLE_DEVICES")
    render = None if mask is None else amd_render_nodes(mask, topology, dev)
    patterns = GPU_NODES if render is None else tuple(p for p in GPU_NODES if p != "dri")
    found = {p for pattern in patterns for p in glob.glob(f"{dev}/{pattern}")}
    return sorted(found | {p for p in render or () if os.path.exists(p)})


def amd_render_nodes(mask: str, topology: str = KFD_TOPOLOGY, dev: str = "/dev") -> list[str] | None:
    """The render nodes (/dev/dri/renderD<minor>) of the GPUs a ROCR_VISIBLE_DEVICES value names: indices among the
    GPUs in amdkfd's node order (what the HSA runtime counts), or UUIDs (GPU-<unique_id in hex>). None where the
    topology cannot be read or an entry names no GPU of it: then every render node stays bound, as without a mask."""
    gpus = []
    for node in sorted(glob.glob(os.path.join(topology, "*")), key=_node_number):
        try:
            with open(os.path.join(node, "properties")) as f:
                props = dict(line.split(None, 1) for line in f.read().splitlines() if " " in line)
        except (OSError, ValueError):
            return None
        if int(props.get("simd_count", "0").strip() or 0) > 0 and "drm_render_minor" in props:
            gpus.append(props)
    nodes = []
    for entry in (e.strip() for e in mask.split(",") if e.strip()):
        if entry.isdigit():
            chosen = gpus[int(entry)] if int(entry) < len(gpus) else None
        else:
            chosen = next((g for g in gpus if entry.lower() == f"gpu-{int(g.get('unique_id', '0')):016x}"), None)
        if chosen is None:
            return None
        nodes.append(f"{dev}/dri/renderD{int(chosen['drm_render_minor'])}")
    return nodes


def _node_number(path: str) -> int:
    name = os.path.basename(path)
    return int(name) if name.isdigit() else -1


def python_roots() -> set[str]:
    """The Python installation's roots: never hidden from a job."""
    return {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
