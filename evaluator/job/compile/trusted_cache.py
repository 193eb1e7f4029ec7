"""Triton's compile cache across isolated jobs, without a channel between them.

Each isolated job compiles into a private cache in its own folder (``namespaces.confine``), so no job can plant a
binary under another file's key. Compiling everything again in every job (kernels, and the C launchers and driver
helper that Triton builds with a C compiler) would more than double a warm check's time on a GPU. So the fork server
keeps a *trusted* cache per source text, filled only from jobs the trusted side marks as trusted in their `cache`
field (``protocol.cache_request``: a reference run, or a check of the user's own file): before a job starts, the
cache of the text it names is copied into its private cache; after a trusted job, what it compiled is kept under its
text's key. A candidate's compilations are never kept. A check of the user's own file also starts from the cache of
the file's previous version (an edit that leaves the kernels alone compiles nothing again: the editor's
save-to-diagnostics time).

Triton's driver helper (the C module every process that launches a kernel loads, `cuda_utils` or `hip_utils`, built by a
C compiler on its first use in a cache) is the same for every job: each job whose text had no trusted cache yet (most
jobs of a batch evaluation) would build it again. The fork server builds it once per trusted cache (``build_helpers``)
in a process confined like a job that runs Triton's own code and no user's, keeps it as the ``HELPERS`` entry, and every
job starts from it.

`@triton.autotune` choices travel the same way in check jobs (``reuse_autotuning``), which would otherwise re-tune
every key in every process (its reference run, its candidate's, each rerun), and in the screening job, whose
timings only rank. Bench jobs tune afresh, every variant alone on the
device.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...shared.protocol import cache_request

AUTOTUNE_CACHE_ENV = "TRITON_CACHE_AUTOTUNING"  # Triton >= 3.4: the autotuner keeps its choice in the compile cache
MAX_KEPT_BYTES = 512 << 20  # a trusted job that compiled more than this is not kept
JOB_CACHE = ".triton-cache"  # inside the job's scratch folder (``namespaces.confine`` points Triton there)
GROUP_PREFIX = "__grp__"  # Triton's group files: a compiled kernel's files, by absolute path
MAX_GROUP_BYTES = 1 << 20  # a larger group file is left as it is
HELPERS = "runtimehelpers"  # the entry of Triton's driver helper (no text key has this name: they are hexadecimal)


def reuse_autotuning(enabled: bool) -> None:
    """In a job process, before the file is imported (the autotuner reads it when the decorator runs): a check or
    screening job starts from the tuning a trusted job kept and keeps its own like its compilations; a bench job
    tunes afresh."""
    if enabled:
        os.environ[AUTOTUNE_CACHE_ENV] = "1"
    else:
        os.environ.pop(AUTOTUNE_CACHE_ENV, None)


def runtime_root(trusted_root: str, info: Any) -> str | None:
    """The trusted cache's folder for this zygote's device and torch/Triton versions (a cache kept between runs,
    ``compile_store``, may serve several; Triton's own keys name the architecture, not the device, and autotuning
    choices depend on it); None where it cannot be made."""
    import hashlib

    runtime = "|".join(str(getattr(info, name, "")) for name in ("backend", "device", "arch", "torch_version",
                                                                 "triton_version"))  # fmt: skip
    folder = Path(trusted_root, hashlib.sha256(runtime.encode()).hexdigest()[:16])
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return str(folder)


def seed_job(trusted_root: str, job: dict[str, Any]) -> None:
    """Copy Triton's driver helper (``build_helpers``) and the trusted caches the job names into its private cache
    (before the job starts), its group files pointing into that cache (``_relink_groups``)."""
    seed = (job.get("cache") or {}).get("seed")
    scratch = job.get("scratch")
    if not scratch:
        return
    cache = Path(os.path.realpath(scratch), JOB_CACHE)  # as the job names it (``namespaces.confine``)
    seeded = False
    keys = [seed] if isinstance(seed, str) else list(seed or ())
    for key in [HELPERS, *keys]:
        source = Path(trusted_root, _safe(str(key)))
        if source.is_dir():
            with contextlib.suppress(OSError):
                shutil.copytree(source, cache, dirs_exist_ok=True)
                os.utime(source)  # used now: the last to go when a cache kept between runs is trimmed
                seeded = True
    if seeded:
        _relink_groups(cache)


def build_helpers(trusted_root: str, build: Callable[[str], bool]) -> None:
    """Once per trusted cache, in the fork server: Triton's driver helper, built by `build(scratch)` (a process
    confined like a job, which creates Triton's driver and exits: True if it did) into `scratch`'s job cache, kept
    as the ``HELPERS`` entry. One fork server builds it while the others starting beside it wait; where it cannot be
    built, every job builds its own, as before."""
    target = Path(trusted_root, HELPERS)
    if target.is_dir():
        return
    with contextlib.suppress(OSError), open(Path(trusted_root, f".{HELPERS}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return
        scratch = tempfile.mkdtemp(prefix="helpers-", dir=os.getcwd())
        try:
            if build(scratch):
                keep_job(trusted_root, {"scratch": scratch, "cache": cache_request(seed=None, keep=HELPERS)})
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _relink_groups(cache: Path) -> None:
    """Point the copied group files at this cache. Triton finds a compiled kernel through its group file
    (``__grp__NAME.json``), which lists the kernel's files by absolute path: in a copy those paths name the job that
    compiled them, long gone, so every lookup would miss and every job compile every kernel again. A path is rewritten
    to the same entry and file name in this cache, where that file exists."""
    for group in cache.glob(f"*/{GROUP_PREFIX}*.json"):
        try:
            if group.is_symlink() or group.stat().st_size > MAX_GROUP_BYTES:
                continue
            data = json.loads(group.read_text())
            children = data.get("child_paths") if isinstance(data, dict) else None
            if not isinstance(children, dict):
                continue
            moved = {}
            for name, path in children.items():
                entry, file = Path(str(path)).parent.name, Path(str(path)).name
                here = cache / entry / file
                plain = entry not in ("", ".", "..") and file not in ("", ".", "..")
                moved[name] = str(here) if plain and here.is_file() and not here.is_symlink() else path
            if moved != children:
                group.write_text(json.dumps({**data, "child_paths": moved}))
        except (OSError, ValueError):
            continue


def keep_job(trusted_root: str, job: dict[str, Any]) -> None:
    """After a trusted job: keep the regular files of its cache under its key, added to what the key holds (a file
    kept before stays as it was). A file's bench compiles the shapes and dtypes of its benchmark that its check did
    not, which every screening job would otherwise compile again if only the check's compilations were kept. The
    merged entry is made aside and takes the key's name once
    whole (the old one moved out first), so a job seeded meanwhile gets one of them whole, or none."""
    key = (job.get("cache") or {}).get("keep")
    scratch = job.get("scratch")
    if not key or not scratch:
        return
    target = Path(trusted_root, _safe(key))
    cache = Path(scratch, JOB_CACHE)
    staging = Path(tempfile.mkdtemp(prefix=".keep-", dir=trusted_root))
    try:
        if not cache.is_dir() or (target.exists() and not _adds_to(cache, target)):
            return
        if _copy_regular_files([target, cache], staging / "entry"):
            with contextlib.suppress(FileNotFoundError):
                os.rename(target, staging / "old")
            os.rename(staging / "entry", target)
    except OSError:
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _adds_to(cache: Path, kept: Path) -> bool:
    """Does `cache` hold a regular file that `kept` lacks (by its path under each)?"""
    for folder, _dirs, files in os.walk(cache, followlinks=False):
        for name in files:
            path = Path(folder, name)
            if stat.S_ISREG(path.lstat().st_mode) and not (kept / path.relative_to(cache)).exists():
                return True
    return False


def _copy_regular_files(sources: list[Path], target: Path) -> bool:
    """Copy the plain files under each of `sources` (never following links; a file an earlier source gave is kept);
    False when there are too many bytes."""
    total = 0
    for source in sources:
        for folder, _dirs, files in os.walk(source, followlinks=False):
            for name in files:
                path = Path(folder, name)
                destination = target / path.relative_to(source)
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode) or destination.exists():
                    continue
                total += info.st_size
                if total > MAX_KEPT_BYTES:
                    return False
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, destination, follow_symlinks=False)
    return True


def _safe(key: str) -> str:
    return "".join(c for c in key if c.isalnum())[:64] or "none"
