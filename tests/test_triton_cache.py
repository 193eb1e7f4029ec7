"""The trusted compile cache of isolated jobs: seeded into each job, kept only from trusted jobs, links never kept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geak.evaluator.job.compile.trusted_cache import JOB_CACHE, keep_job, seed_job
from geak.evaluator.shared.protocol import cache_request


def job(scratch, seed=None, keep=None) -> dict:
    return {"scratch": str(scratch), "cache": cache_request(seed, keep)}


def test_a_trusted_job_is_kept_and_seeds_later_jobs_but_a_candidate_is_never_kept(tmp_path):
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    ref = tmp_path / "ref"
    (ref / JOB_CACHE / "abc").mkdir(parents=True)
    (ref / JOB_CACHE / "abc" / "kernel.cubin").write_bytes(b"compiled")
    os.symlink("/etc/passwd", ref / JOB_CACHE / "abc" / "link")
    keep_job(str(trusted), job(ref, keep="k1"))
    assert (trusted / "k1" / "abc" / "kernel.cubin").read_bytes() == b"compiled"
    assert not (trusted / "k1" / "abc" / "link").exists()  # links are never followed nor kept

    cand = tmp_path / "cand"
    cand.mkdir()
    seed_job(str(trusted), job(cand, seed="k1"))
    assert (cand / JOB_CACHE / "abc" / "kernel.cubin").read_bytes() == b"compiled"
    (cand / JOB_CACHE / "abc" / "kernel.cubin").write_bytes(b"planted")
    keep_job(str(trusted), job(cand, seed="k1", keep=None))
    assert (trusted / "k1" / "abc" / "kernel.cubin").read_bytes() == b"compiled"

    again = tmp_path / "again"  # a later trusted run under the same key adds what it compiled, changes nothing
    (again / JOB_CACHE / "abc").mkdir(parents=True)
    (again / JOB_CACHE / "abc" / "kernel.cubin").write_bytes(b"other")
    (again / JOB_CACHE / "other").write_bytes(b"x")
    keep_job(str(trusted), job(again, keep="k1"))
    assert (trusted / "k1" / "other").read_bytes() == b"x"
    assert (trusted / "k1" / "abc" / "kernel.cubin").read_bytes() == b"compiled"
    assert sorted(p.name for p in trusted.iterdir()) == ["k1"]  # no staging folder left
    before = (trusted / "k1").stat().st_ino
    keep_job(str(trusted), job(again, keep="k1"))  # nothing new: the entry is left as it is
    assert (trusted / "k1").stat().st_ino == before
    assert sorted(p.name for p in trusted.iterdir()) == ["k1"]


COMPILE_FOR_HOPPER = """
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def inc(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


source = triton.compiler.ASTSource(inc, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 16})
triton.compile(source, target=GPUTarget("cuda", 90, 32))
"""


def compile_in(scratch: Path) -> None:
    """Compile a kernel for an H100/H200 (no GPU needed) into `scratch`'s job cache, as a job would."""
    env = {**os.environ, "TRITON_CACHE_DIR": str(scratch / JOB_CACHE)}
    env.pop("TRITON_INTERPRET", None)
    script = scratch.parent / "compile_for_hopper.py"  # @triton.jit reads its function's source from a file
    script.write_text(COMPILE_FOR_HOPPER)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this Triton cannot compile for sm_90 here: {done.stderr.strip().splitlines()[-1:]}")


def test_a_kernel_a_trusted_job_compiled_is_found_by_tritons_own_lookup_in_a_later_job(tmp_path):
    """Triton finds a compiled kernel through its group file, which names the kernel's files by absolute path: a
    seeded copy must point into the new job's cache, or every job compiles every kernel again."""
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    first, later = tmp_path / "job1", tmp_path / "job2"
    compile_in(first)
    keep_job(str(trusted), job(first, keep="k"))
    shutil.rmtree(first)  # a job's folder is gone once its verdict is made
    later.mkdir()
    seed_job(str(trusted), job(later, seed="k"))
    (group,) = (later / JOB_CACHE).glob("*/__grp__inc.json")
    paths = json.loads(group.read_text())["child_paths"].values()
    assert paths and all(Path(p).is_file() and Path(p).is_relative_to(later / JOB_CACHE) for p in paths), paths
    (cubin,) = (later / JOB_CACHE).glob("*/inc.cubin")
    before = cubin.stat()
    compile_in(later)
    after = cubin.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # found, not compiled again


def test_a_group_file_naming_a_path_outside_the_cache_is_left_as_it_is(tmp_path):
    trusted = tmp_path / "trusted"
    (trusted / "k" / "entry").mkdir(parents=True)
    (trusted / "k" / "entry" / "a.cubin").write_bytes(b"1")
    (tmp_path / "secret").write_bytes(b"s")
    children = {"a.cubin": "/old/job/.triton-cache/entry/a.cubin", "s": "/x/../secret", "m": "/old/entry/missing"}
    (trusted / "k" / "entry" / "__grp__a.json").write_text(json.dumps({"child_paths": children}))
    later = tmp_path / "job"
    later.mkdir()
    seed_job(str(trusted), job(later, seed="k"))
    moved = json.loads((later / JOB_CACHE / "entry" / "__grp__a.json").read_text())["child_paths"]
    assert moved == {**children, "a.cubin": str(later.resolve() / JOB_CACHE / "entry" / "a.cubin")}


def test_keys_cannot_escape_the_trusted_folder(tmp_path):
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    src = tmp_path / "src"
    (src / JOB_CACHE).mkdir(parents=True)
    (src / JOB_CACHE / "f").write_bytes(b"1")
    keep_job(str(trusted), job(src, keep="../../escape"))
    assert [p.name for p in trusted.iterdir()] == ["escape"]


def test_a_job_can_start_from_several_trusted_caches(tmp_path):
    trusted = tmp_path / "trusted"
    for key, name in (("v1", "kernel_a"), ("v2", "kernel_b")):
        (trusted / key / name).mkdir(parents=True)
        (trusted / key / name / "k.cubin").write_bytes(key.encode())
    scratch = tmp_path / "job"
    scratch.mkdir()
    seed_job(str(trusted), job(scratch, seed=["v2", "v1", "missing"]))
    assert sorted(p.name for p in (scratch / JOB_CACHE).iterdir()) == ["kernel_a", "kernel_b"]


def test_a_users_file_starts_from_its_previous_versions_compilations_and_a_candidate_never_does(monkeypatch):
    import asyncio
    from pathlib import Path

    from geak.evaluator import check as check_stage
    from geak.evaluator.api import EvalOptions, Evaluator

    seeds: list = []
    real = check_stage.check_job

    def spy(*args, **kwargs):
        made = real(*args, **kwargs)
        seeds.append(made["cache"])
        return made

    monkeypatch.setattr(check_stage, "check_job", spy)
    fixture = Path(__file__).parent / "fixtures" / "add_tritonbench.py"
    text = fixture.read_text()

    async def go() -> None:
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=60, spares=0)) as ev:
            await ev.check(fixture, source=text)
            await ev.check(fixture, source=text + "\n# an edit outside the kernels\n")
            await ev.check(source=text + "\n# a source without a file name\n")

    asyncio.run(go())
    first, second, nameless = seeds
    assert isinstance(first["seed"], str) and first["keep"] == first["seed"]
    assert second["seed"] == [second["keep"], first["keep"]]
    assert isinstance(nameless["seed"], str)


def test_check_jobs_reuse_autotuning_and_timing_jobs_tune_afresh(monkeypatch):
    """The installed Triton's autotuner honours the switch when its decorator runs: it then keeps (and finds) its
    choice in the job's compile cache, which travels like compilations."""
    import triton
    import triton.language as tl

    from geak.evaluator.job.compile.trusted_cache import AUTOTUNE_CACHE_ENV, reuse_autotuning

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv(AUTOTUNE_CACHE_ENV, raising=False)

    def tuned():
        @triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
        @triton.jit
        def fill(out, n, BLOCK: tl.constexpr):
            tl.store(out + tl.arange(0, BLOCK), 1.0)

        return fill

    reuse_autotuning(True)
    assert os.environ[AUTOTUNE_CACHE_ENV] == "1" and tuned().cache_results
    reuse_autotuning(False)
    assert AUTOTUNE_CACHE_ENV not in os.environ and not tuned().cache_results


def test_tritons_driver_helper_is_built_once_kept_and_seeded_into_every_job(tmp_path, monkeypatch):
    """The fork server builds the driver helper in a confined process once per trusted cache; every job starts from
    it, the jobs of a new text too (no seed of their own). A build that fails keeps nothing, and the next start tries
    again."""
    from geak.evaluator.job.compile.trusted_cache import HELPERS, build_helpers

    monkeypatch.chdir(tmp_path)  # the fork server's folder, where the building process gets its scratch
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    builds: list[str] = []

    def failing(scratch: str) -> bool:
        builds.append(scratch)
        (Path(scratch) / JOB_CACHE / "KEY").mkdir(parents=True)
        return False

    def building(scratch: str) -> bool:
        builds.append(scratch)
        (Path(scratch) / JOB_CACHE / "KEY").mkdir(parents=True)
        (Path(scratch) / JOB_CACHE / "KEY" / "cuda_utils.so").write_bytes(b"helper")
        os.symlink("/etc/passwd", Path(scratch) / JOB_CACHE / "KEY" / "link")
        return True

    build_helpers(str(trusted), failing)
    assert not (trusted / HELPERS).exists() and len(builds) == 1
    build_helpers(str(trusted), building)
    build_helpers(str(trusted), building)  # kept: not built again
    assert len(builds) == 2
    assert (trusted / HELPERS / "KEY" / "cuda_utils.so").read_bytes() == b"helper"
    assert not (trusted / HELPERS / "KEY" / "link").exists()  # links are never kept
    assert not any(Path(b).exists() for b in builds)  # the building processes' folders are gone
    assert sorted(p.name for p in trusted.iterdir() if not p.name.startswith(".")) == [HELPERS]  # no staging left

    new_text, seeded = tmp_path / "new", tmp_path / "seeded"
    new_text.mkdir()
    seeded.mkdir()
    (trusted / "k1" / "abc").mkdir(parents=True)
    (trusted / "k1" / "abc" / "kernel.cubin").write_bytes(b"compiled")
    seed_job(str(trusted), job(new_text, seed=None, keep="k2"))
    seed_job(str(trusted), job(seeded, seed="k1"))
    assert (new_text / JOB_CACHE / "KEY" / "cuda_utils.so").read_bytes() == b"helper"
    assert (seeded / JOB_CACHE / "KEY" / "cuda_utils.so").read_bytes() == b"helper"
    assert (seeded / JOB_CACHE / "abc" / "kernel.cubin").read_bytes() == b"compiled"


HELPER_SEEDED = '''
import glob
import os

import torch
import triton
import triton.language as tl


@triton.jit
def inc(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def test_inc():
    helpers = glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "*", "*_utils*"))
    assert helpers, "no driver helper in this job's cache before its first launch"
    x = torch.zeros(16, device="cuda")
    inc[(1,)](x, 16, BLOCK=16)
    return x
'''


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_a_new_files_job_finds_the_driver_helper_built_before_it(tmp_path):
    """The driver helper is built by the fork server's confined process and a job of a file never seen before
    (nothing of its own to start from) finds it in its cache before its first launch."""
    import asyncio

    from geak.evaluator.api import EvalOptions, Evaluator
    from geak.evaluator.job.compile.trusted_cache import HELPERS
    from geak.evaluator.shared.isolation_policy import PROCESS_ONLY

    cache = tmp_path / "compile"
    options = EvalOptions(backend="gpu", fresh_inputs=False, measure_peaks=False, compile_cache=str(cache))

    async def scenario() -> str | None:
        async with Evaluator(options) as ev:
            isolation = (await ev.pool.runtime_info()).get("isolation")
            if isolation == PROCESS_ONLY:
                return isolation
            checked = await ev.check(source=HELPER_SEEDED)
            assert checked.ok, checked.message
        return None

    if not_isolated := asyncio.run(scenario()):
        pytest.skip(f"jobs are not isolated here ({not_isolated}): they keep no trusted cache")
    (runtime,) = [p for p in cache.iterdir() if p.is_dir()]
    assert list((runtime / HELPERS).glob("*/*_utils*"))
