"""Errors on ROCm: what Triton's AMD backend raises where a kernel does not compile (a plain RuntimeError of its
passes or linker, an AssertionError of its options) is a compile error, not a test's failed assertion nor an error a
poisoned allocation may explain; its driver's errors stay launch errors. And AMD-only launch options on the CPU
interpreter. The backend's frames are simulated by code compiled under the backend's file names."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from geak.evaluator.check import failed_by_error
from geak.evaluator.job.error_reports import compile_failure, describe_error
from geak.evaluator.pool import JobOutcome

BACKEND_SOURCE = """
def make_amdgcn(src):
    raise RuntimeError("LLVM ERROR: Cannot select: intrinsic %llvm.amdgcn.mfma.f32.32x32x8f16 (in function: matmul)")


def parse_options(opts):
    assert opts["matrix_instr_nonkdim"] in (0, 16, 32), "matrix_instr_nonkdim must be 0, 16 or 32"


def launch(grid):
    raise RuntimeError("Triton Error [HIP]: Code: 1, Messsage: invalid argument")
"""


def backend_error(tmp_path: Path, module: str, call: str) -> BaseException:
    """The error a function of Triton's AMD backend (file `module` under triton/backends/amd) raises."""
    path = tmp_path / "site-packages" / "triton" / "backends" / "amd" / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BACKEND_SOURCE)
    scope: dict = {}
    exec(compile(BACKEND_SOURCE, str(path), "exec"), scope)
    try:
        eval(call, scope)
    except Exception as e:  # the backend's error, whatever it is
        return e
    raise AssertionError("the backend raised nothing")


def test_amd_compiler_failures_are_compile_errors(tmp_path):
    llvm = backend_error(tmp_path, "compiler.py", "make_amdgcn('')")
    described = describe_error(llvm, "user.py", None)
    assert described["compile_error"] and described["type"] == "RuntimeError"
    option = describe_error(backend_error(tmp_path, "compiler.py", "parse_options({'matrix_instr_nonkdim': 8})"),
                            "user.py", None)  # fmt: skip
    assert option["compile_error"] and not option["is_assertion"]  # not a test's failed check


def test_errors_around_the_backend_keep_their_kind(tmp_path):
    launch = describe_error(backend_error(tmp_path, "driver.py", "launch(1)"), "user.py", None)
    assert not launch["compile_error"]
    try:
        assert 1 == 2, "the test's own check"
    except AssertionError as e:
        own = describe_error(e, "user.py", None)
    assert own["is_assertion"] and not own["compile_error"]
    # raised from the backend's compile error: a compile error still
    try:
        try:
            raise backend_error(tmp_path, "compiler.py", "make_amdgcn('')")
        except RuntimeError as inner:
            raise ValueError("compiling matmul failed") from inner
    except ValueError as outer:
        assert compile_failure(outer)


def test_a_test_failing_to_compile_on_amd_is_not_run_again_unpoisoned(tmp_path):
    llvm = describe_error(backend_error(tmp_path, "compiler.py", "make_amdgcn('')"), "user.py", None)
    tests = [{"kind": "error", "error": llvm}]
    assert not failed_by_error(JobOutcome("ok", {"tests": tests}))
    other = {**llvm, "compile_error": False}
    assert failed_by_error(JobOutcome("ok", {"tests": [{"kind": "error", "error": other}]}))


@pytest.mark.timeout(300)
def test_amd_only_launch_options_run_on_the_interpreter(tmp_path):
    """A launch or an autotune config with AMD's options (``waves_per_eu``, ``matrix_instr_nonkdim``, ``kpack``, as
    the ROCm suite's files pass them) runs on the CPU interpreter as the evaluator sets it up, the options ignored."""
    script = tmp_path / "amd_options.py"
    script.write_text(textwrap.dedent('''
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        from geak.evaluator.job import interpreter_shims
        interpreter_shims.install()
        import torch, triton, triton.language as tl

        @triton.jit
        def add_one(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        tuned = triton.autotune(configs=[triton.Config({"BLOCK": 16, "waves_per_eu": 2, "matrix_instr_nonkdim": 16,
                                                        "kpack": 2}, num_warps=4, num_stages=2)], key=["n"])(add_one)
        x = torch.zeros(16, device="cuda")
        add_one[(1,)](x, 16, BLOCK=16, waves_per_eu=2, matrix_instr_nonkdim=16, kpack=2, num_warps=4)
        tuned[(1,)](x, 16)
        assert x.tolist() == [2.0] * 16, x
        print("ran")
    '''))  # fmt: skip
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and done.stdout.strip() == "ran", done.stderr[-2000:]
