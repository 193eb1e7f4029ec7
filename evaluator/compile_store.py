"""Where the trusted compile cache of isolated jobs lives between runs (``job/compile/trusted_cache.py`` fills and
reads it).

A check's cost is mostly its reference's first run: every kernel compiled cold and every autotuned kernel tuned
(its candidate's check, which starts from the reference's compilations, costs a small part of that). Kept in a
folder of the user's cache instead of one thrown away with the worker pool, those compilations serve every later
run: a second `geak eval` of other predictions of the same suite, a suite checked
again, the editor after a restart. What is kept is what it always was: only trusted jobs' compilations (a reference
run, a check of the user's own file; never a candidate's), under the key of their source text, in a subfolder per
device and torch/Triton versions (``trusted_cache.runtime_root``). Job processes never see it (the pool hides it from
them as it hides the temporary directory); the least recently used entries go when it grows past its limit.

`GEAK_COMPILE_CACHE`: a folder to use instead of ``~/.cache/geak/compile`` (or `$XDG_CACHE_HOME/geak/compile`), or
"off" for a cache that lasts only as long as its worker pool.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

CACHE_ENV = "GEAK_COMPILE_CACHE"
MAX_BYTES = 4 << 30  # the cache's limit on disk: past it, the least recently used entries are removed
TRIM_EVERY_S = 24 * 3600  # a trim walks every file of the cache: at most once a day (a stamp file says when)
TRIMMED = ".trimmed"
TRASH = ".trash-"  # an entry being removed


def default_root(environ: dict[str, str] | None = None) -> str | None:
    """The cache folder `GEAK_COMPILE_CACHE` names, else the user's cache's; None where it is "off"."""
    environ = dict(os.environ) if environ is None else environ
    value = environ.get(CACHE_ENV, "").strip()
    if value.lower() in ("off", "0", "none", "false"):
        return None
    if value:
        return os.path.abspath(os.path.expanduser(value))
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "geak", "compile")


class UnsafeCache(RuntimeError):
    """A cache folder that someone else could write to (compiled code planted there would run as a reference's)."""


def prepare(root: str, max_bytes: int = MAX_BYTES) -> None:
    """Make the cache folder (its owner's only) and, at most once a day, bring it under `max_bytes` (``trim``).
    Raises UnsafeCache for a folder that is not the user's own or that others may write to, and OSError for one that
    cannot be made."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    info = os.stat(root)
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise UnsafeCache(f"{root} is not only its owner's to write (owner uid {info.st_uid}, mode "
                          f"{oct(info.st_mode & 0o777)}): compilations are not kept there")  # fmt: skip
    stamp = Path(root, TRIMMED)
    with contextlib.suppress(OSError):
        if time.time() - stamp.stat().st_mtime < TRIM_EVERY_S:
            return
    stamp.touch()
    trim(root, max_bytes)


def trim(root: str, max_bytes: int) -> None:
    """Drop the entries (one source text's compilations on one runtime) used least recently first until the cache
    holds at most `max_bytes`. An entry is first renamed out of its key, so a job seeded meanwhile gets all of it
    or none; what a killed trim left half removed goes first the next time."""
    entries = []
    for runtime in _folders(Path(root)):
        for entry in _folders(runtime):
            with contextlib.suppress(OSError):
                entries.append((0.0 if entry.name.startswith(TRASH) else entry.stat().st_mtime, _size(entry), entry))
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= max_bytes:
            break
        trash = entry if entry.name.startswith(TRASH) else entry.with_name(f"{TRASH}{entry.name}")
        with contextlib.suppress(OSError):
            os.rename(entry, trash)
        shutil.rmtree(trash, ignore_errors=True)
        total -= size


def _folders(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def _size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_size
    return total
