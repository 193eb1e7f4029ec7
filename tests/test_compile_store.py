"""Trusted compilations kept between runs: where (`GEAK_COMPILE_CACHE`, the user's cache), one folder per device and
torch/Triton versions, hidden from jobs, kept when the pool closes, trimmed least recently used first."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

from geak.evaluator.compile_store import CACHE_ENV, TRIMMED, default_root, prepare, trim
from geak.evaluator.job.compile.trusted_cache import JOB_CACHE, keep_job, runtime_root, seed_job
from geak.evaluator.options import EvalOptions
from geak.evaluator.pool import WorkerPool
from geak.evaluator.shared.protocol import cache_request


def test_the_cache_folder_is_the_users_unless_told_or_turned_off(monkeypatch, tmp_path):
    home = str(tmp_path / "home")
    assert default_root({CACHE_ENV: "off"}) is None
    assert default_root({CACHE_ENV: str(tmp_path / "c")}) == str(tmp_path / "c")
    assert default_root({"XDG_CACHE_HOME": "/x/cache"}) == "/x/cache/geak/compile"
    monkeypatch.setenv("HOME", home)
    assert default_root({}) == os.path.join(home, ".cache", "geak", "compile")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "kept"))
    assert EvalOptions().compile_cache == str(tmp_path / "kept")


def test_each_runtime_has_its_own_folder(tmp_path):
    h200 = SimpleNamespace(backend="cuda", device="NVIDIA H200", arch="sm_90", torch_version="2.11",
                           triton_version="3.6")
    h100 = SimpleNamespace(**{**h200.__dict__, "device": "NVIDIA H100 80GB HBM3"})  # same architecture, other tuning
    newer = SimpleNamespace(**{**h200.__dict__, "triton_version": "3.7"})
    folders = {runtime_root(str(tmp_path), info) for info in (h200, h100, newer, h200)}
    assert len(folders) == 3 and all(os.path.isdir(f) and os.path.dirname(f) == str(tmp_path) for f in folders)


def test_a_kept_compilation_serves_a_later_run_and_marks_its_use(tmp_path):
    root = runtime_root(str(tmp_path), SimpleNamespace(backend="cuda", device="d"))
    ref = tmp_path / "ref"
    (ref / JOB_CACHE).mkdir(parents=True)
    (ref / JOB_CACHE / "kernel.cubin").write_bytes(b"compiled")
    keep_job(root, {"scratch": str(ref), "cache": cache_request(None, "key1")})
    kept = os.path.join(root, "key1")
    os.utime(kept, (1, 1))
    later = tmp_path / "later"  # a job of a later run (another pool) on the same runtime
    later.mkdir()
    seed_job(root, {"scratch": str(later), "cache": cache_request("key1", None)})
    assert (later / JOB_CACHE / "kernel.cubin").read_bytes() == b"compiled"
    assert os.stat(kept).st_mtime > 1  # used now: trimmed last


def test_the_cache_is_trimmed_least_recently_used_first_and_at_most_once_a_day(tmp_path):
    root = tmp_path / "kept"
    for runtime, key, size, used in (("r1", "old", 400, 100), ("r1", "new", 400, 300), ("r2", "mid", 400, 200),
                                     ("r2", ".trash-gone", 10, 400)):  # fmt: skip
        entry = root / runtime / key
        entry.mkdir(parents=True)
        (entry / "blob").write_bytes(b"x" * size)
        os.utime(entry, (used, used))
    trim(str(root), max_bytes=900)  # a half-removed entry goes first, then the least recently used
    assert sorted(p.name for p in root.glob("*/*")) == ["mid", "new"] and not list(root.glob("*/.trash-*"))
    prepare(str(root), max_bytes=500)
    assert [p.name for p in root.glob("*/*")] == ["new"] and (root / TRIMMED).is_file()
    (root / "r1" / "later").mkdir()
    (root / "r1" / "later" / "blob").write_bytes(b"x" * 400)
    prepare(str(root), max_bytes=500)  # trimmed less than a day ago: not walked again
    assert sorted(p.name for p in root.glob("*/*")) == ["later", "new"]
    assert not os.stat(root).st_mode & 0o022


def test_a_kept_cache_is_hidden_from_jobs_and_outlives_its_pool(tmp_path):
    kept = str(tmp_path / "kept")
    pool = WorkerPool(backend="interpreter", compile_cache=kept)
    assert pool.hide[-1] == kept and os.path.isdir(kept)
    asyncio.run(pool.aclose())
    assert os.path.isdir(kept)
    own = WorkerPool(backend="interpreter")  # a cache of the pool's own goes with it
    folder = own._triton_cache
    asyncio.run(own.aclose())
    assert not os.path.exists(folder)


def test_a_cache_folder_others_may_write_to_is_not_used(tmp_path, caplog):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    pool = WorkerPool(backend="interpreter", compile_cache=str(shared))
    try:
        assert pool._triton_cache != str(shared) and str(shared) not in pool.hide
        assert "not only its owner's to write" in caplog.text
    finally:
        asyncio.run(pool.aclose())
    assert shared.is_dir() and not os.path.exists(pool._triton_cache)  # the pool's own went with it
