"""What the `geak` command line and its warm evaluator service agree on: where the service listens, which build and
environment it serves, and the lines they exchange.

One service per user, GEAK build and job environment: a command whose GEAK code, Python, or job-relevant variables
(`CUDA_VISIBLE_DEVICES`, `TRITON_*`... as ``isolation.job_environment`` passes them) differ from a running service's
talks to a service of its own. The socket lives in a directory only its user may enter.

Lines are JSON. The command sends one request ``{"method": "check"|"bench"|"profile", "file", "against", "options"}``
(`options`: every evaluation option as data, ``EvalOptions.to_dict``, as the command worked them out: a service
serves only commands of its own user, build and environment, so their defaults are its own); the service answers
with ``{"progress": text}`` lines, then ``{"result": {...}}`` or ``{"error": kind, "message": text}`` (kind:
bad_input, worker_start, internal). A command that goes away cancels its request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geak.evaluator import Evaluator

LINE_LIMIT = 1 << 30  # the longest line either side reads: a result's JSON (a suite file's hundreds of timed calls)
IDLE_S = 600.0  # the service ends after this long without a request (GEAK_SERVICE_IDLE_S)
SOURCE_PACKAGES = ("geak.evaluator", "geak.agent", "geak.server")


class ServiceDirError(RuntimeError):
    """The service's directory is not private to this user."""


def service_dir() -> Path:
    """`$GEAK_SERVICE_DIR`, else `$XDG_RUNTIME_DIR/geak`, else `~/.cache/geak/service`: made private (0700)."""
    root = os.environ.get("GEAK_SERVICE_DIR")
    if not root:
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        root = os.path.join(runtime, "geak") if runtime else os.path.join(os.path.expanduser("~"), ".cache", "geak",
                                                                            "service")  # fmt: skip
    path = Path(root)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise ServiceDirError(f"{path} is not private to this user (owner {info.st_uid}, mode "
                              f"{stat.S_IMODE(info.st_mode):o}): GEAK will not put its service there")  # fmt: skip
    return path


def identity(environ: dict[str, str] | None = None) -> str:
    """The build and environment a service serves: GEAK's source files (names, sizes, modification times), the Python
    that runs it, the variables a job would see, and where compilations are kept between runs."""
    from geak.evaluator import default_root, job_environment

    environ = dict(os.environ if environ is None else environ)
    digest = hashlib.sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0compile cache {default_root(environ)}\0".encode())
    for name, value in sorted(job_environment(environ).items()):
        digest.update(f"{name}={value}\0".encode())
    for folder in _source_folders():
        for path in sorted(folder.rglob("*.py")):
            info = path.stat()
            digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:12]


def _source_folders() -> list[Path]:
    import importlib

    return [Path(importlib.import_module(name).__file__).parent for name in SOURCE_PACKAGES]


def socket_path(service_identity: str) -> Path:
    return service_dir() / f"evaluator-{service_identity}.sock"


async def connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the service listening at `path`, reading lines up to ``LINE_LIMIT``."""
    return await asyncio.open_unix_connection(str(path), limit=LINE_LIMIT)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, default=str).encode() + b"\n"


async def evaluate(evaluator: Evaluator, method: str, file: str, against: str | None, progress):
    """`Evaluator.<method>` of a request ("check", "bench", or "profile", which takes no reference), in the service or
    in the command's own process."""
    if method == "profile":
        return await evaluator.profile(file, progress=progress)
    return await getattr(evaluator, method)(file, against=against, progress=progress)
