"""scripts/setup.sh's choice of torch build for a CUDA, a ROCm and a CPU machine (its `--plan`, with the probes
faked: a PATH of fake `nvidia-smi`/`rocminfo`/`rocm-smi`/`hipconfig` beside only the tools the script needs, a
folder of fake device nodes, a fake ROCm install), and the backend line it ends with (scripts/torch_backend.py, on
torch-like namespaces). Nothing is installed."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
PIP = ".venv/bin/python -m pip install -q"
TORCH = re.search(r"^TORCH_VERSION=\$\{GEAK_TORCH_VERSION:-(.+)\}$", (SCRIPTS / "setup.sh").read_text(), re.M)[1]
DEFAULT_ROCM = re.search(r"^DEFAULT_ROCM=(.+)$", (SCRIPTS / "torch_choice.sh").read_text(), re.M)[1]
TOOLS = ("bash", "dirname", "sed", "grep", "head")  # what the plan runs besides the probes

# In the layouts the tools print (a CPU agent before the GPU in rocminfo; nvidia-smi without a driver exits 9).
NVIDIA_SMI_L = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-6b1c0e8a-2f4d-4c3e-9a51-0d7e2f1c3b4a)"
NVIDIA_SMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running."
)
ROCMINFO = """ROCk module is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.14
==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Vendor Name:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Marketing Name:          AMD Instinct MI300X
  Vendor Name:             AMD
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
"""
ROCM_SMI_PRODUCT = """============================ ROCm System Management Interface ============================
====================================== Product Info ======================================
GPU[0]\t\t: Card Series: \t\tAMD Instinct MI300X OAM
==========================================================================================
"""


class Machine:
    """A copy of the set-up scripts with the lock and pyproject (so no .venv is beside them), and the probes a test
    gives it: fake tools on a PATH of their own, device nodes in a folder, a ROCm install."""

    def __init__(self, root: Path) -> None:
        self.repo = root / "geak"
        (self.repo / "scripts").mkdir(parents=True)
        for name in ("setup.sh", "torch_choice.sh"):
            shutil.copy(SCRIPTS / name, self.repo / "scripts" / name)
        for name in ("constraints.txt", "pyproject.toml"):
            shutil.copy(ROOT / name, self.repo / name)
        self.bin = root / "bin"
        self.bin.mkdir()
        for tool in TOOLS:
            (self.bin / tool).symlink_to(shutil.which(tool))
        self.dev = root / "dev"
        self.dev.mkdir()
        self.rocm = root / "rocm"
        self.env = {"PATH": str(self.bin), "GEAK_DEV_DIR": str(self.dev), "ROCM_PATH": str(self.rocm)}

    def tool(self, name: str, output: str, status: int = 0, later: str = "") -> None:
        """A fake `name` that prints `output` and exits with `status`, whatever its arguments; `later`: more output
        after a pause (as a tool's output comes while it asks each GPU)."""
        lines = "".join(f"printf '%s\\n' '{line}'\n" for line in output.splitlines())
        if later:
            (self.bin / "sleep").symlink_to(shutil.which("sleep"))
            lines += f"sleep 0.5\nprintf '%s\\n' '{later}'\n"
        script = self.bin / name
        script.write_text(f"#!/bin/sh\n{lines}exit {status}\n")
        script.chmod(0o755)

    def device(self, name: str) -> None:
        (self.dev / name).touch()

    def rocm_version(self, text: str) -> None:
        (self.rocm / ".info").mkdir(parents=True)
        (self.rocm / ".info" / "version").write_text(text + "\n")

    def plan(self, *args: str, **env: str) -> list[str]:
        result = self.run("--plan", *args, **env)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        return result.stdout.splitlines()

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "bash"), str(self.repo / "scripts" / "setup.sh"), *args],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def torch_command(index: str | None) -> str:
    return f"{PIP} -c constraints.txt torch=={TORCH}" + (f" --index-url {index}" if index else "")


def geak_command(extras: str) -> str:
    return f'{PIP} -c .venv/constraints.txt -e ".[{extras}]"'


def test_an_nvidia_gpu_gets_pypis_torch_which_brings_its_triton(machine: Machine) -> None:
    machine.tool("nvidia-smi", NVIDIA_SMI_L)
    assert machine.plan() == [
        "setup: an NVIDIA GPU (nvidia-smi: NVIDIA H100 80GB HBM3)",
        torch_command(None),
        geak_command("test,repos"),
    ]


def test_an_nvidia_device_node_counts_where_nvidia_smi_is_missing(machine: Machine) -> None:
    machine.device("nvidia0")
    assert machine.plan()[:2] == [f"setup: an NVIDIA GPU ({machine.dev}/nvidia0)", torch_command(None)]


def test_an_amd_gpu_gets_the_rocm_index_of_the_installed_rocm_and_no_pypi_triton(machine: Machine) -> None:
    machine.tool("rocminfo", ROCMINFO)
    machine.device("kfd")
    machine.rocm_version("6.4.1-120")
    assert machine.plan() == [
        "setup: an AMD GPU (rocminfo: gfx942), ROCm 6.4",
        torch_command("https://download.pytorch.org/whl/rocm6.4"),
        geak_command("test,repos"),
    ]


def test_an_amd_gpu_seen_by_its_kfd_node_with_the_version_from_hipconfig(machine: Machine) -> None:
    machine.device("kfd")
    machine.tool("hipconfig", "6.3.42131-fa1d09cbd")
    assert machine.plan()[:2] == [
        f"setup: an AMD GPU ({machine.dev}/kfd), ROCm 6.3",
        torch_command("https://download.pytorch.org/whl/rocm6.3"),
    ]


def test_an_amd_gpu_seen_by_rocm_smi_without_a_rocm_version_gets_the_default_index(machine: Machine) -> None:
    machine.tool("rocm-smi", ROCM_SMI_PRODUCT, later="GPU[1]\t\t: Card Series: \t\tAMD Instinct MI300X OAM")
    first, torch, _ = machine.plan()
    assert first.startswith("setup: an AMD GPU (rocm-smi), no ROCm version found")
    assert first.endswith(f"ROCm {DEFAULT_ROCM} assumed")
    assert torch == torch_command(f"https://download.pytorch.org/whl/rocm{DEFAULT_ROCM}")


def test_no_gpu_gets_the_cpu_wheel_and_geaks_triton_extra(machine: Machine) -> None:
    machine.tool("nvidia-smi", NVIDIA_SMI_NO_DRIVER, status=9)  # installed, but no driver answers: not a GPU
    machine.tool("rocminfo", "ROCk module is NOT loaded, possibly no GPU devices", status=1)
    machine.rocm_version("6.4.1-120")  # an installed ROCm is no AMD GPU
    lines = machine.plan()
    assert lines[0].startswith("setup: no GPU (")
    assert lines[1:] == [torch_command("https://download.pytorch.org/whl/cpu"), geak_command("test,repos,triton")]


def test_geak_torch_index_url_overrides_the_index_and_empty_leaves_it_to_pip(machine: Machine) -> None:
    machine.device("kfd")
    machine.rocm_version("6.4.1-120")
    mirror = "https://mirror.example/whl/rocm6.4"
    assert machine.plan(GEAK_TORCH_INDEX_URL=mirror)[1] == torch_command(mirror)
    assert machine.plan(GEAK_TORCH_INDEX_URL="")[1] == torch_command(None)
    assert machine.plan(GEAK_TORCH_VERSION="2.9.1")[1] == torch_command(
        "https://download.pytorch.org/whl/rocm6.4"
    ).replace(TORCH, "2.9.1")


def test_an_existing_torch_is_kept_whatever_the_machine(machine: Machine) -> None:
    python = machine.repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # this environment's, with its torch and triton
    python.chmod(0o755)
    machine.device("kfd")
    from importlib.metadata import version

    assert machine.plan()[1:] == [f"setup: keeps the torch in .venv ({version('torch')})", geak_command("test,repos")]


def test_an_unknown_argument_is_refused_with_the_usage(machine: Machine) -> None:
    result = machine.run("--install-everything")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: bash scripts/setup.sh [--plan]")


@pytest.mark.parametrize("script", ["setup.sh", "torch_choice.sh"])
def test_the_scripts_parse(script: str) -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True).returncode == 0


# scripts/torch_backend.py: the line setup ends with, from torch-like namespaces.


def load_backend():
    spec = importlib.util.spec_from_file_location("torch_backend", SCRIPTS / "torch_backend.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


backend = load_backend()


def fake_torch(version: str, *, hip: str | None = None, cuda: str | None = None, gpus: list | None = None):
    gpus = gpus or []
    return SimpleNamespace(
        __version__=version,
        version=SimpleNamespace(hip=hip, cuda=cuda),
        cuda=SimpleNamespace(
            is_available=lambda: bool(gpus),
            device_count=lambda: len(gpus),
            get_device_properties=lambda index: gpus[index],
        ),
    )


MI300X = SimpleNamespace(name="AMD Instinct MI300X", gcnArchName="gfx942:sramecc+:xnack-", major=9, minor=4)
H100 = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0)
ROCM_TORCH = fake_torch("2.13.0+rocm6.4", hip="6.4.43482-0f2d60242", gpus=[MI300X] * 8)
CUDA_TORCH = fake_torch("2.13.0", cuda="12.8", gpus=[H100])
CPU_TORCH = fake_torch("2.13.0+cpu")


def test_the_backend_line_names_rocm_the_gfx_target_and_torchs_own_triton() -> None:
    line = backend.describe(ROCM_TORCH, {"pytorch-triton-rocm": "3.5.0"})
    assert line == (
        "torch 2.13.0+rocm6.4 (ROCm 6.4), AMD Instinct MI300X (gfx942) × 8; Triton 3.5.0 (pytorch-triton-rocm)"
    )
    assert backend.warnings_for(ROCM_TORCH, "rocm", {"pytorch-triton-rocm": "3.5.0"}) == []


def test_the_backend_line_names_cuda_and_the_sm_architecture() -> None:
    assert backend.describe(CUDA_TORCH, {"triton": "3.7.1"}) == (
        "torch 2.13.0 (CUDA 12.8), NVIDIA H100 80GB HBM3 (sm_90); Triton 3.7.1 (triton)"
    )


def test_the_backend_line_says_the_interpreter_runs_kernels_without_a_gpu() -> None:
    assert backend.describe(CPU_TORCH, {"triton": "3.9.0"}) == (
        "torch 2.13.0+cpu, CPU only: kernels run in Triton's interpreter (correctness only); Triton 3.9.0 (triton)"
    )
    unseen = fake_torch("2.13.0", cuda="12.8")
    assert backend.describe(unseen, {}) == (
        "torch 2.13.0 (CUDA 12.8), but it sees no GPU: kernels run in Triton's interpreter (correctness only); "
        "no Triton installed"
    )


def test_a_kept_torch_built_for_another_gpu_is_named_with_the_way_out() -> None:
    (warning,) = backend.warnings_for(CUDA_TORCH, "rocm", {"triton": "3.7.1"})
    assert warning.startswith("this torch is a CUDA build, but the machine has an AMD GPU")
    assert "rm -rf .venv && make setup" in warning
    assert backend.warnings_for(CPU_TORCH, "cpu", {"triton": "3.9.0"}) == []


def test_pypis_triton_over_a_rocm_torchs_own_is_named_with_the_repair() -> None:
    tritons = {"pytorch-triton-rocm": "3.5.0", "triton": "3.5.0"}
    (warning,) = backend.warnings_for(ROCM_TORCH, "rocm", tritons)
    assert warning.startswith("pytorch-triton-rocm and triton both write the `triton` package")
    assert "pip uninstall -y triton" in warning
    assert "install --force-reinstall --no-deps pytorch-triton-rocm==3.5.0" in warning


def test_the_backend_script_reports_this_environment() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "torch_backend.py"), "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 0, result.stderr
    import torch

    assert result.stdout.startswith(f"setup: torch {torch.__version__}")
