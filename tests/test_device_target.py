"""What the launch-configuration search knows of a device, read from the runtime's facts (simulated: the backend, arch
and properties a CUDA or a HIP build of torch reports) or from a backend's name alone."""

import pytest

from geak.agent.tuning.device_target import DeviceTarget


@pytest.mark.parametrize(
    ("facts", "warp", "lds", "buffers_at_2_3"),
    [
        ({"backend": "rocm", "arch": "gfx90a:sramecc+:xnack-"}, 64, 64 * 1024, (1, 2)),  # MI250X
        ({"backend": "rocm", "arch": "gfx942:sramecc+:xnack-"}, 64, 64 * 1024, (1, 2)),  # MI300X
        ({"backend": "rocm", "arch": "gfx950"}, 64, 160 * 1024, (2, 3)),  # MI355X: asynchronous copies, one more
        ({"backend": "rocm", "arch": "gfx1100"}, 32, 64 * 1024, (1, 2)),  # RDNA3: 32-lane waves
        ({"backend": "hip"}, 64, 64 * 1024, (1, 2)),  # Triton's name; an unknown arch is taken as CDNA
        ({"backend": "cuda", "arch": "sm_90"}, 32, 227 * 1024, (2, 3)),
        ({"backend": "interpreter", "arch": None}, 32, 227 * 1024, (2, 3)),  # it presents itself as an H100
    ],
)
def test_the_device_facts_the_search_needs_follow_the_backend_and_arch(facts, warp, lds, buffers_at_2_3):
    device = DeviceTarget.of(facts)
    assert (device.warp_size, device.shared_memory) == (warp, lds)
    assert (device.shared_buffers(2), device.shared_buffers(3)) == buffers_at_2_3
    assert device.shared_buffers(1) == (2 if device.arch == "gfx950" else 1)


def test_what_the_runtime_reports_outranks_what_the_arch_implies():
    reported = DeviceTarget.of(
        {"backend": "rocm", "arch": "gfx942", "warp_size": 64, "shared_memory_per_block_optin": 160 * 1024}
    )
    assert reported.shared_memory == 160 * 1024
    assert DeviceTarget.of({"backend": "cuda", "shared_memory_per_block_optin": 101376}).shared_memory == 101376
    assert DeviceTarget.of({"backend": "rocm", "warp_size": 0}).warp_size == 64  # not a lane count: the arch's


def test_triton_defaults_and_rocm_option_values_per_device():
    mi300x, mi355x, rdna, nvidia = (DeviceTarget.of(f) for f in (
        {"backend": "rocm", "arch": "gfx942"}, {"backend": "rocm", "arch": "gfx950"},
        {"backend": "rocm", "arch": "gfx1201"}, "cuda"))  # fmt: skip
    assert (mi300x.option_default("num_stages"), nvidia.option_default("num_stages")) == (2, 3)
    assert mi300x.option_default("num_warps") == nvidia.option_default("num_warps") == 4
    assert mi300x.tuned_rocm_options == ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
    assert (mi300x.rocm_choices("kpack"), mi300x.rocm_choices("matrix_instr_nonkdim")) == ((1, 2), (0, 16, 32))
    assert mi300x.rocm_choices("waves_per_eu") == (0, 1, 2, 3, 4)
    assert mi355x.tuned_rocm_options == ("waves_per_eu", "matrix_instr_nonkdim")  # gfx950 overwrites kpack with 1
    assert rdna.tuned_rocm_options == ("waves_per_eu",)  # no MFMA: its dots use WMMA
    assert nvidia.tuned_rocm_options == () and DeviceTarget.of(None) == DeviceTarget()
