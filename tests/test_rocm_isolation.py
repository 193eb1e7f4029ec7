"""AMD GPUs isolated the way ROCm advises: a job's GPU pinned with ROCR_VISIBLE_DEVICES (HIP's masks count within
it), only that GPU's render node bound into the job's /dev (found through amdkfd's topology), and a ROCm installed in
a hidden folder still shown to the job's compiles. The topology is a recorded layout of an 8-GPU MI300X host."""

from __future__ import annotations

from pathlib import Path

import pytest

from geak.evaluator.isolation import default_policy
from geak.evaluator.pool import pin_device
from geak.evaluator.shared.isolation_policy import amd_render_nodes, gpu_nodes, within
from geak.evaluator.zygote import WorkerStartError


def kfd_topology(root: Path, gpus: int = 8) -> str:
    """amdkfd's nodes as an MI300X host lists them: node 0 the CPU (no SIMDs, render minor 0), then one node per GPU
    (its own render minor, in order from 128, and its unique_id)."""
    cpu = "cpu_cores_count 96\nsimd_count 0\nmem_banks_count 1\ngpu_id 0\ndrm_render_minor 0\nunique_id 0\n"
    (root / "0").mkdir(parents=True)
    (root / "0" / "properties").write_text(cpu)
    for n in range(1, gpus + 1):
        (root / str(n)).mkdir()
        props = (f"cpu_cores_count 0\nsimd_count 1216\nmem_banks_count 1\ngpu_id {20000 + n}\n"
                 f"drm_render_minor {128 + 8 * (n - 1)}\nunique_id {0x1A2B3C4D00 + n}\nlocal_mem_size 0\n")  # fmt: skip
        (root / str(n) / "properties").write_text(props)
    return str(root)


def test_a_rocm_job_is_pinned_through_rocr():
    assert pin_device({}, 3, hip=True) == {"ROCR_VISIBLE_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "0",
                                           "HIP_VISIBLE_DEVICES": "0"}  # fmt: skip
    # the caller's HIP mask counts within its ROCR mask: its GPU 1 is HIP's entry 2, ROCR's entry 2 = GPU 6
    pinned = pin_device({"ROCR_VISIBLE_DEVICES": "4,5,6,7", "HIP_VISIBLE_DEVICES": "0,2"}, 1, hip=True)
    assert pinned["ROCR_VISIBLE_DEVICES"] == "6" and pinned["HIP_VISIBLE_DEVICES"] == "0"
    assert pin_device({"ROCR_VISIBLE_DEVICES": "GPU-a1,GPU-b2"}, 1, hip=True)["ROCR_VISIBLE_DEVICES"] == "GPU-b2"
    assert pin_device({"HIP_VISIBLE_DEVICES": "1,0"}, 0, hip=True)["ROCR_VISIBLE_DEVICES"] == "1"
    with pytest.raises(WorkerStartError, match="ROCR_VISIBLE_DEVICES=4 shows 1 GPU"):
        pin_device({"ROCR_VISIBLE_DEVICES": "4", "HIP_VISIBLE_DEVICES": "0,1"}, 1, hip=True)
    # a CUDA build is pinned as before, without ROCm's mask
    assert pin_device({}, 1, hip=False) == {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"}


def test_only_the_pinned_gpus_render_node_is_bound(tmp_path):
    topology = kfd_topology(tmp_path / "nodes")
    assert amd_render_nodes("0", topology) == ["/dev/dri/renderD128"]
    assert amd_render_nodes("3,7", topology) == ["/dev/dri/renderD152", "/dev/dri/renderD184"]
    assert amd_render_nodes(f"GPU-{0x1A2B3C4D02:016x}", topology) == ["/dev/dri/renderD136"]
    assert amd_render_nodes("8", topology) is None  # no such GPU: nothing narrowed
    assert amd_render_nodes("0", str(tmp_path / "absent")) is None


def test_the_bound_nodes_leave_out_the_other_gpus(tmp_path):
    """The whole /dev/dri (every GPU's render node) gives way to the pinned GPU's node beside /dev/kfd."""
    topology = kfd_topology(tmp_path / "nodes")
    dev = tmp_path / "dev"
    (dev / "dri").mkdir(parents=True)
    (dev / "kfd").touch()
    for n in range(8):
        (dev / "dri" / f"card{n + 1}").touch()
        (dev / "dri" / f"renderD{128 + 8 * n}").touch()
    assert gpu_nodes({}, topology, str(dev)) == [str(dev / "dri"), str(dev / "kfd")]
    assert gpu_nodes({"ROCR_VISIBLE_DEVICES": "2"}, topology, str(dev)) == [str(dev / "dri" / "renderD144"),
                                                                            str(dev / "kfd")]  # fmt: skip
    # a topology that names no such GPU: every render node stays, as without a mask
    assert gpu_nodes({"ROCR_VISIBLE_DEVICES": "9"}, topology, str(dev)) == [str(dev / "dri"), str(dev / "kfd")]


def test_a_rocm_under_a_hidden_folder_stays_visible(tmp_path, monkeypatch):
    rocm = tmp_path / "home" / "me" / "rocm-6.4"
    (rocm / "lib" / "llvm" / "bin").mkdir(parents=True)
    monkeypatch.setenv("ROCM_PATH", str(rocm))
    monkeypatch.setenv("HIP_PATH", str(rocm))
    policy = default_policy(extra_hidden=[str(tmp_path / "home")])
    assert any(within(str(rocm.resolve()), hidden) for hidden in policy.hidden)
    assert str(rocm.resolve()) in policy.exposed
