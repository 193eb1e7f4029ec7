"""Selection of the knowledge texts injected into prompts."""

import pytest

from geak.agent.knowledge import available_texts, knowledge_for, target_text
from geak.snippets import KNOWLEDGE_DIR


def text(name: str) -> str:
    return (KNOWLEDGE_DIR / f"{name}.md").read_text(encoding="utf-8")


def test_available_texts():
    assert available_texts() == ["amd_cdna", "nvidia_ampere", "nvidia_hopper", "triton"]
    for name in available_texts():
        lines = text(name).splitlines()
        assert lines[0].startswith("# ") and 40 <= len(lines) <= 130, name


@pytest.mark.parametrize(
    ("backend", "arch", "gpu", "expected"),
    [
        ("rocm", None, None, "amd_cdna"),
        ("HIP", None, None, "amd_cdna"),
        ("cuda", "gfx942", None, "amd_cdna"),
        (None, "gfx90a", None, "amd_cdna"),
        (None, None, "AMD Instinct MI300X", "amd_cdna"),
        ("cuda", None, "MI250X", "amd_cdna"),
        ("cuda", "sm_80", None, "nvidia_ampere"),
        ("cuda", "sm_86", None, "nvidia_ampere"),
        ("cuda", "sm_89", None, "nvidia_ampere"),
        ("cuda", "8.6", None, "nvidia_ampere"),
        ("cuda", None, "NVIDIA A100-SXM4-80GB", "nvidia_ampere"),
        ("cuda", None, "NVIDIA A10G", "nvidia_ampere"),
        ("cuda", None, "NVIDIA L40S", "nvidia_ampere"),
        ("cuda", None, "NVIDIA GeForce RTX 3090", "nvidia_ampere"),
        ("cuda", None, "NVIDIA GeForce RTX 4090", "nvidia_ampere"),
        ("cuda", "sm_90", None, "nvidia_hopper"),
        ("cuda", "sm_90a", None, "nvidia_hopper"),
        ("cuda", "sm_100", None, "nvidia_hopper"),
        ("cuda", "9.0", None, "nvidia_hopper"),
        ("cuda", None, "NVIDIA H100 80GB HBM3", "nvidia_hopper"),
        ("cuda", None, "NVIDIA H200", "nvidia_hopper"),
        ("cuda", None, "NVIDIA GH200 480GB", "nvidia_hopper"),
        ("cuda", "sm_90", "NVIDIA A100-SXM4-80GB", "nvidia_hopper"),  # the arch decides
        ("cuda", "sm_75", None, None),
        ("cuda", None, "Tesla V100-SXM2-16GB", None),
        ("rocm", "gfx1100", None, None),  # RDNA: 32-wide waves, not CDNA
        (None, None, "AMD Radeon RX 7900 XTX", None),
        ("cuda", None, None, None),
        (None, None, None, None),
    ],
)
def test_target_selection(backend, arch, gpu, expected):
    assert target_text(backend, arch, gpu) == expected


def test_knowledge_for_joins_general_and_target_texts():
    hopper = knowledge_for("cuda", "sm_90")
    assert hopper.startswith(text("triton").rstrip())
    assert hopper.endswith(text("nvidia_hopper"))
    assert "wgmma" in hopper and "waves_per_eu" not in hopper
    amd = knowledge_for("rocm", target_gpu="AMD Instinct MI300X")
    assert amd.endswith(text("amd_cdna")) and "waves_per_eu" in amd


def test_unknown_target_gets_the_general_text_and_a_note():
    unknown = knowledge_for("cuda", "sm_75", "Tesla T4")
    general = text("triton").rstrip()
    assert unknown.startswith(general)
    note = unknown[len(general) :].strip()
    assert note.count("\n") == 0
    assert "backend=cuda, arch=sm_75, gpu=Tesla T4" in note
    assert "the target (not given) is not a known" in knowledge_for(None)
