"""Triton's CPU interpreter: GPU-written code runs unchanged (each mapping of `interpreter_shims`), and what the
interpreter cannot run is "not checkable on CPU" (`cpu_support`), never a kernel failure; real suite files too."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from geak.evaluator import cpu_support
from geak.evaluator.api import EvalOptions, Evaluator
from geak.evaluator.job.interpreter_libdevice import libdevice_function
from geak.evaluator.results import CheckResult

FIXTURES = Path(__file__).parent / "fixtures"
INTERP = FIXTURES / "interp"
SUITES = Path(os.environ.get("GEAK_SUITES", Path(__file__).resolve().parents[2] / "shared" / "suites"))
TRITONBENCH = SUITES / "tritonbench_revised" / "TritonBench_G_v1"

# (file, against) -> verdict; one Evaluator (two warm workers) for the module
CASES = {
    "torch_cuda": (INTERP / "torch_cuda.py", None),
    "driver": (INTERP / "driver.py", None),
    "libdevice": (INTERP / "libdevice.py", None),
    "boolean_ops": (INTERP / "boolean_ops.py", None),
    "arguments": (INTERP / "arguments.py", None),
    "bfloat16": (INTERP / "bfloat16.py", None),
    "bf16_atomic": (INTERP / "bf16_atomic.py", None),
    "block_ptr": (INTERP / "block_ptr.py", None),
    "block_ptr_against_itself": (INTERP / "block_ptr.py", INTERP / "block_ptr.py"),
    "inline_asm": (INTERP / "inline_asm.py", None),
    "inline_asm_against_itself": (INTERP / "inline_asm.py", INTERP / "inline_asm.py"),
    "spin_wait": (INTERP / "spin_wait.py", None),
    "slow": (INTERP / "slow.py", None),
    "hang": (FIXTURES / "hang.py", None),
    "hang_against_a_fast_reference": (FIXTURES / "hang.py", FIXTURES / "add_native.py"),
}
TIMEOUT_S = 6


@pytest.fixture(scope="module")
def verdicts() -> dict[str, CheckResult]:
    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=TIMEOUT_S, spares=0, max_concurrent=2)) as ev:
            found = await asyncio.gather(*(ev.check(file, against=against) for file, against in CASES.values()))
            return dict(zip(CASES, found, strict=True))

    return asyncio.run(go())


def _passes(r: CheckResult) -> None:
    assert r.ok and r.stage == "exec" and r.not_checkable is None, r.message


def _not_checkable(r: CheckResult, *fragments: str) -> None:
    assert not r.ok and r.not_checkable is not None, r.message
    assert r.message.startswith("not checkable on CPU: ")
    assert all(f in r.not_checkable for f in fragments), r.not_checkable
    assert r.diagnostics and all(d.severity == "information" for d in r.diagnostics)


def test_torch_cuda_device_queries_and_guards_run_on_cpu(verdicts):
    """torch.cuda.device(index / device / None), _DeviceGuard, set_device, current_device, device properties,
    capability, is_available, streams, and a tensor on `cuda:0` to the file's code (is_cuda, str(x.device),
    device.type, get_device()): the file's own asserts check the answers."""
    _passes(verdicts["torch_cuda"])


def test_triton_driver_autotune_and_string_constexpr_annotations(verdicts):
    """driver.active at import and at run time, @triton.autotune, `BLOCK: "tl.constexpr"`, a grid given as a list."""
    _passes(verdicts["driver"])


def test_vendor_libdevice_math_is_computed(verdicts):
    """tl.extra.cuda/hip.libdevice, `from triton.language.extra.libdevice import tanh` and `from
    triton.language.extra.hip.libdevice import isinf` (CUDA's module has one too), against torch. The pass says
    that each vendor's module compiles only for its own GPUs."""
    _passes(verdicts["libdevice"])
    vendors = [c for c in verdicts["libdevice"].caveats if "libdevice (triton.language.extra." in c]
    assert len(vendors) == 2 and "AMD's" in vendors[0] and "NVIDIA's" in vendors[1], vendors


def test_and_or_between_tensors_are_elementwise_as_in_the_compiler(verdicts):
    """Also `cond[:, None]` on a scalar condition, which Triton up to 3.6 accepts."""
    _passes(verdicts["boolean_ops"])
    assert len(verdicts["boolean_ops"].tests) == 2


def test_float_and_storageless_pointer_arguments_are_read_as_on_a_gpu(verdicts):
    """A Python float is an fp32 scalar in the kernel; an object with data_ptr() and dtype is a pointer."""
    _passes(verdicts["arguments"])
    assert len(verdicts["arguments"].tests) == 2


def test_bf16_arithmetic_is_on_values_rounded_as_on_a_gpu(verdicts):
    """+ - * /, max, comparisons, negation, reductions, tl.dot and casts of bf16 values give torch's bf16 results
    exactly (the interpreter alone computes on their bit patterns and truncates casts)."""
    _passes(verdicts["bfloat16"])
    assert len(verdicts["bfloat16"].tests) == 3


def test_block_pointers_run_as_on_a_gpu(verdicts):
    """make_block_ptr / advance / ptr.advance, loads with boundary_check and padding "zero" / "nan" / none, stores
    with boundary_check, order=(0, 1), a K-loop tl.dot, on odd shapes: each test compares with torch (on a Triton
    whose interpreter dropped block pointers, through GEAK's emulation)."""
    for name in ("block_ptr", "block_ptr_against_itself"):
        _passes(verdicts[name])
        assert [t.name for t in verdicts[name].tests if t.ok] == [
            "test_tile_copy_pads_zero_and_nan_on_odd_shapes",
            "test_store_with_boundary_check_leaves_the_rest_untouched",
            "test_k_loop_matmul_with_advance",
            "test_transposed_block_pointer",
            "test_nan_padding_of_integers_is_refused_as_by_the_compiler",
        ]
    assert verdicts["block_ptr_against_itself"].comparison.compared_outputs


def test_a_reference_the_interpreter_cannot_run_makes_the_comparison_not_checkable(verdicts):
    r = verdicts["inline_asm_against_itself"]
    _not_checkable(r, "inline assembly")
    assert "in the reference inline_asm.py" in r.message


def test_bf16_atomics_are_not_checkable(verdicts):
    _not_checkable(verdicts["bf16_atomic"], "atomic operation on bf16 values")


def test_inline_assembly_is_not_checkable(verdicts):
    _not_checkable(verdicts["inline_asm"], "inline assembly")


def test_programs_waiting_for_each_other_are_not_checkable(verdicts):
    _not_checkable(verdicts["spin_wait"], "handoff_kernel", "spin-wait at line 12")


def test_too_slow_is_not_checkable_but_a_hang_is_a_failure(verdicts):
    _not_checkable(verdicts["slow"], "too slow under the interpreter", f"after {TIMEOUT_S} s", "programs interpreted")
    for name in ("hang", "hang_against_a_fast_reference"):
        r = verdicts[name]
        assert not r.ok and r.not_checkable is None and r.tests[0].kind == "timeout", r.message
        assert r.diagnostics[0].severity == "error"


# ----------------------------------------------------------------------------------------- units


def test_interpreter_errors_are_recognized():
    reason = cpu_support.limit_in_error(
        "InterpreterError: NotImplementedError('Block pointers have been removed in favor of the tensor "
        "descriptor API')",
        "3.9.0",
    )
    assert reason and "Triton 3.9.0" in reason
    assert cpu_support.limit_in_error("AssertionError: Torch not compiled with CUDA enabled")
    assert cpu_support.limit_in_error("ValueError: shapes differ") is None


def test_an_interpreted_crash_is_explained_as_an_out_of_bounds_access():
    assert "out-of-bounds memory access" in cpu_support.crash_hint("the worker process crashed (SIGSEGV) in test_x")
    assert cpu_support.crash_hint("timed out after 5 s") == "timed out after 5 s"


def test_spin_wait_detection_is_static_and_kernel_only():
    kernel = "@triton.jit\ndef k(lock):\n    while tl.atomic_cas(lock, 1, 1) != 1:\n        pass\n"
    assert "spin-wait at line 3" in cpu_support.spin_wait(kernel)
    volatile = "@triton.jit\ndef k(p):\n    while tl.load(p, volatile=True) == 0:\n        pass\n"
    assert cpu_support.spin_wait(volatile)
    host = "def wait(lock):\n    while tl.atomic_cas(lock, 1, 1) != 1:\n        pass\n"
    assert cpu_support.spin_wait(host) is None
    counting = "@triton.jit\ndef k(p, n):\n    i = 0\n    while i < n:\n        tl.atomic_add(p, 1)\n        i += 1\n"
    assert cpu_support.spin_wait(counting) is None


def test_slow_means_new_programs_until_the_kill():
    beat = {"test": "test_x", "programs": 1200, "at": 100.0}
    assert "1,200 kernel programs" in cpu_support.slow_or_hung(beat, 102.0, 60)
    assert cpu_support.slow_or_hung(beat, 100.0 + cpu_support.STALLED_AFTER_S + 1, 60) is None
    assert cpu_support.slow_or_hung({"test": "test_x"}, 100.0, 60) is None
    assert cpu_support.slow_or_hung(None, 100.0, 60) is None


@pytest.mark.parametrize(
    ("symbol", "numpy_name"),
    [("__nv_powf", "power"), ("__ocml_pow_f32", "power"), ("__nv_isfinited", "isfinite"), ("__nv_erf", "_np_erf"),
     ("__triton_hip_llrint", "rint"), ("__nv_fast_tanhf", "tanh"), ("__nv_fadd_rn", "add")],
)  # fmt: skip
def test_libdevice_symbols_map_to_numpy(symbol, numpy_name):
    assert libdevice_function(symbol).__name__ == numpy_name


def test_unknown_or_non_default_rounding_libdevice_symbols_are_not_mapped():
    assert libdevice_function("__nv_fadd_rz") is None
    assert libdevice_function("__nv_byte_perm") is None


# ----------------------------------------------------------------------------------------- real suite files

SUITE_CASES = {
    "add_example.py": "pass",  # BLOCK_SIZE: "tl.constexpr"
    "l2_norm_triton1.py": "pass",  # with torch.cuda.device(x.device.index)
    "geglu_tanh_triton.py": "pass",  # from triton.language.extra.libdevice import tanh
    "mean_reduction.py": "pass",  # with torch.cuda.device(x.device); mask = row_mask and col_mask
    "int_scaled_matmul.py": "pass",  # tl.make_block_ptr, tl.advance, boundary_check, tl.dot
    "relu_strided_buffer.py": "pass",  # block pointers; a kernel argument with data_ptr() but no torch storage
}


@pytest.mark.skipif(not TRITONBENCH.is_dir(), reason=f"the benchmark suites are not at {SUITES} (set GEAK_SUITES)")
def test_real_tritonbench_files():
    async def go():
        async with Evaluator(EvalOptions(backend="interpreter", timeout_s=120, spares=0)) as ev:
            return {name: await ev.check(TRITONBENCH / name, against=TRITONBENCH / name) for name in SUITE_CASES}

    for name, r in asyncio.run(go()).items():
        expected = SUITE_CASES[name]
        if expected == "pass":
            assert r.ok and r.comparison is not None and r.comparison.compared_outputs, f"{name}: {r.message}"
        else:
            assert r.not_checkable and expected in r.not_checkable, f"{name}: {r.message}"
