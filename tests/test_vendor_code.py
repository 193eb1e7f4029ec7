"""Kernel code that names one vendor's libdevice: found in imports and attribute chains (never in comments or
strings, nor where an `if` chooses each vendor's own), and a caveat on each backend that does not compile it."""

import pytest

from geak.evaluator.vendor_code import vendor_caveats, vendor_libdevices

HIP_IMPORT = "from triton.language.extra.hip.libdevice import isinf, isnan\n"
HIP_MODULE = "from triton.language.extra.hip import libdevice\n"
CUDA_ATTRIBUTE = "import triton.language as tl\n\ndef k(x):\n    return tl.extra.cuda.libdevice.pow(x, 2.0)\n"
CUDA_IMPORT = "import triton.language.extra.cuda.libdevice as ld\n"
HIP_TRIED = (  # TritonBench-revised pow_scalar_tensor.py: the first import always works, so it always links AMD's
    "try:\n    from triton.language.extra.hip.libdevice import pow as _pow\n"
    "except ImportError:\n    from triton.language.math import pow as _pow\n"
)
CHOOSING = (
    "import torch\n"
    "if torch.version.hip:\n    from triton.language.extra.hip import libdevice\n"
    "else:\n    from triton.language.extra.cuda import libdevice\n"
    "\ndef k(x, IS_HIP):\n    if IS_HIP:\n        return tl.extra.hip.libdevice.pow(x, 2.0)\n"
    "    return tl.extra.cuda.libdevice.pow(x, 2.0)\n"
)
NEUTRAL = (
    "from triton.language.extra import libdevice\n"
    "from triton.language.extra.libdevice import tanh\n"
    "# from triton.language.extra.cuda.libdevice import isfinited\n"
    "NOTE = 'tl.extra.hip.libdevice is AMD-only'\n"
)


@pytest.mark.parametrize(
    ("code", "vendors"),
    [(HIP_IMPORT, ["hip"]), (HIP_MODULE, ["hip"]), (CUDA_ATTRIBUTE, ["cuda"]), (CUDA_IMPORT, ["cuda"]),
     (HIP_TRIED, ["hip"]), (NEUTRAL, []), (CHOOSING, []), (HIP_IMPORT + CUDA_ATTRIBUTE, ["hip", "cuda"]),
     ("def broken(:\n", [])],
)  # fmt: skip
def test_the_vendor_modules_named_in_code(code, vendors):
    assert [v.submodule for v in vendor_libdevices(code)] == vendors


def test_a_caveat_on_each_backend_that_does_not_compile_the_module():
    (on_cpu,) = vendor_caveats(HIP_IMPORT, "interpreter")
    assert "AMD's libdevice" in on_cpu and "only for ROCm GPUs" in on_cpu
    assert "triton.language.extra.libdevice takes" in on_cpu
    assert vendor_caveats(HIP_IMPORT, "cuda") == (on_cpu,)
    assert vendor_caveats(HIP_IMPORT, "rocm") == ()
    assert vendor_caveats(CUDA_ATTRIBUTE, "cuda") == ()
    assert "NVIDIA's libdevice" in vendor_caveats(CUDA_ATTRIBUTE, "rocm")[0]
    assert vendor_caveats(NEUTRAL, "interpreter") == ()


def test_a_deep_expression_that_parses_is_walked_without_recursion():
    deep = "x = " + "+".join(["a"] * 2500) + "\n"  # parses; a recursive walk of it exceeds Python's limit
    assert vendor_libdevices(HIP_IMPORT + deep) and vendor_caveats(deep, "interpreter") == ()
